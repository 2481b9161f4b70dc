"""Templates that look inside a message's content: find them, and check each record they could change.

Template mode renders every content as a sentinel (``template.py``), so the template's own
``trim``/``strip`` act on the content's edges but any test of the text itself sees the sentinel.
Real templates do test it: DeepSeek-R1 and Qwen3 print ``content.split('</think>')[-1]``, Nemotron 3
Nano drops the thinking of earlier turns with ``'</think>' in c``. On such a record the sentinel
render is not what Hugging Face renders.

The literals a template tests content with (``'X' in``, ``'X' not in``, ``.split('X')``,
``.replace('X', ...)``, ``.startswith('X')``, ``.endswith('X')``, ``.find('X')``, ``.partition('X')``)
are read once per template. A record whose text holds one of them is rendered a second time with
its real text, and the two renders must agree; otherwise the record is rejected with
``template_error`` naming the literal (``docs/chat_formats.md``)::

    DeepSeek-R1, assistant "<think>plan</think>Answer"
    sentinel render  ...<｜Assistant｜>S1<｜end▁of▁sentence｜>          -> content "<think>plan</think>Answer"
    real render      ...<｜Assistant｜>Answer<｜end▁of▁sentence｜>      -> differs: rejected
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from cook.errors import Rejected, RejectReason
from cook.tokenize.assemble import Layout, LayoutBuilder, TextRun
from cook.tokenize.chat_format import Text

if TYPE_CHECKING:
    from cook.tokenize.template import Slot, TemplateContext

# The sentinel that stands for part k in a render (``template.py``): ``\U000f00c0<k>\U000f00c1``.
SENTINEL_OPEN, SENTINEL_CLOSE = "\U000f00c0", "\U000f00c1"
SENTINEL_RE = re.compile(f"{SENTINEL_OPEN}(\\d+){SENTINEL_CLOSE}")

_QUOTED = r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"""
_TESTS = re.compile(
    _QUOTED + r"\s+(?:not\s+)?in\b"
    r"|\.(?:split|rsplit|replace|startswith|endswith|find|rfind|index|partition|rpartition|count)\(\s*"
    + _QUOTED
    + r"|\|\s*replace\(\s*"
    + _QUOTED
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"'}


def _unquote(literal: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), literal[1:-1])


def content_tests(template: str) -> re.Pattern[str] | None:
    """A pattern of the literals ``template`` tests text with (None: it tests none). Whitespace-only
    literals (``.split('\\n')``) are left out: sentinels keep the content's edge whitespace, and a
    template that splits on inner whitespace would flag almost every record."""
    literals = set()
    for match in _TESTS.finditer(template):
        literal = next(group for group in match.groups() if group is not None)
        text = _unquote(literal)
        if text.strip():
            literals.add(text)
    if not literals:
        return None
    return re.compile("|".join(map(re.escape, sorted(literals, key=len, reverse=True))))


_FILTERS = re.compile(
    r"content['\"\]]*\s*\|\s*(?:tojson|upper|lower|title|capitalize|escape|e|replace|wordwrap|truncate|indent|center"
    r"|format|urlencode|forceescape|striptags|xmlattr)\b"
)


def filters_content(template: str) -> bool:
    """True when ``template`` passes a message's content through a filter that changes it beyond
    whitespace (Llama-3.1 prints a tool result as ``message.content | tojson``): every record is then
    checked against a real render."""
    return _FILTERS.search(template) is not None


def held_literal(pattern: re.Pattern[str] | None, texts: Iterable[str]) -> str | None:
    """The first literal of ``pattern`` that one of ``texts`` holds, or None."""
    if pattern is None:
        return None
    for text in texts:
        found = pattern.search(text)
        if found is not None:
            return found.group(0)
    return None


def with_real_text(value: object, texts: Mapping[int, str]) -> object:
    """``value`` (a message, or any JSON value in it) with each sentinel replaced by its part's text."""
    if isinstance(value, str):
        return SENTINEL_RE.sub(lambda m: texts[int(m.group(1))], value)
    if isinstance(value, dict):
        return {key: with_real_text(item, texts) for key, item in value.items()}
    if isinstance(value, list):
        return [with_real_text(item, texts) for item in value]
    return value


MARK_OPEN, MARK_CLOSE = "\U000f00c2", "\U000f00c3"  # the end of a part in the marked render
MARK_RE = re.compile(f"{MARK_OPEN}(\\d+){MARK_CLOSE}")
START_OPEN, START_CLOSE = "\U000f00c4", "\U000f00c5"  # the start of a part
START_RE = re.compile(f"{START_OPEN}(\\d+){START_CLOSE}")


def _reject(why: str) -> Rejected:
    return Rejected(RejectReason.TEMPLATE_ERROR, f"the chat template rewrites the content: {why}")


def layout_text(lay: Layout, names: Mapping[int, str]) -> str | None:
    """The text a layout stands for (control tokens spelled out); None when it holds placeholders."""
    out = []
    for item in lay:
        if isinstance(item, TextRun):
            out.append(item.text)
        elif all(i in names for i in item.ids):
            out.append("".join(names[i] for i in item.ids))
        else:
            return None
    return "".join(out)


def real_texts(slots: Sequence[Slot]) -> dict[int, str] | None:
    """Each slot's text between its edge whitespace (what its sentinel stands for; the messages keep
    the edges around the sentinel); None when a slot holds media."""
    texts = {}
    for index, slot in enumerate(slots):
        if not all(isinstance(piece, Text) for piece in slot.core):
            return None
        texts[index] = "".join(piece.text for piece in slot.core if isinstance(piece, Text))
    return texts


