"""``RefRecord`` -> the reference ids and target mask, from Hugging Face alone (``cook validate --reference``).

Ids: ``tokenizer.apply_chat_template(messages, tools=..., tokenize=True)``, with

- ``chat_format: template``: the tokenizer's own template (its ``tool_use`` one when the record has
  tools), the messages as Hugging Face takes them: ``role``, ``content``, ``reasoning_content``,
  ``tool_calls`` (native, as written in the record), and the record's ``tools``;
- ``chat_format: chatml``: ``CHATML_TEMPLATE`` below, a Jinja ChatML template written here from the
  documented format (docs/chat_formats.md): ``<|im_start|>role\\n{body}<|im_end|>\\n`` per turn, no
  default system prompt, assistant thinking as one ``<think>reasoning</think>answer`` block,
  ``tool_calls`` as ``<tool_call>{json}</tool_call>`` text, tool definitions appended to the first
  system turn (``\\n\\n# Tools\\n{json}``) or as a leading system turn.

Masks (a token is a target iff one of its characters lies in a target span):

- the template has ``{% generation %}`` (the ChatML one always does, around each target turn's body and
  ``<|im_end|>``): ``apply_chat_template(return_assistant_tokens_mask=True)``; with a tokenizer's own
  template the runs of that mask are its assistant turns, and the runs of non-target turns are cleared;
- otherwise prefix renders: ``messages[:k]`` (with the generation prompt) and ``messages[:k+1]`` are
  rendered; where they part (or where the whole conversation's render parts from the latter, for a
  template that renders earlier turns without their thinking) turn ``k`` starts; from there in the
  whole render, its content (and reasoning when printed), the whitespace the template kept of them
  (a render with them stripped tells), its tool-call markup (what the render adds over the same turn
  without its calls) and the control token that closes the turn (past whitespace only) are the
  target span. A control token's characters are its own string: whitespace an ``lstrip``/``rstrip``
  token swallows is not;
- where neither decides (a prefix render fails, a template rewrites the content, e.g. splits an
  inline ``</think>`` off, or renders tool calls differently in the whole conversation) the mask is
  ``None`` and only the ids are compared.

Control tokens are the tokenizer's special tokens. A record whose text holds one (a ``<|im_end|>``
typed by a user), or starts or ends with part of one, raises ``ControlText``: cook encodes such text
as plain text, Hugging Face does not, a documented difference (SPEC §5). A non-special added token
(DeepSeek-R1's ``<think>``) in data text is matched by both, so such a record is compared.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from cook import format as fmt
from cook.validate.reference.records import RefMessage, RefRecord

CHATML_TEMPLATE: Final = (
    "{%- for m in messages -%}"
    "{{- '" + fmt.IM_START + "' + m.role + '\\n' -}}"
    "{%- if m.target -%}{%- generation -%}{{- m.body + '" + fmt.IM_END + "' -}}{%- endgeneration -%}"
    "{%- else -%}{{- m.body + '" + fmt.IM_END + "' -}}{%- endif -%}"
    "{{- '\\n' -}}"
    "{%- endfor -%}"
)
_GENERATION: Final = re.compile(r"\{%-?\s*generation\s*-?%\}")


class ControlText(Exception):
    """The record's text holds (part of) a control-token string; the message names it."""


class RenderFailed(Exception):
    """The reference template raised on a record cook packed; the message says what it raised."""


@dataclass(frozen=True)
class Reference:
    ids: list[int]
    mask: list[int] | None  # None: the reference cannot decide the targets (ids compared only)
    masks_by: str  # "generation", "prefix renders", or why the mask is None


