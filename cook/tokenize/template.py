"""Conversation -> layout (text runs, control ids) from the tokenizer's Jinja ``chat_template`` (template mode).

The template runs ONCE per record on **sentinels**: every content part (a turn's content, an
assistant's out-of-band reasoning) is passed as ``<lead ws>`` + ``\\U000f00c0<k>\\U000f00c1`` +
``<trail ws>``, the part's own edge whitespace around a unique marker, so ``| trim``/``.strip()`` in
the template act on it as on the real text. What lies between two sentinels is the template's
**markup**: it alone is split at the tokenizer's special tokens (the only source of control tokens),
and the data text goes back in place of each sentinel as ``Text`` (encoded with special-token
matching off). For benign text that is exactly Hugging Face's render-split-encode::

    Llama-3, user "Hi", assistant "Yo"   (rendered with sentinels S0, S1)
    <|begin_of_text|><|start_header_id|>user<|end_header_id|>\\n\\nS0<|eot_id|><|start_header_id|>...
    layout: [<|begin_of_text|> <|start_header_id|>] "user" [<|end_header_id|>] "\\n\\nHi" [<|eot_id|> ...]
            ... "\\n\\n" + "Yo" (target chars) [<|eot_id|>] (target)

Targets: each target assistant turn's parts, the markup between its own parts (e.g. ``</think>``), and
the control token that closes its last part (the first one in the markup after it, past whitespace
only): ``<|eot_id|>``, ``</s>``, ``<end_of_turn>``, ``<|end|>``, ``<|im_end|>``. Never the header.

Where a target part has edge whitespace, a second render with bare sentinels tells how much of it
the template kept (it belongs to the content, the rest is markup). A template that raises, or that
renders a part zero times, several times or out of order rejects the record (``template_error``).
Media parts become cook's placeholders in place (SPEC §5), whatever the template prints for media.
"""

from __future__ import annotations

import itertools
import json
import re
import weakref
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from cook.errors import Rejected, RejectReason
from cook.tokenize.assemble import Layout, LayoutBuilder
from cook.tokenize.chat_format import MediaGroups, Piece, Text, merge_text, part_pieces
from cook.tokenize.targets import target_flags
from cook.tokenize.template_calls import common_prefix, tool_call_markup
from cook.tokenize.template_check import (
    SENTINEL_CLOSE,
    SENTINEL_OPEN,
    SENTINEL_RE,
    content_tests,
    filters_content,
    held_literal,
    layout_text,
    marked_render,
    real_texts,
    rebuild,
    rewritten_parts,
    with_real_text,
)
from cook.tokenize.tokenizer import ChatTokenizer
from cook.types import Conversation, TextPart

SPLIT_CACHE_ENTRIES = 4096  # distinct markup strings kept split (tools JSON makes some per-record ones)


class Slot(NamedTuple):
    """One content part as the template sees it: ``lead + sentinel + trail``; ``core`` holds its pieces
    (a named tuple: one is made per message part of every record)."""

    turn: int
    key: str  # the message field it fills: "content" or "reasoning_content"
    target: bool
    lead: str
    core: tuple[Piece, ...]
    trail: str
    required: bool = True  # the template must render it: a content, unless its message has tool calls


