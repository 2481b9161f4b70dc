"""``loss_mask`` (SPEC §8, §9): values in {0, 1}; 0 at each sequence start and in all padding; the ones
inside each sequence equal its meta.json ``targets``.

A sequence's first token is never a target: nothing earlier in the same sequence predicts it.
"""

from __future__ import annotations

import numpy as np

from cook import format as fmt
from cook.validate.batch import Findings, PackBatch, Spans, per_pack, per_pack_of
from cook.validate.problems import Code


def check_values(batch: PackBatch, findings: Findings) -> None:
    """Every ``loss_mask`` entry is 0 or 1 (needs no boundaries)."""
    mask = batch.mask[:-1]
    if not mask.size or int(mask.max()) <= 1:
        return
    for k, t, count in per_pack(np.flatnonzero(mask > 1), batch.base):
        findings[k].append(
            (
                Code.LOSS_MASK_VALUES,
                f"{fmt.LOSS_MASK} has {count} values not in {{0, 1}} (token {t - batch.base[k]}: {mask[t]})",
            )
        )


def check_mask(batch: PackBatch, spans: Spans, findings: Findings) -> None:
    """Starts and padding are 0, per-sequence targets match meta.json (the packs in ``spans`` only)."""
    mask, sources = batch.mask, batch.columns.sources
    for k, u, count in per_pack_of(mask[spans.starts] != 0, spans.pack):
        i = int(spans.sequence[u] - batch.first_sequence[k])
        findings[k].append(
            (
                Code.LOSS_MASK_START,
                f"{fmt.LOSS_MASK} is 1 at the start of sequence {i} (token "
                f"{spans.starts[u] - batch.base[k]}, {sources[spans.sequence[u]]}); {count} sequences affected",
            )
        )
    if spans.padding.size and mask[spans.padding].any():
        for k, t, count in per_pack(spans.padding[mask[spans.padding] != 0], batch.base):
            findings[k].append(
                (
                    Code.LOSS_MASK_PADDING,
                    f"{fmt.LOSS_MASK} is 1 at {count} padding tokens (first at token {t - batch.base[k]})",
                )
            )
    edges = np.stack([spans.starts, spans.starts + spans.lengths], axis=1).ravel()  # each true span's start, end
    # a sum is at most 255 x the batch's tokens (bad values included): int32 when that fits (it sums faster)
    total = np.int32 if mask.shape[0] * 255 < 2**31 else np.int64
    targets = np.add.reduceat(mask, edges, dtype=total)[::2] if edges.size else edges  # [U]
    meta = batch.columns.targets[spans.sequence]
    for k, u, _ in per_pack_of(targets != meta, spans.pack):
        s = int(spans.sequence[u])
        findings[k].append(
            (
                Code.META_TARGETS,
                f"{fmt.META} sequences[{s - batch.first_sequence[k]}] ({sources[s]}) has targets "
                f"{meta[u]}, {fmt.LOSS_MASK} holds {targets[u]}",
            )
        )