def marked_render(
    context: TemplateContext, sentinel_messages: list[dict[str, Any]], tools: list[Any] | None, texts: Mapping[int, str]
) -> str:
    """The render of the real text with a marker before and after each part."""
    marked = {k: f"{START_OPEN}{k}{START_CLOSE}{text}{MARK_OPEN}{k}{MARK_CLOSE}" for k, text in texts.items()}
    return context.render([cast(dict[str, Any], with_real_text(m, marked)) for m in sentinel_messages], tools)


def rewritten_parts(out: str, sentinel_render: tuple[list[int], list[str]]) -> dict[int, str] | None:
    """Each part's text as the template rewrote it in place (``"a\nb"`` -> ``"a\\nb"`` under ``tojson``),
    from ``out`` (``marked_render``); None unless every part the sentinel render holds comes once, whole
    and in the same order, with exactly the same markup around it."""
    order, segments = sentinel_render
    pieces = re.split(f"{START_OPEN}(\\d+){START_CLOSE}", out)
    if [int(k) for k in pieces[1::2]] != order or pieces[0] != segments[0]:
        return None
    rewritten = {}
    for j, k in enumerate(order):
        body = pieces[2 * j + 2]
        text, close, after = body.partition(f"{MARK_OPEN}{k}{MARK_CLOSE}")
        if not close or MARK_RE.search(text) or MARK_RE.search(after) or after != segments[j + 1]:
            return None
        rewritten[k] = text
    return rewritten


def rebuild(
    context: TemplateContext,
    rendered: str,
    marked: str,
    slots: Sequence[Slot],
    texts: Mapping[int, str],
    sentinel_render: tuple[list[int], list[str]],
    kept_leads: Sequence[str] = (),
) -> Layout:
    """The layout of ``rendered`` (Hugging Face's render of the real text), for a record the template
    rewrites. Its text is split at control tokens exactly as Hugging Face splits it, so no data text may
    hold a control-token string (the caller keeps the sentinel layout for such a record).

    Each part's end comes from ``marked`` (``marked_render``), where a marker follows each part's text
    (a template keeps a part's end when it drops a prefix, as ``split('</think>')[-1]`` does). A part starts after the
    markup the sentinel render (``sentinel_render``: slots in order, markup between) put between it and
    the part before; where that markup changed with the text, after the last control token before the
    part and the text the sentinel render had after its own last control token there. A target turn
    runs from its first part's start to its last part's end, and its closing control token (the first
    one past whitespace only) is a target, as in ``template.py``; anything else rejects the record."""
    assert context.control_re is None or not any(map(context.control_re.search, texts.values()))
    second = START_RE.sub("", marked)  # the end markers only
    if MARK_RE.sub("", second) != rendered:
        raise _reject("a marker after a part changes the render")
    ends: dict[int, int] = {}
    removed = 0
    for match in MARK_RE.finditer(second):
        if int(match.group(1)) in ends:
            raise _reject("a part is rendered twice")
        ends[int(match.group(1))] = match.start() - removed
        removed += match.end() - match.start()
    found = () if context.control_re is None else context.control_re.finditer(rendered)
    controls = [(m.start(), m.end(), context.ids[m.group(0)]) for m in found]
    order, segments = sentinel_render
    in_order = sorted(ends, key=ends.__getitem__)
    starts: dict[int, int] = {}
    for position, k in enumerate(in_order):
        if not slots[k].target:
            continue
        previous = in_order[position - 1] if position else None
        base = ends[previous] if previous is not None else 0
        j = order.index(k) if k in order else -1
        if j < 0 or (order[j - 1] if j else None) != previous:
            raise _reject("the template renders other parts than with sentinels")
        markup = segments[j]
        kept = len(kept_leads[j]) if j < len(kept_leads) else 0  # the part's own leading whitespace: target
        if rendered.startswith(markup, base) and base + len(markup) <= ends[k]:
            starts[k] = base + len(markup) - kept
            continue
        before = [stop for _, stop, _ in controls if base <= stop <= ends[k]]
        header = context.control_re.split(markup)[-1] if context.control_re is not None else markup
        if not before or not rendered.startswith(header, before[-1]) or before[-1] + len(header) > ends[k]:
            raise _reject("a reply's start cannot be placed")
        starts[k] = before[-1] + len(header) - min(kept, len(header))
    ranges: list[tuple[int, int]] = []
    closing: set[int] = set()  # start offsets of the control tokens that close a target turn
    by_turn: dict[int, list[int]] = {}
    for k in in_order:
        if slots[k].target:
            by_turn.setdefault(slots[k].turn, []).append(k)
    for turn_slots in by_turn.values():
        first, last = turn_slots[0], turn_slots[-1]
        ranges.append((starts[first], ends[last]))
        rest = rendered[ends[last] :]
        gap = len(rest) - len(rest.lstrip())
        closing.update(a for a, _, _ in controls if a == ends[last] + gap)
    builder = LayoutBuilder(context.lstrip_ids, context.rstrip_ids)
    position = 0
    for a, b, token_id in [*controls, (len(rendered), len(rendered), -1)]:
        _add_text(builder, rendered, position, a, ranges)
        if token_id >= 0:
            builder.control(token_id, a in closing or any(lo <= a and b <= hi for lo, hi in ranges))
        position = b
    return builder.finish()


def _add_text(builder: LayoutBuilder, rendered: str, start: int, stop: int, ranges: Sequence[tuple[int, int]]) -> None:
    """``rendered[start:stop]`` as data text, split into target and non-target pieces by ``ranges``."""
    cuts = sorted({start, stop, *(x for lo, hi in ranges for x in (lo, hi) if start < x < stop)})
    for a, b in itertools.pairwise(cuts):
        target = any(lo <= a and b <= hi for lo, hi in ranges)
        builder.text(rendered[a:b], target)
