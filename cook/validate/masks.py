"""``loss_mask`` (SPEC §8, §9): values in {0, 1}; 0 at each sequence start and in all padding; the ones
inside each sequence equal its meta.json ``targets``.

A sequence's first token is never a target: nothing earlier in the same sequence predicts it.
"""

from __future__ import annotations

import numpy as np

from cook import format as fmt
from cook.types import Pack
from cook.validate.problems import Code, Finding


def check_values(pack: Pack) -> list[Finding]:
    """Every ``loss_mask`` entry is 0 or 1 (needs no boundaries)."""
    bad = np.flatnonzero(pack.loss_mask > 1)
    if not bad.size:
        return []
    t = int(bad[0])
    return [
        (
            Code.LOSS_MASK_VALUES,
            f"{fmt.LOSS_MASK} has {bad.size} values not in {{0, 1}} (token {t}: {pack.loss_mask[t]})",
        )
    ]


def check_mask(pack: Pack, padding: np.ndarray) -> list[Finding]:
    """Starts and padding are 0, per-sequence targets match meta.json. ``padding``: bool [T]."""
    mask = pack.loss_mask  # uint8 [T]
    starts = pack.cu_seqlens_padded[:-1].astype(np.int64)  # int64 [n]
    findings: list[Finding] = []
    at_start = np.flatnonzero(mask[starts])
    if at_start.size:
        i = int(at_start[0])
        findings.append(
            (
                Code.LOSS_MASK_START,
                f"{fmt.LOSS_MASK} is 1 at the start of sequence {i} (token "
                f"{starts[i]}, {pack.sequences[i].source}); "
                f"{at_start.size} sequences affected",
            )
        )
    in_padding = np.flatnonzero(mask.astype(bool) & padding)
    if in_padding.size:
        findings.append(
            (
                Code.LOSS_MASK_PADDING,
                f"{fmt.LOSS_MASK} is 1 at {in_padding.size} padding tokens (first at token {in_padding[0]})",
            )
        )
    targets = np.add.reduceat(np.where(padding, 0, mask).astype(np.int64), starts)  # int64 [n]
    meta = np.array([s.targets for s in pack.sequences], dtype=np.int64)
    wrong = np.flatnonzero(targets != meta)
    if wrong.size:
        i = int(wrong[0])
        findings.append(
            (
                Code.META_TARGETS,
                f"{fmt.META} sequences[{i}] ({pack.sequences[i].source}) has targets "
                f"{meta[i]}, {fmt.LOSS_MASK} holds {targets[i]}",
            )
        )
    return findings