class TemplateContext:
    """What rendering needs from the tokenizer, built once per tokenizer."""

    def __init__(self, tokenizer: ChatTokenizer) -> None:
        import jinja2
        from transformers.utils.chat_template_utils import render_jinja_template

        hf = tokenizer.hf
        self.render_jinja: Any = render_jinja_template
        self.failures: tuple[type[BaseException], ...] = (
            jinja2.TemplateError,
            TypeError,
            ValueError,
            KeyError,
            IndexError,
            AttributeError,
            ArithmeticError,
        )
        self.templates = {False: hf.get_chat_template(None, None), True: hf.get_chat_template(None, [{}])}
        self.compiled: dict[bool, Any] | None = None
        try:  # the compiled template itself, as render_jinja_template runs it (our inputs are plain JSON already)
            from transformers.utils.chat_template_utils import _alias_reasoning_fields, _compile_jinja_template

            self.compiled = {tools: _compile_jinja_template(t) for tools, t in self.templates.items()}
            self.alias_reasoning: Any = _alias_reasoning_fields
        except (ImportError, jinja2.TemplateError):
            self.compiled = None  # fall back to the public function (a broken template rejects each record)
        self.special_tokens = dict(hf.special_tokens_map)
        self.ids = {**tokenizer.special_ids, **tokenizer.control_ids}
        longest_first = sorted(tokenizer.special_ids, key=len, reverse=True)
        self.control_re = re.compile("(" + "|".join(map(re.escape, longest_first)) + ")") if longest_first else None
        self._splits: dict[str, list[str | int]] = {}
        self.names = {token_id: name for name, token_id in self.ids.items()}
        self.lstrip_ids, self.rstrip_ids = tokenizer.lstrip_ids, tokenizer.rstrip_ids
        self.lstrip_names = tuple(name for name, i in tokenizer.special_ids.items() if i in self.lstrip_ids)
        self.rstrip_names = tuple(name for name, i in tokenizer.special_ids.items() if i in self.rstrip_ids)
        source = "\n".join(t for t in self.templates.values() if t)
        self.content_tests = content_tests(source)
        self.filters_content = filters_content(source)

    def render(self, messages: list[dict[str, Any]], tools: list[Any] | None) -> str:
        try:
            if self.compiled is not None:
                return str(
                    self.compiled[tools is not None].render(
                        # HF's aliasing of reasoning fields: identity for messages without any
                        messages=self.alias_reasoning(messages) if _reasoning(messages) else messages,
                        tools=tools,
                        documents=None,
                        add_generation_prompt=False,
                        **self.special_tokens,
                    )
                )
            rendered, _ = self.render_jinja(
                conversations=[messages],
                tools=tools,
                chat_template=self.templates[tools is not None],
                **self.special_tokens,
            )
        except self.failures as err:
            raise Rejected(RejectReason.TEMPLATE_ERROR, f"the chat template failed: {err}") from None
        return str(rendered[0])

    def _split(self, markup: str) -> list[str | int]:
        """Markup -> its text and control-token ids, in order (split as HF splits at added tokens);
        cached, since a template writes the same markup again and again."""
        parts = self._splits.get(markup)
        if parts is not None:
            return parts
        # (the whitespace that lstrip/rstrip tokens swallow is dropped by assemble.LayoutBuilder)
        pieces = [markup] if self.control_re is None else self.control_re.split(markup)
        parts = [self.ids[p] if i % 2 else p for i, p in enumerate(pieces) if p or i % 2]
        if len(self._splits) < SPLIT_CACHE_ENTRIES:
            self._splits[markup] = parts
        return parts

    def add_markup(self, builder: LayoutBuilder, markup: str, inner: bool, closing: bool) -> None:
        """Append the template's markup: its text, and its control tokens. ``inner``: all of it is target
        (between two parts of a target turn); ``closing``: its first control token, past whitespace
        only, closes a target turn."""
        for part in self._split(markup):
            if type(part) is int:
                builder.control(part, inner or closing)
                closing = False
            else:
                closing = closing and part.isspace()  # type: ignore[union-attr]
                builder.text(part, inner, markup=True)  # type: ignore[arg-type]


_CONTEXTS: weakref.WeakKeyDictionary[ChatTokenizer, TemplateContext] = weakref.WeakKeyDictionary()


def template_context(tokenizer: ChatTokenizer) -> TemplateContext:
    context = _CONTEXTS.get(tokenizer)
    if context is None:
        context = _CONTEXTS[tokenizer] = TemplateContext(tokenizer)
    return context


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _check_markup_data(value: Any, context: TemplateContext, what: str) -> None:
    """Data the template prints as markup (tool definitions, tool calls, a tool call id): a control-token
    string (or a sentinel character) there would become markup, so it rejects the record."""
    for text in _strings(value):
        if (
            (context.control_re is not None and context.control_re.search(text))
            or SENTINEL_OPEN in text
            or SENTINEL_CLOSE in text
        ):
            raise Rejected(RejectReason.TEMPLATE_ERROR, f"{what} holds a control-token string")


