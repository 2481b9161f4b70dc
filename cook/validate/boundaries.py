"""Pack boundaries (SPEC §8, §9): ``cu_seqlens*`` start at 0, strictly increase and agree with ``T``.

Promised for a pack ``check_boundaries`` calls usable: both arrays start at 0 and strictly increase,
``cu_seqlens_padded[-1] == T``, and every padded length is at least its true length, so its padding
positions and per-sequence spans (``batch.Spans``) are safe. Also checked (without blocking later
checks): meta.json lengths, padding to ``packing.pad_multiple`` and ``T <= seq_len``.

Example (pad_multiple 8): true lengths 5 and 9 -> ``cu_seqlens = [0, 5, 14]``,
``cu_seqlens_padded = [0, 8, 24]``, ``T = 24``; tokens 5..7 and 17..23 are padding.
"""

from __future__ import annotations

import numpy as np

from cook import format as fmt
from cook.validate.batch import Findings, PackBatch, per_pack, per_pack_of
from cook.validate.problems import Code, PackRules


def check_boundaries(batch: PackBatch, rules: PackRules) -> tuple[Findings, np.ndarray]:
    """Findings per pack (``cu_seqlens`` ones first, which make the pack unusable), and bool [K]: usable."""
    findings: Findings = [[] for _ in range(batch.packs)]
    first, last = batch.rows[:-1], batch.rows[1:] - 1
    inside = np.ones(max(batch.cu.shape[0] - 1, 0), dtype=bool)  # a step from a row to the next of its pack
    inside[first[1:] - 1] = False
    for name, bounds in ((fmt.CU_SEQLENS, batch.cu), (fmt.CU_SEQLENS_PADDED, batch.padded_cu)):
        for k in np.flatnonzero(bounds[first] != 0).tolist():
            findings[k].append((Code.CU_SEQLENS, f"{name} starts at {bounds[first[k]]}, not 0"))
        for k, row, _ in per_pack(np.flatnonzero((np.diff(bounds) <= 0) & inside), batch.rows):
            i = row - int(first[k])
            findings[k].append(
                (
                    Code.CU_SEQLENS,
                    f"{name} does not strictly increase: [{i}]={bounds[row]}, [{i + 1}]={bounds[row + 1]}",
                )
            )
    tokens = batch.tokens
    for k in np.flatnonzero(batch.padded_cu[last] != tokens).tolist():
        findings[k].append(
            (Code.CU_SEQLENS, f"{fmt.CU_SEQLENS_PADDED} ends at {batch.padded_cu[last[k]]}, input_ids has {tokens[k]}")
        )
    blocked = np.array([bool(found) for found in findings], dtype=bool)
    rows, pack = batch.sequence_rows(), batch.sequence_pack()
    lengths = batch.cu[rows] - batch.cu[rows - 1]  # int64 [S]
    padded = batch.padded_cu[rows] - batch.padded_cu[rows - 1]
    index = np.arange(pack.shape[0]) - batch.first_sequence[pack]  # int64 [S]: each sequence's index in its pack
    open_ = ~blocked[pack]
    for k, s, _ in per_pack_of((padded < lengths) & open_, pack):
        detail = f"sequence {index[s]}: padded length {padded[s]} < true length {lengths[s]}"
        findings[k].append((Code.CU_SEQLENS, detail))
        blocked[k] = True
    open_ = ~blocked[pack]
    meta = batch.columns.lengths
    for k, s, count in per_pack_of((meta != lengths) & open_, pack):
        findings[k].append(
            (
                Code.META_LENGTH,
                f"{fmt.META} sequences[{index[s]}] ({batch.columns.sources[s]}) has length {meta[s]}, "
                f"{fmt.CU_SEQLENS} says {lengths[s]} ({count} sequences disagree)",
            )
        )
    multiple = rules.pad_multiple
    if multiple:
        expected = -(-lengths // multiple) * multiple
        for k, s, _ in per_pack_of((padded != expected) & open_, pack):
            findings[k].append(
                (
                    Code.PAD_MULTIPLE,
                    f"sequence {index[s]}: padded length {padded[s]} for {lengths[s]} tokens, "
                    f"expected {expected[s]} (packing.pad_multiple={multiple})",
                )
            )
    if rules.seq_len is not None:
        for k in np.flatnonzero((tokens > rules.seq_len) & ~blocked).tolist():
            findings[k].append(
                (Code.PACK_LENGTH, f"{fmt.INPUT_IDS} holds {tokens[k]} tokens > packing.seq_len={rules.seq_len}")
            )
    return findings, ~blocked