class Renderer:
    """One tokenizer, loaded once; ``reference(record)`` for each sampled record."""

    def __init__(self, tokenizer_path: str, chat_format: str, normalize_thinking: bool) -> None:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
        self.chat_format = chat_format
        self.normalize_thinking = normalize_thinking
        added = self.tokenizer.added_tokens_decoder
        self.added = {int(i): t.content for i, t in added.items() if t.content}  # id -> its own characters
        # control tokens: the special ones (a non-special added token such as DeepSeek-R1's <think> is
        # matched in data text by Hugging Face and cook alike)
        controls = sorted({t.content for t in added.values() if t.content and t.special}, key=len)
        self.controls = controls[::-1]  # longest first: the regex matches as Hugging Face's trie does
        self.control_re = re.compile("|".join(map(re.escape, self.controls))) if controls else None
        self.heads = {t[:n] for t in controls for n in range(2, len(t))}  # proper prefixes of 2+ characters
        self.tails = {t[-n:] for t in controls for n in range(2, len(t))}
        self.longest = max(map(len, controls), default=0)

    def reference(self, record: RefRecord) -> Reference:
        """Raises ``ControlText`` (skip the record) or ``RenderFailed`` (the template raised)."""
        if self.chat_format == "chatml":
            turns, data = chatml_turns(record, self.normalize_thinking and not record.preformatted)
            self._check_text(data)
            out = self._apply(turns, None, CHATML_TEMPLATE, mask=True)
            return Reference(list(out["input_ids"]), list(out["assistant_masks"]), "generation")
        messages, tools = hf_messages(record)
        self._check_text(template_data(record))
        template = self.tokenizer.get_chat_template(None, tools)
        if _GENERATION.search(template):
            out = self._apply(messages, tools, None, mask=True)
            mask = _target_runs(list(out["assistant_masks"]), record.messages)
            return Reference(list(out["input_ids"]), mask, "generation" if mask else "unmatched generation runs")
        ids = list(self._apply(messages, tools, None, mask=False)["input_ids"])
        mask, why = self._prefix_mask(messages, tools, record.messages, ids)
        return Reference(ids, mask, why)

    def _apply(
        self,
        messages: list[dict[str, Any]],
        tools: Any,
        template: str | None,
        mask: bool,
        tokenize: bool = True,
        generation_prompt: bool = False,
    ) -> Any:
        try:
            return self.tokenizer.apply_chat_template(
                messages,
                tools=tools,
                chat_template=template,
                tokenize=tokenize,
                return_dict=True,
                return_assistant_tokens_mask=mask,
                add_generation_prompt=generation_prompt,
            )
        except Exception as err:  # a template's own raise_exception, or any Jinja/type error: a finding
            raise RenderFailed(f"{type(err).__name__}: {err}"[:200]) from None

    def _render(self, messages: list[dict[str, Any]], tools: Any, generation_prompt: bool) -> str:
        return str(self._apply(messages, tools, None, False, tokenize=False, generation_prompt=generation_prompt))

    def _check_text(self, strings: Iterator[str]) -> None:
        if self.control_re is None:
            return
        for text in strings:
            found = self.control_re.search(text)
            if found:
                raise ControlText(f"text holds {found.group(0)!r}")
            for n in range(2, min(self.longest, len(text) + 1)):
                if text[-n:] in self.heads or text[:n] in self.tails:
                    raise ControlText(f"text starts or ends with part of a control token ({text[:n]!r}, {text[-n:]!r})")

    def _prefix_mask(
        self, messages: list[dict[str, Any]], tools: Any, turns: Sequence[RefMessage], ids: list[int]
    ) -> tuple[list[int] | None, str]:
        """Target spans from prefix renders (module docstring), placed on tokens by their offsets."""
        try:
            full = self._render(messages, tools, False)
            spans = []
            for k, turn in enumerate(turns):
                if not turn.target:
                    continue
                before = self._render(messages[:k], tools, True) if k else ""
                upto = self._render(messages[: k + 1], tools, False)
                shared = _common_prefix(full, upto)
                anchor = min(_common_prefix(before, upto), shared)  # turn k's text starts here, in both
                inserted = self._tool_markup(messages, tools, k, upto) if turn.tool_calls else None
                if inserted is not None:
                    if inserted[1] > shared:
                        return None, f"turn {k}'s tool calls render differently in the whole conversation"
                    inserted = (max(inserted[0] - anchor, 0), inserted[1] - anchor)
                bare = self._bare_render(messages, tools, k, turn)
                if bare is not None and not bare.startswith(full[:anchor]):
                    return None, f"turn {k}'s header depends on its whitespace"
                span = self._turn_span(full[anchor:], turn, inserted, None if bare is None else bare[anchor:])
                if span is None:
                    return None, f"turn {k} not found in the render"
                spans.append((anchor + span[0], anchor + span[1]))
        except RenderFailed as err:
            return None, f"a prefix render failed ({err})"
        encoded = self.tokenizer(full, add_special_tokens=False, return_offsets_mapping=True)
        if list(encoded["input_ids"]) != ids:
            return None, "the render's offsets do not match the ids"
        mask = []
        for token, (a, b) in zip(ids, encoded["offset_mapping"], strict=True):
            own = self.added.get(token)
            if own is not None and own in full[a:b]:  # an lstrip/rstrip token's swallowed whitespace is not its own
                a = full.index(own, a, b)
                b = a + len(own)
            mask.append(int(any(a < end and (b > start or (a == b and start <= a)) for start, end in spans)))
        return mask, "prefix renders"

    def _bare_render(self, messages: list[dict[str, Any]], tools: Any, k: int, turn: RefMessage) -> str | None:
        """The conversation rendered with turn ``k``'s content and reasoning stripped (None when neither
        has edge whitespace): where its parts move tells how much of their whitespace the template kept."""
        if all(text == text.strip() for text in (turn.content, turn.reasoning or "")):
            return None
        bare = dict(messages[k])
        for key in ("content", "reasoning_content"):
            if isinstance(bare.get(key), str):
                bare[key] = bare[key].strip()
        return self._render([*messages[:k], bare, *messages[k + 1 :]], tools, False)

    def _tool_markup(self, messages: list[dict[str, Any]], tools: Any, k: int, upto: str) -> tuple[int, int]:
        """(start, end) in ``upto`` of what turn ``k``'s tool calls add: the render of ``messages[:k+1]``
        against the same without the calls (content ``""`` where it had none)."""
        bare = {key: value for key, value in messages[k].items() if key != "tool_calls"}
        bare["content"] = bare.get("content") or ""
        without = self._render([*messages[:k], bare], tools, False)
        start = _common_prefix(upto, without)
        tail = _common_prefix(upto[start:][::-1], without[start:][::-1])
        return start, len(upto) - tail

    def _turn_span(
        self, segment: str, turn: RefMessage, inserted: tuple[int, int] | None, bare: str | None
    ) -> tuple[int, int] | None:
        """(start, end) in ``segment`` (the text turn ``k`` adds) of its target: its parts in order, the
        whitespace the template kept of them (``bare``: the same segment rendered with the parts
        stripped; None when they have no edge whitespace), its tool-call markup (``inserted``), and the
        control token that closes it."""
        found = _parts(segment, turn)
        if found is None:
            return None
        kept_lead = kept_trail = 0
        if found and bare is not None:
            plain = _parts(bare, turn)
            if plain is None or len(plain) != len(found):
                return None
            kept_lead = found[0][0] - plain[0][0]
            kept_trail = (len(segment) - found[-1][1]) - (len(bare) - plain[-1][1])
            lead, trail = found[0][2], found[-1][2]
            if not (
                0 <= kept_lead <= len(lead) - len(lead.lstrip()) and 0 <= kept_trail <= len(trail) - len(trail.rstrip())
            ):
                return None
        if found:
            found[0] = (found[0][0] - kept_lead, found[0][1], found[0][2])
            found[-1] = (found[-1][0], found[-1][1] + kept_trail, found[-1][2])
        if inserted is not None and inserted[1] > inserted[0]:
            found = sorted([*found, (inserted[0], inserted[1], "")])
        if not found:  # an empty content (and no reasoning printed): the closing token alone
            blank = len(segment) - len(segment.lstrip())
            found.append((blank, blank, ""))
        start, end = found[0][0], found[-1][1]
        after = end
        while after < len(segment) and segment[after].isspace():
            after += 1
        token = next((t for t in self.controls if segment.startswith(t, after)), None)
        return start, (after + len(token) if token else end)


