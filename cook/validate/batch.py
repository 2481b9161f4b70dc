"""Many packs checked at once: their arrays concatenated, so each per-pack invariant is a few NumPy passes
over a whole batch (a shard, or part of a large one) instead of a few per pack.

    [PackMembers] + SequenceColumns -PackBatch.of-> PackBatch -> boundaries, masks, tokens (findings per pack)

Positions: the packs' tokens are numbered one after another (``base[k]`` is pack k's first token), and
so are their boundary rows (``rows[k]`` is pack k's ``cu_seqlens[0]``) and their sequences
(``first_sequence[k]``). A sequence is a boundary row that is not its pack's first, so for pack k the
sequence ``i`` has row ``rows[k] + i + 1``. Example: packs with ``cu_seqlens_padded`` [0, 8, 24] and
[0, 16] give ``base = [0, 24, 40]``, ``rows = [0, 3, 5]``, ``first_sequence = [0, 2, 3]``; once the
boundaries are usable, ``Spans.starts = [0, 8, 24]`` (each sequence's first token).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from cook import format as fmt
from cook.validate.members import PackMembers, SequenceColumns
from cook.validate.problems import Finding

Findings = list[list[Finding]]  # per pack of a batch


@dataclass(frozen=True, slots=True)
class PackBatch:
    """Packs' arrays one after another, and where each pack starts in each of them."""

    ids: np.ndarray  # int32 [N]: every pack's input_ids
    mask: np.ndarray  # uint8 [N + 1]: every pack's loss_mask, then a 0 (the end of the last span)
    base: np.ndarray  # int64 [K + 1]: each pack's first token, then N
    cu: np.ndarray  # int64 [R]: every pack's cu_seqlens (R = S + K rows)
    padded_cu: np.ndarray  # int64 [R]: every pack's cu_seqlens_padded
    rows: np.ndarray  # int64 [K + 1]: each pack's first row, then R
    first_sequence: np.ndarray  # int64 [K + 1]: each pack's first sequence, then S
    columns: SequenceColumns  # meta.json's S sequences
    media: np.ndarray  # bool [K]: the pack has media members or lists media in meta.json

    @classmethod
    def of(cls, packs: list[PackMembers], columns: SequenceColumns, space: Workspace | None = None) -> PackBatch:
        """The batch of ``packs`` (``columns``: their meta.json entries, in pack order); its ``ids`` and
        ``mask`` are laid out in ``space`` (valid until ``space`` holds the next batch), or in new arrays."""
        tokens = np.array([p.arrays[fmt.INPUT_IDS].shape[0] for p in packs], dtype=np.int64)
        counts = np.array([len(p.entries) for p in packs], dtype=np.int64)
        items = np.fromiter(map(len, columns.media), dtype=np.int64, count=len(columns.media))
        first_sequence = _starts(counts)
        listed = np.add.reduceat(items, first_sequence[:-1]) > 0 if items.size else np.zeros(len(packs), bool)
        base = _starts(tokens)
        ids, mask = (space or Workspace()).take(int(base[-1]))
        np.concatenate([p.arrays[fmt.INPUT_IDS] for p in packs], out=ids)
        np.concatenate([p.arrays[fmt.LOSS_MASK] for p in packs], out=mask[:-1])
        mask[-1] = 0
        return cls(
            ids=ids,
            mask=mask,
            base=base,
            cu=np.concatenate([p.arrays[fmt.CU_SEQLENS] for p in packs]).astype(np.int64),
            padded_cu=np.concatenate([p.arrays[fmt.CU_SEQLENS_PADDED] for p in packs]).astype(np.int64),
            rows=_starts(counts + 1),
            first_sequence=first_sequence,
            columns=columns,
            media=listed | np.array([p.has_media_members for p in packs], dtype=bool),
        )

    @property
    def packs(self) -> int:
        return int(self.base.shape[0] - 1)

    @property
    def tokens(self) -> np.ndarray:
        """int64 [K]: T of each pack."""
        tokens: np.ndarray = np.diff(self.base)
        return tokens

    def sequence_pack(self) -> np.ndarray:
        """int64 [S]: the pack of each sequence."""
        return np.repeat(np.arange(self.packs), np.diff(self.first_sequence))

    def sequence_rows(self) -> np.ndarray:
        """int64 [S]: the boundary row that closes each sequence."""
        rows: np.ndarray = np.arange(self.columns.lengths.shape[0]) + self.sequence_pack() + 1
        return rows