def _tools(conv: Conversation, context: TemplateContext) -> list[Any] | None:
    if not conv.tools:
        return None
    try:
        tools = json.loads(conv.tools)
    except ValueError:
        raise Rejected(RejectReason.TEMPLATE_ERROR, "tools is not valid JSON") from None
    tools = tools if isinstance(tools, list) else [tools]
    _check_markup_data(tools, context, "a tool definition")
    return list(tools)


def _slot(turn: int, key: str, target: bool, parts: Sequence[Any], media: MediaGroups, required: bool = True) -> Slot:
    if len(parts) == 1 and isinstance(parts[0], TextPart):  # the common case: one text part
        text = parts[0].text
        if SENTINEL_OPEN in text or SENTINEL_CLOSE in text:
            raise Rejected(RejectReason.TEMPLATE_ERROR, "the text holds cook's sentinel characters U+F00C0/U+F00C1")
        core = text.strip()
        if not core:
            return Slot(turn, key, target, text, (), "", required)
        start = text.index(core[0])
        return Slot(turn, key, target, text[:start], (Text(core, target),), text[start + len(core) :], required)
    parts = list(merge_text(parts))
    lead = trail = ""
    if parts and isinstance(parts[0], TextPart):
        text = parts[0].text
        lead, rest = text[: len(text) - len(text.lstrip())], text.lstrip()
        parts[0] = TextPart(rest)
    if parts and isinstance(parts[-1], TextPart):
        text = parts[-1].text
        trail, parts[-1] = text[len(text.rstrip()) :], TextPart(text.rstrip())
    for part in parts:
        if isinstance(part, TextPart) and (SENTINEL_OPEN in part.text or SENTINEL_CLOSE in part.text):
            raise Rejected(RejectReason.TEMPLATE_ERROR, "the text holds cook's sentinel characters U+F00C0/U+F00C1")
    pieces: list[Piece] = []
    part_pieces([p for p in parts if not (isinstance(p, TextPart) and not p.text)], media, target, pieces)
    return Slot(turn, key, target, lead, tuple(pieces), trail, required)


def _reasoning(messages: list[dict[str, Any]]) -> bool:
    return any(m.get(key) is not None for m in messages for key in ("reasoning_content", "thinking", "reasoning"))


def _messages(
    conv: Conversation, flags: Sequence[bool], media: MediaGroups, context: TemplateContext, blank_as_text: bool = False
) -> tuple[list[dict[str, Any]], list[Slot], list[int]]:
    """(the messages the template renders, the slots, the target turns that have tool calls).

    A message with tool calls gets them as its ``tool_calls`` (parsed, arguments as the record gave
    them), and its content as Hugging Face passes it when it has none: ``""``, or no key when the
    record gave ``null`` or nothing. Its content may go unrendered (Llama-3.1 and Mistral print only the
    calls)."""
    messages: list[dict[str, Any]] = []
    slots: list[Slot] = []
    calling: list[int] = []
    for number, (turn, target) in enumerate(zip(conv.turns, flags, strict=True)):
        message: dict[str, Any] = {"role": str(turn.role)}
        parts: list[Slot] = []
        if turn.reasoning:
            parts.append(_slot(number, "reasoning_content", target, (TextPart(turn.reasoning),), media, False))
        if turn.content or not turn.tool_calls:
            parts.append(_slot(number, "content", target, turn.content, media, not turn.tool_calls))
        elif not turn.content_absent:
            message["content"] = ""
        for slot in parts:
            if slot.core or not blank_as_text:
                message[slot.key] = _marked(slot, len(slots))
                slots.append(slot)
            elif slot.key == "reasoning_content" or not turn.content_absent:
                # ``blank_as_text``: an empty or whitespace-only part is passed as its real text (the
                # template tests it for truth, as Nemotron's ``content | trim | length > 0``) and printed
                # as markup
                message[slot.key] = slot.lead
        if turn.tool_calls:
            calls = [json.loads(call) for call in turn.tool_calls]
            _check_markup_data(calls, context, f"message {number}'s tool_calls")
            message["tool_calls"] = calls
            if target:
                calling.append(number)
        for key, value in (("tool_call_id", turn.tool_call_id), ("name", turn.name)):
            if value is not None:
                _check_markup_data(value, context, f"message {number}'s {key}")
                message[key] = value
        messages.append(message)
    return messages, slots, calling