def _parts(segment: str, turn: RefMessage) -> list[tuple[int, int, str]] | None:
    """(start, end, part) of the turn's stripped reasoning (when printed) and content, the first time
    they occur in ``segment`` (the text from where the turn starts), in order; None when a non-empty
    content is not there (the template rewrote it)."""
    reasoning, content = (turn.reasoning or "").strip(), turn.content.strip()
    at_content = segment.find(content) if content else -1
    if content and at_content < 0:
        return None
    at_reasoning = segment.find(reasoning) if reasoning else -1
    if at_reasoning >= 0 and content:
        after = segment.find(content, at_reasoning + len(reasoning))
        if at_reasoning > at_content or after < 0:
            at_reasoning = -1  # not printed for this turn (found later, in another turn)
        else:
            at_content = after
    found = []
    if at_reasoning >= 0:
        found.append((at_reasoning, at_reasoning + len(reasoning), turn.reasoning or ""))
    if at_content >= 0:
        found.append((at_content, at_content + len(content), turn.content))
    return found


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of two strings (a binary search over slices)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def chatml_turns(record: RefRecord, normalize: bool) -> tuple[list[dict[str, Any]], Iterator[str]]:
    """The turns of the ChatML reference template (``role``, ``body``, ``target``) and the data text in them."""
    turns: list[dict[str, Any]] = []
    data: list[str] = []
    for message in record.messages:
        text = message.content + "".join(
            f"<tool_call>{json.dumps(call, ensure_ascii=False)}</tool_call>" for call in message.tool_calls
        )
        if normalize and message.role == "assistant":
            reasoning, answer = _split_thinking(message.reasoning, text)
            body = fmt.THINK_START + reasoning + fmt.THINK_END + answer
            data += [reasoning, answer]
        else:
            body = text
            data.append(text)
        turns.append({"role": message.role, "body": body, "target": message.target})
    if record.tools is not None:
        tools = json.dumps(record.tools, ensure_ascii=False)  # the record's key order
        data.append(tools)
        if turns and turns[0]["role"] == "system":
            turns[0]["body"] += f"\n\n# Tools\n{tools}"
        else:
            turns.insert(0, {"role": "system", "body": f"# Tools\n{tools}", "target": False})
    return turns, iter(data)