@dataclass(slots=True)
class Workspace:
    """Token buffers that batches reuse, one batch after another (``cook validate`` keeps one per thread).
    A batch's ``ids`` and ``mask`` are the largest arrays it makes; laid out in new memory for every
    batch, the kernel maps and zeroes every page again whenever the allocator hands the freed ones back,
    which depends on the sizes of the allocations around them (docs/SCALING.md, "Validation's batch
    buffers")."""

    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    mask: np.ndarray = field(default_factory=lambda: np.zeros(1, np.uint8))

    def take(self, tokens: int) -> tuple[np.ndarray, np.ndarray]:
        """int32 [tokens] and uint8 [tokens + 1], contents undefined (views of this workspace's buffers)."""
        if self.ids.shape[0] < tokens:
            size = tokens + tokens // 4  # the next batches are about as large
            self.ids, self.mask = np.empty(size, np.int32), np.empty(size + 1, np.uint8)
        return self.ids[:tokens], self.mask[: tokens + 1]


@dataclass(frozen=True, slots=True)
class Spans:
    """Where the sequences of the packs with usable boundaries lie (the others are left out)."""

    sequence: np.ndarray  # int64 [U]: the sequence (in the batch)
    pack: np.ndarray  # int64 [U]: its pack
    starts: np.ndarray  # int64 [U]: its first token (in the batch)
    lengths: np.ndarray  # int64 [U]: its true tokens
    padding: np.ndarray  # int64 [P]: the padding tokens of these packs (in the batch), in order

    @classmethod
    def of(cls, batch: PackBatch, usable: np.ndarray) -> Spans:
        """The spans of the packs with ``usable`` (bool [K]) boundaries."""
        rows = batch.sequence_rows()
        pack = batch.sequence_pack()
        keep = np.flatnonzero(usable[pack])
        rows, pack = rows[keep], pack[keep]
        lengths = batch.cu[rows] - batch.cu[rows - 1]
        pads = batch.padded_cu[rows] - batch.padded_cu[rows - 1] - lengths  # int64 [U]
        starts = batch.padded_cu[rows - 1] + batch.base[pack]
        total = int(pads.sum())
        padding = np.repeat(starts + lengths - (np.cumsum(pads) - pads), pads) + np.arange(total)
        return cls(keep, pack, starts, lengths, padding)


def _starts(counts: np.ndarray) -> np.ndarray:
    """int64 [K + 1]: where each of ``counts`` starts when laid one after another, then the total."""
    return np.concatenate([np.zeros(1, np.int64), np.cumsum(counts, dtype=np.int64)])


def per_pack(positions: np.ndarray, starts: np.ndarray) -> Iterator[tuple[int, int, int]]:
    """(pack, first position, count) for each pack that holds one of ``positions`` (sorted; ``starts``:
    int64 [K + 1], each pack's first position)."""
    if not positions.size:  # the usual case: nothing to report
        return
    owners = np.searchsorted(starts, positions, side="right") - 1
    packs, first, counts = np.unique(owners, return_index=True, return_counts=True)
    yield from zip(packs.tolist(), positions[first].tolist(), counts.tolist(), strict=True)


def per_pack_of(flags: np.ndarray, owners: np.ndarray) -> Iterator[tuple[int, int, int]]:
    """(pack, first index, count) for each pack with a True in ``flags`` (bool [U]; ``owners``: int64 [U],
    non-decreasing)."""
    hits = np.flatnonzero(flags)
    if not hits.size:
        return
    packs, first, counts = np.unique(owners[hits], return_index=True, return_counts=True)
    yield from zip(packs.tolist(), hits[first].tolist(), counts.tolist(), strict=True)
