"""Where two renders of one template differ: one string inserted into the other (template mode's tool calls).

insertion('<|im_start|>assistant\\n<tool_call>{..}</tool_call><|im_end|>',   # with the calls
          '<|im_start|>assistant\\n<|im_end|>', controls)                    # without them
-> (22, 45): '<tool_call>{..}</tool_call>'
"""

from __future__ import annotations

import re


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
    """Where ``rendered`` is ``bare`` with one string inserted: its (start, stop) in ``rendered``; None
    when ``rendered`` is not ``bare`` plus one string. Of several places (the inserted string's first
    characters repeat what follows it) the latest that cuts no control token of ``rendered`` in two, so
    markup that both renders share stays before it (a role header, ``[/INST]``)."""
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
    return None