def _split_thinking(reasoning: str | None, text: str) -> tuple[str, str]:
    """(reasoning, answer): ``reasoning_content`` when given, else the text up to the first ``</think>``
    (after a ``<think>`` when there is one); reasoning stripped, answer left-stripped."""
    if reasoning:
        return reasoning.strip(), text.lstrip()
    if fmt.THINK_END in text:
        head, _, answer = text.partition(fmt.THINK_END)
        start = head.find(fmt.THINK_START)
        return (head[start + len(fmt.THINK_START) :] if start >= 0 else head).strip(), answer.lstrip()
    return "", text.lstrip()


def hf_messages(record: RefRecord) -> tuple[list[dict[str, Any]], list[Any] | None]:
    """Template mode: the messages and tools as ``apply_chat_template`` takes them."""
    messages = []
    for message in record.messages:
        entry: dict[str, Any] = {"role": message.role, "content": None if message.content_absent else message.content}
        if message.reasoning:
            entry["reasoning_content"] = message.reasoning
        if message.tool_calls:
            entry["tool_calls"] = list(message.tool_calls)
        entry.update(message.extra)
        messages.append(entry)
    tools = record.tools
    return messages, (None if tools is None else tools if isinstance(tools, list) else [tools])


def template_data(record: RefRecord) -> Iterator[str]:
    """Template mode: the data text of a record (contents, reasoning, every string in tool calls and tools)."""
    for message in record.messages:
        yield message.content
        yield message.reasoning or ""
        yield from (value for _, value in message.extra)
        yield from _strings(list(message.tool_calls))
    yield from _strings(record.tools)


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON-like value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _target_runs(mask: list[int], turns: Sequence[RefMessage]) -> list[int] | None:
    """The assistant mask with the runs of non-target assistant turns cleared (run i = assistant turn i);
    None when the runs are not one per assistant turn."""
    targets = [t.target for t in turns if t.role == "assistant"]
    if all(targets):
        return mask
    runs = [i for i in range(len(mask)) if mask[i] and (i == 0 or not mask[i - 1])]
    if len(runs) != len(targets):
        return None
    out = list(mask)
    for start, target in zip(runs, targets, strict=True):
        end = start
        while end < len(out) and mask[end]:
            if not target:
                out[end] = 0
            end += 1
    return out
