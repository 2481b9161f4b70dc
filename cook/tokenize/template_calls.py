"""Where a template prints a target turn's tool calls (template mode): the one string that its render
has and the render without those calls has not.

    insertion('<|im_start|>assistant\\n<tool_call>{..}</tool_call><|im_end|>',   # with the calls
              '<|im_start|>assistant\\n<|im_end|>', controls)                    # without them
    -> (22, 45): '<tool_call>{..}</tool_call>'

The markup both renders share before it is the turn's header, as in the template's generation prompt::

    Qwen2.5   <|im_start|>assistant\\n[<tool_call>\\n{"name": ...}\\n</tool_call>]<|im_end|>
    Llama-3.1 <|start_header_id|>assistant<|end_header_id|>\\n\\n[{"name": ...}]<|eot_id|>
    Mistral   [/INST][[TOOL_CALLS][{"name": ...}]]</s>
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from cook.errors import Rejected, RejectReason

if TYPE_CHECKING:
    from cook.tokenize.template import Slot

Found = tuple[list[int], list[str]]  # the parts a render holds, in order; the markup around them
RenderSegments = Callable[[list[dict[str, Any]], int], Found]  # messages (up to a turn) -> their render's


def common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix (a binary search over C-speed slice compares)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def insertion(rendered: str, bare: str, controls: re.Pattern[str] | None) -> tuple[int, int] | None:
    """Where ``rendered`` is ``bare`` with one string inserted (or put in place of whitespace only):
    its (start, stop) in ``rendered``; None when ``rendered`` is not ``bare`` plus one string. Of several
    places (the inserted string's first characters repeat what follows it) the latest that cuts no
    control token of ``rendered`` in two, so markup that both renders share stays before it (a role
    header, ``[/INST]``)."""
    extra = len(rendered) - len(bare)
    if extra < 0:
        return None
    prefix = common_prefix(rendered, bare)
    suffix = min(common_prefix(rendered[::-1], bare[::-1]), len(bare))
    inside: set[int] = set()
    if controls is not None:
        for match in controls.finditer(rendered):
            inside.update(range(match.start() + 1, match.end()))
    for start in range(prefix, len(bare) - suffix - 1, -1):
        if start not in inside and start + extra not in inside:
            return start, start + extra
    # the calls replace whitespace the template prints for a plain reply (Mistral v3: " " + content)
    suffix = min(suffix, len(bare) - prefix, len(rendered) - prefix)
    replaced = bare[prefix : len(bare) - suffix]
    if replaced and not replaced.strip() and prefix not in inside and len(rendered) - suffix not in inside:
        return prefix, len(rendered) - suffix
    return None


def _without_calls(messages: list[dict[str, Any]], turn: int, content_printed: bool) -> list[dict[str, Any]]:
    """The messages with ``turn``'s tool calls removed (its content ``""`` where the template left it out)."""
    out = list(messages)
    message = out[turn] = dict(messages[turn])
    del message["tool_calls"]
    if not content_printed:
        message["content"] = ""
    return out


def _printed_content(slots: Sequence[Slot], order: Sequence[int], turn: int) -> bool:
    return any(slots[k].turn == turn and slots[k].key == "content" for k in order)


def _inserted(
    render_segments: RenderSegments,
    found: Found,
    bare: list[dict[str, Any]],
    slots: Sequence[Slot],
    turn: int,
    controls: re.Pattern[str] | None,
) -> tuple[int, int, int] | None:
    """(segment, start, stop) of what a render (``found``) has that the render of ``bare`` (the same
    messages without ``turn``'s tool calls) has not: one insertion in one segment, or None."""
    order, segments = found
    bare_order, bare_segments = render_segments(bare, len(bare) - 1)
    changed = [j for j, (a, b) in enumerate(zip(segments, bare_segments, strict=False)) if a != b]
    if bare_order != order or len(changed) > 1:
        why = f"renders other messages differently when message {turn} has tool calls"
        raise Rejected(RejectReason.TEMPLATE_ERROR, f"the chat template {why}")
    if not changed:
        return None
    segment = changed[0]
    cut = insertion(segments[segment], bare_segments[segment], controls)
    before = slots[order[segment - 1]].turn if segment else -1
    after = slots[order[segment]].turn if segment < len(order) else len(bare)
    if cut is None or not before <= turn <= after:
        raise Rejected(RejectReason.TEMPLATE_ERROR, f"cannot find the markup of message {turn}'s tool calls")
    return segment, cut[0], cut[1]


def tool_call_markup(
    render_segments: RenderSegments,
    messages: list[dict[str, Any]],
    slots: Sequence[Slot],
    found: Found,
    turn: int,
    controls: re.Pattern[str] | None,
) -> tuple[int, int, int] | None:
    """Where the template printed a target turn's tool calls: (segment, start, stop) in ``found``; None
    when it printed nothing for them. A second render without that turn's tool calls (and, where the
    first left the content out, with content ``""``) must differ from the first by one insertion in one
    segment: the turn's tool-call markup. A template that refuses the record without those calls
    (Mistral's role-alternation check: the call's result, then the answer) is asked the same about the
    conversation up to that turn; the place found there must open the same way in the whole render.
    ``Rejected(template_error)`` when no such place exists."""
    order, segments = found
    try:
        bare = _without_calls(messages, turn, _printed_content(slots, order, turn))
        return _inserted(render_segments, found, bare, slots, turn, controls)
    except Rejected:
        pass  # ask the conversation up to this turn
    head = messages[: turn + 1]
    head_found = render_segments(head, turn)
    bare = _without_calls(head, turn, _printed_content(slots, head_found[0], turn))
    cut = _inserted(render_segments, head_found, bare, slots, turn, controls)
    if cut is None:
        return None
    head_segment, start, stop = cut
    part = head_found[0][head_segment - 1] if head_segment else None
    segment = 0 if part is None else order.index(part) + 1 if part in order else -1
    if segment < 0 or segments[segment][:stop] != head_found[1][head_segment][:stop]:
        raise Rejected(RejectReason.TEMPLATE_ERROR, f"cannot find the markup of message {turn}'s tool calls")
    return segment, start, stop
