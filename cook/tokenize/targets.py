"""Which turns are targets (SPEC §5).

Only assistant turns can be targets. An explicit per-turn ``loss`` flag wins; otherwise
``train_on='all_assistant'`` makes every assistant turn a target and ``'last_assistant'`` only the
last one. A target turn contributes its content and its closing ``<|im_end|>`` (template mode: the
control token that closes it), never its header.

    >>> from cook.types import Turn, TextPart
    >>> turns = (Turn("user", (TextPart("q"),)), Turn("assistant", (TextPart("a"),)),
    ...          Turn("user", (TextPart("q2"),)), Turn("assistant", (TextPart("a2"),)))
    >>> target_flags(turns, "last_assistant")
    [False, False, False, True]
"""

from __future__ import annotations

from collections.abc import Sequence

from cook.types import Turn


def target_flags(turns: Sequence[Turn], train_on: str) -> list[bool]:
    last = max((i for i, t in enumerate(turns) if t.role == "assistant"), default=-1)
    flags = []
    for i, turn in enumerate(turns):
        if turn.role != "assistant":
            flags.append(False)
        elif turn.loss is not None:
            flags.append(turn.loss)
        else:
            flags.append(train_on == "all_assistant" or i == last)
    return flags
