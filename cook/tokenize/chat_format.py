"""Conversation -> flat list of pieces in the ChatML format (SPEC §5), before any tokenizer runs.

Every turn renders as ``<|im_start|>`` ``role\\n`` body ``<|im_end|>`` ``\\n``. The body of an
assistant turn starts with exactly one think block (``normalize_thinking``)::

    assistant "<think>\\n plan \\n</think>\\n\\nAnswer"  ->  <think> "plan" </think> "Answer"
    assistant "Answer"                               ->  <think> </think> "Answer"

Pieces are ``Text`` (data text, encoded with control tokens disabled), ``Control`` (one control
token by name) and ``Repeat`` (a placeholder token ``times`` times). ``target`` marks the pieces that
are trained on: a target turn's body and its ``<|im_end|>``. Adjacent ``Text`` pieces (the role
header and the content) are encoded together as one run (``assemble.py``), as Hugging Face encodes
the text between two control tokens; ``template.py`` makes the same pieces from a Jinja template.

Tool definitions (``Conversation.tools``) are appended to the first system turn as
``\\n\\n# Tools\\n<json>``, or become a leading system turn ``# Tools\\n<json>`` when there is none;
a turn's tool calls (``Turn.tool_calls``) follow its content as ``<tool_call>{json}</tool_call>`` text
(``chatml_turns``). ``tool_call_id`` and ``name`` are not rendered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from cook.format import IM_END, IM_START, THINK_END, THINK_START
from cook.tokenize.targets import target_flags
from cook.types import Conversation, MediaItem, Part, TextPart, Turn


class Text(NamedTuple):
    text: str
    target: bool


class Control(NamedTuple):
    name: str
    target: bool


class Repeat(NamedTuple):
    name: str
    times: int
    target: bool


Piece = Text | Control | Repeat
MediaGroups = Sequence[tuple[MediaItem, ...]]


def merge_text(parts: Sequence[Part]) -> tuple[Part, ...]:
    """Join adjacent text parts: ``["Hello ", "world"]`` tokenizes as ``"Hello world"``."""
    out: list[Part] = []
    for part in parts:
        if isinstance(part, TextPart) and out and isinstance(out[-1], TextPart):
            out[-1] = TextPart(out[-1].text + part.text)
        else:
            out.append(part)
    return tuple(out)


def split_thinking_text(text: str, reasoning: str | None) -> tuple[str, str]:
    """(reasoning, answer) of an assistant's text: ``reasoning`` when given, else the text up to its first
    ``</think>`` (after a ``<think>`` when there is one); reasoning stripped, answer left-stripped."""
    if not reasoning and THINK_END in text:
        head, _, text = text.partition(THINK_END)
        start = head.find(THINK_START)
        reasoning = head[start + len(THINK_START) :] if start >= 0 else head
    return (reasoning or "").strip(), text.lstrip()


def split_thinking(turn: Turn) -> tuple[str, tuple[Part, ...]]:
    """Assistant turn -> (reasoning, answer parts), thinking found out of band or inline (in its first text)."""
    content = merge_text(turn.content)
    if not content or not isinstance(content[0], TextPart):
        return (turn.reasoning or "").strip(), content
    reasoning, first = split_thinking_text(content[0].text, turn.reasoning)
    return reasoning, ((TextPart(first),) if first else ()) + content[1:]


TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"


def with_tool_calls(turn: Turn) -> Turn:
    """The turn with its tool calls as ``<tool_call>{json}</tool_call>`` text after its content."""
    calls = "".join([f"{TOOL_CALL_OPEN}{call}{TOOL_CALL_CLOSE}" for call in turn.tool_calls])
    return Turn(turn.role, (*turn.content, TextPart(calls)), turn.loss, turn.reasoning)


def chatml_turns(conv: Conversation, calls_as_text: bool = True) -> tuple[Turn, ...]:
    """The turns ChatML renders: tool calls as text in their turns (unless ``calls_as_text`` is off),
    tool definitions in the first system turn (``conv.turns`` itself when there are neither)."""
    turns = conv.turns
    if calls_as_text and any([turn.tool_calls for turn in turns]):
        turns = tuple(with_tool_calls(turn) if turn.tool_calls else turn for turn in turns)
    tools = conv.tools
    if not tools:
        return turns
    if turns and turns[0].role == "system":
        first = turns[0]
        return (Turn("system", (*first.content, TextPart(f"\n\n# Tools\n{tools}")), first.loss), *turns[1:])
    return (Turn("system", (TextPart(f"# Tools\n{tools}"),)), *turns)


def part_pieces(parts: Sequence[Part], media: MediaGroups, target: bool, out: list[Piece]) -> None:
    """Append the pieces of a turn's parts: text as ``Text``, each media part as its placeholder blocks."""
    for part in merge_text(parts):
        if isinstance(part, TextPart):
            out.append(Text(part.text, target))
            continue
        for block in (block for item in media[part.index] for block in item.blocks):
            if block.prefix:
                out.append(Text(block.prefix, target))
            out.append(Control(block.start, target))
            out.append(Repeat(block.token, block.count, target))
            out.append(Control(block.end, target))


def render(
    conv: Conversation, media: MediaGroups, train_on: str, normalize_thinking: bool, call_tokens: bool = False
) -> list[Piece]:
    """Pieces of one conversation; ``media[i]`` holds the processed items of ``conv.media[i]`` (one, or
    two for a video cooked with its sound track: frames, then audio, both at that media slot).
    ``call_tokens``: the tokenizer has ``<tool_call>`` and ``</tool_call>`` as special tokens, so the
    wrapper of each tool call is those control tokens, as a render of this format would encode."""
    turns = chatml_turns(conv, calls_as_text=not call_tokens)
    out: list[Piece] = []
    normalize = normalize_thinking and not conv.template_applied
    for turn, target in zip(turns, target_flags(turns, train_on), strict=True):
        out.append(Control(IM_START, False))
        out.append(Text(f"{turn.role}\n", False))
        parts = turn.content
        if normalize and turn.role == "assistant":
            reasoning, parts = split_thinking(turn)
            out.append(Control(THINK_START, target))
            if reasoning:
                out.append(Text(reasoning, target))
            out.append(Control(THINK_END, target))
        part_pieces(parts, media, target, out)
        for call in turn.tool_calls if call_tokens else ():
            out += (Control(TOOL_CALL_OPEN, target), Text(call, target), Control(TOOL_CALL_CLOSE, target))
        out.append(Control(IM_END, target))
        out.append(Text("\n", False))
    return out