def _marked(slot: Slot, index: int, edges: bool = True) -> str:
    sentinel = f"{SENTINEL_OPEN}{index}{SENTINEL_CLOSE}"
    return slot.lead + sentinel + slot.trail if edges else sentinel


def _segments(rendered: str, slots: Sequence[Slot], last_turn: int | None = None) -> tuple[list[int], list[str]]:
    """(the slots found, in order; the markup around them: one more string than slots). Every content
    (of the turns up to ``last_turn``, when the render holds only those) must come exactly once and all
    in order; a reasoning the template does not print is dropped, and so is the content of a message
    with tool calls."""
    found = [int(m.group(1)) for m in SENTINEL_RE.finditer(rendered)]
    last = len(slots) if last_turn is None else last_turn
    missing = [k for k, slot in enumerate(slots) if slot.required and slot.turn <= last and k not in found]
    if missing or found != sorted(set(found)) or any(k >= len(slots) for k in found):
        why = (
            f"message(s) {sorted({slots[k].turn for k in missing})} never"
            if missing
            else "a part twice or out of order"
        )
        raise Rejected(RejectReason.TEMPLATE_ERROR, f"the chat template renders {why} (parts {found[:12]})")
    return found, SENTINEL_RE.split(rendered)[::2]


def _kept_edges(segment: str, markup: str, trail: str, lead: str) -> tuple[str, str] | None:
    """``segment == kept_trail + markup + kept_lead``, the kept part of the previous part's trailing
    whitespace and of the next part's leading whitespace; None when no such split exists."""
    extra = len(segment) - len(markup)
    for kept_lead in range(min(len(lead), extra), -1, -1):
        kept_trail = extra - kept_lead
        if (
            segment[kept_trail : kept_trail + len(markup)] == markup
            and lead.endswith(segment[len(segment) - kept_lead :] if kept_lead else "")
            and trail.startswith(segment[:kept_trail])
        ):
            return segment[:kept_trail], segment[len(segment) - kept_lead :] if kept_lead else ""
    return None


def _may_keep(context: TemplateContext, segments: list[str], present: list[Slot], j: int) -> bool:
    """Whether segment ``j`` may hold a target part's own edge whitespace: a kept trail is a prefix of
    the trailing whitespace of the target part before the segment, a kept lead a suffix of the leading
    whitespace of the target part after it. Where neither first nor last character can be one, or the
    whitespace there touches a control token that swallows it (Phi-3's ``rstrip`` ``<|assistant|>``),
    the segment's edges are markup and need no second render."""
    segment = segments[j]
    before = present[j - 1] if j else None
    after = present[j] if j < len(present) else None
    if before is not None and before.target and before.trail and segment[:1] and before.trail.startswith(segment[0]):
        rest = segment.lstrip()
        if not any(rest.startswith(name) for name in context.lstrip_names):
            return True
    if after is not None and after.target and after.lead and segment and after.lead.endswith(segment[-1]):
        rest = segment.rstrip()
        return not any(rest.endswith(name) for name in context.rstrip_names)
    return False


def _edges(
    context: TemplateContext,
    messages: list[dict[str, Any]],
    tools: list[Any] | None,
    slots: list[Slot],
    order: list[int],
    segments: list[str],
) -> list[tuple[str, str, str]]:
    """Per segment: (kept trailing whitespace of the part before, markup, kept leading whitespace of the
    part after). Only a target's whitespace matters, so a second render runs only where a target has some."""
    present = [slots[k] for k in order]
    if not any(_may_keep(context, segments, present, j) for j in range(len(segments))):
        return [("", segment, "") for segment in segments]
    bare = [dict(m) for m in messages]
    for index, slot in enumerate(slots):
        bare[slot.turn][slot.key] = _marked(slot, index, edges=False)
    bare_order, bare_segments = _segments(context.render(bare, tools), slots)
    if bare_order != order:
        raise Rejected(RejectReason.TEMPLATE_ERROR, "the template's output depends on the content's whitespace")
    edges = []
    for j, markup in enumerate(bare_segments):
        trail = present[j - 1].trail if j else ""
        lead = present[j].lead if j < len(present) else ""
        kept = _kept_edges(segments[j], markup, trail, lead)
        if kept is None:
            raise Rejected(RejectReason.TEMPLATE_ERROR, "the template's markup depends on the content's whitespace")
        edges.append((kept[0], markup, kept[1]))
    return edges


def _add_gap(
    context: TemplateContext,
    builder: LayoutBuilder,
    markup: str,
    cuts: Sequence[tuple[int, int, int]],
    owner: int | None,
    after: Slot | None,
) -> None:
    """The markup between two parts. ``owner``: the target turn whose part precedes it (the markup
    continues that turn: inner markup up to its next part, or its closing token); ``cuts``: (start,
    stop, turn) of target turns' tool-call markup in it, all target, each continuing its turn."""
    position = 0
    for start, stop, turn in cuts:
        own = owner == turn
        context.add_markup(builder, markup[position:start], own, owner is not None and not own)
        context.add_markup(builder, markup[start:stop], True, False)
        owner, position = turn, stop
    own = owner is not None and after is not None and after.turn == owner
    context.add_markup(builder, markup[position:], own, owner is not None and not own)


class _BlankParts(Exception):
    """The template renders an empty or whitespace-only part otherwise than its sentinel."""


def render_template(conv: Conversation, media: MediaGroups, train_on: str, context: TemplateContext) -> Layout:
    """The layout of one conversation in template mode; ``Rejected(template_error)`` if the template fails.

    An empty or whitespace-only part is first passed as a sentinel like any other (its whitespace is
    the target's where the template prints it); when the template renders it otherwise (it tests the
    part for truth), the record is laid out again with such parts passed as their real text."""
    try:
        return _render(conv, media, train_on, context, False)
    except _BlankParts:
        return _render(conv, media, train_on, context, True)


def _render(
    conv: Conversation, media: MediaGroups, train_on: str, context: TemplateContext, blank_as_text: bool
) -> Layout:
    flags = target_flags(conv.turns, train_on)
    messages, slots, calling = _messages(conv, flags, media, context, blank_as_text)
    tools = _tools(conv, context)
    rendered = context.render(messages, tools)
    order, segments = _segments(rendered, slots)
    cuts: dict[int, list[tuple[int, int, int]]] = {}

    def render_segments(some: list[dict[str, Any]], last_turn: int) -> tuple[list[int], list[str]]:
        return _segments(context.render(some, tools), slots, last_turn)

    for turn in calling:
        cut = tool_call_markup(render_segments, messages, slots, (order, segments), turn, context.control_re)
        if cut is not None:
            segment, start, stop = cut
            calls = segments[segment][start:stop]  # from its first character past whitespace, like a header's
            cuts.setdefault(segment, []).append((start + len(calls) - len(calls.lstrip()), stop, turn))
    placed = {slots[k].turn for k in order} | {turn for found in cuts.values() for _, _, turn in found}
    for turn, target in enumerate(flags):
        if target and turn not in placed:
            closing = _closing_of_empty_turn(context, messages, tools, rendered, turn)
            if closing is not None:
                cuts.setdefault(closing[0], []).append((closing[1], closing[1], turn))
    edges = _edges(context, messages, tools, slots, order, segments)
    lay = _build(context, slots, order, edges, cuts)
    if not blank_as_text and any(not slot.core for slot in slots):
        texts = real_texts(slots)
        if texts is not None:
            real = [with_real_text(m, texts) for m in messages]
            if layout_text(lay, context.names) != context.render(real, tools):  # type: ignore[arg-type]
                raise _BlankParts
    return _checked(context, messages, tools, slots, (order, segments), lay, (edges, cuts), calling)


def _closing_of_empty_turn(
    context: TemplateContext, messages: list[dict[str, Any]], tools: list[Any] | None, rendered: str, turn: int
) -> tuple[int, int] | None:
    """(segment, offset) just before the control token that closes a target turn with no part in the
    render (an empty or whitespace-only reply, tool calls the template does not print): the last
    control token of what the turn adds to the render of the turns before it (both renders cut where
    they leave the whole one). That token is the turn's target, as
    ``apply_chat_template(return_assistant_tokens_mask=True)`` marks it. None where that part holds no
    control token (the turn has no target)."""
    if context.control_re is None:
        return None
    try:
        before = context.render(messages[:turn], tools) if turn else ""
        through = context.render(messages[: turn + 1], tools)
    except Rejected:
        return None
    # what the whole render shares with each (a template may end every render with an EOS)
    start, stop = (common_prefix(part, rendered) for part in (before, through))
    last = None
    for match in context.control_re.finditer(rendered, start, stop):
        last = match.start()
    if last is None:
        return None
    segment, start = 0, 0
    for match in SENTINEL_RE.finditer(rendered):
        if match.end() > last:
            break
        segment, start = segment + 1, match.end()
    return segment, last - start


def _build(
    context: TemplateContext,
    slots: list[Slot],
    order: list[int],
    edges: list[tuple[str, str, str]],
    cuts: dict[int, list[tuple[int, int, int]]],
) -> Layout:
    """The layout from the markup between the parts (with the kept edge whitespace) and the parts."""
    present = [slots[k] for k in order]
    builder = LayoutBuilder(context.lstrip_ids, context.rstrip_ids)
    for j, (kept_trail, markup, kept_lead) in enumerate(edges):
        before = present[j - 1] if j else None
        after = present[j] if j < len(present) else None
        target_before = before is not None and before.target
        shift = 0
        if target_before and kept_trail:
            builder.text(kept_trail, True)  # data whitespace
            shift = len(kept_trail)
        else:
            markup = kept_trail + markup
        owner = before.turn if before is not None and target_before else None
        if j in cuts:
            gap_cuts = [(max(a - shift, 0), min(b - shift, len(markup)), t) for a, b, t in sorted(cuts[j])]
            if any(b > c for (_, b, _), (c, _, _) in itertools.pairwise(gap_cuts)):
                why = "the chat template prints tool calls of two messages as one"
                raise Rejected(RejectReason.TEMPLATE_ERROR, why)
            _add_gap(context, builder, markup, gap_cuts, owner, after)
        else:  # the common case: no tool-call markup in this gap
            own = owner is not None and after is not None and after.turn == owner
            context.add_markup(builder, markup, own, owner is not None and not own)
        if after is not None:
            if kept_lead:
                builder.text(kept_lead, after.target)
            for piece in after.core:
                if type(piece) is Text:
                    builder.text(piece.text, piece.target)
                else:
                    builder.piece(piece, context.ids)
    return builder.finish()


def _checked(
    context: TemplateContext,
    messages: list[dict[str, Any]],
    tools: list[Any] | None,
    slots: list[Slot],
    render: tuple[list[int], list[str]],
    lay: Layout,
    layout_parts: tuple[list[tuple[str, str, str]], dict[int, list[tuple[int, int, int]]]],
    calling: list[int],
) -> Layout:
    """``lay``, unless the template may transform the content (``template_check``: it tests it with a
    literal the record's text holds, or filters it) and the real render differs. Then, where the
    template only rewrote each part in place (``tojson``), the same layout with each part's rewritten
    text; otherwise the layout of the real render (``rebuild``), or ``Rejected(template_error)`` where
    the data cannot be placed in it. Data with control-token strings keeps ``lay`` (cook's text)."""
    if not context.filters_content and context.content_tests is None:
        return lay  # the template never looks inside content
    texts = real_texts(slots)
    if texts is None or not (context.filters_content or held_literal(context.content_tests, texts.values())):
        return lay
    if context.control_re is not None and any(context.control_re.search(text) for text in texts.values()):
        return lay  # data with control-token strings: cook's text, never HF's tokens (the documented class)
    real = [with_real_text(m, texts) for m in messages]
    rendered = context.render(real, tools)  # type: ignore[arg-type]
    if layout_text(lay, context.names) == rendered:
        return lay
    marked = marked_render(context, messages, tools, texts)
    rewritten = rewritten_parts(marked, render)
    if rewritten is not None:
        order = render[0]
        parts = [
            slot._replace(core=(Text(rewritten[k], slot.target),) if rewritten[k] else ()) if k in rewritten else slot
            for k, slot in enumerate(slots)
        ]
        in_place = _build(context, parts, order, *layout_parts)
        if layout_text(in_place, context.names) == rendered:
            return in_place
    if calling:
        raise Rejected(RejectReason.TEMPLATE_ERROR, "the chat template rewrites the content of a turn with tool calls")
    return rebuild(context, rendered, marked, slots, texts, render, [e[2] for e in layout_parts[0]])
