"""A batch of text packs (no media members) -> their totals, every per-pack invariant of ``scan.check_pack``
checked for all of them at once with NumPy; ``Irregular`` at the first doubt.

The packs' members are concatenated: ``ids`` int32 [N] and ``mask`` uint8 [N] (N = sum of T), ``cu``
and ``padded_cu`` int64 [S + K] (each pack's n + 1 boundaries). Sequence rows are the boundary rows that
are not a pack's first, so with ``base`` = each pack's first token in ``ids``::

    lengths = cu[row] - cu[row - 1]           (true lengths, > 0, equal meta.json's)
    padded  = padded_cu[row] - padded_cu[row - 1]   (>= lengths; = lengths rounded up to pad_multiple)
    starts  = padded_cu[row - 1] + base       (each sequence's first token in ``ids``)

Example: two packs with padded boundaries [0, 8, 24] and [0, 16] give starts [0, 8, 24]; their padded
spans tile ``ids`` exactly because every pack's last padded boundary equals its T. Padding positions
(a few per sequence) are listed explicitly; the targets of every sequence are the set bits of its
padded span (``loss_mask`` is checked to be 0/1 and 0 in padding first).
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass

import numpy as np

from cook.validate.meta_columns import Irregular, meta_columns
from cook.validate.problems import PackRules


@dataclass(frozen=True, slots=True)
class TextBatch:
    """Text packs to check together: where their members' data start, T, n + 1 and meta.json's bytes."""

    indices: np.ndarray  # int64 [K]: pack index (from the key) of each pack
    ids_at: list[int]
    mask_at: list[int]
    cu_at: list[int]
    padded_at: list[int]
    tokens: list[int]  # T of each pack
    bounds: list[int]  # n + 1 of each pack
    metas: list[bytes]  # meta.json of each pack


@dataclass(frozen=True, slots=True)
class TextTotals:
    sources: int
    tokens: int  # true tokens (sum of cu_seqlens[-1])
    targets: int
    padded: int  # sum of T
    source_digests: np.ndarray  # uint64 [S]
    source_packs: np.ndarray  # int64 [S]: the pack index of each source


def _concat(shard: np.ndarray, dtype: str, offsets: list[int], counts: list[int]) -> np.ndarray:
    """The members' data joined: ``shard`` uint8 [bytes], each member ``count`` items of ``dtype`` at its offset."""
    width = np.dtype(dtype).itemsize
    parts = [shard[at : at + n * width] for at, n in zip(offsets, counts, strict=True)]
    return np.concatenate(parts).view(dtype)


def _span_sums(mask: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """int64 [S]: the sum of ``mask`` (0/1) from each start to the next (the last: to the end)."""
    if mask.size % 8 == 0 and not (starts % 8).any():
        words = np.bitwise_count(mask.view(np.uint64))  # uint8 [N / 8]: ones among 8 mask bytes
        return np.add.reduceat(words, starts // 8, dtype=np.int64)
    return np.add.reduceat(mask, starts, dtype=np.int64)


def check_text(data: mmap.mmap, batch: TextBatch, rules: PackRules) -> TextTotals:
    """Every ``check_pack`` invariant of the batch's packs (see the module doc); ``Irregular`` on a doubt."""
    shard = np.frombuffer(data, np.uint8)  # uint8 [bytes]: a view of the mapped shard
    tokens = np.array(batch.tokens, dtype=np.int64)  # int64 [K]: T
    counts = np.array(batch.bounds, dtype=np.int64) - 1  # int64 [K]: n
    meta_lengths, meta_targets, digests = meta_columns(batch.metas, counts)
    ids = _concat(shard, "<i4", batch.ids_at, batch.tokens)  # int32 [N]
    mask = _concat(shard, "|u1", batch.mask_at, batch.tokens)  # uint8 [N]
    cu = _concat(shard, "<i4", batch.cu_at, batch.bounds).astype(np.int64)  # int64 [S + K]
    padded_cu = _concat(shard, "<i4", batch.padded_at, batch.bounds).astype(np.int64)  # int64 [S + K]
    first = np.cumsum(counts + 1) - (counts + 1)  # int64 [K]: each pack's row 0
    last = first + counts
    if cu[first].any() or padded_cu[first].any() or (padded_cu[last] != tokens).any():
        raise Irregular
    rows = np.ones(cu.shape[0], dtype=bool)
    rows[first] = False
    ends = np.flatnonzero(rows)  # int64 [S]: the row that closes each sequence
    lengths = cu[ends] - cu[ends - 1]
    padded = padded_cu[ends] - padded_cu[ends - 1]
    if (lengths <= 0).any() or (padded < lengths).any() or (lengths != meta_lengths).any():
        raise Irregular
    multiple = rules.pad_multiple
    if multiple and (padded != -(-lengths // multiple) * multiple).any():
        raise Irregular
    if rules.seq_len is not None and int(tokens.max()) > rules.seq_len:
        raise Irregular
    vocab = rules.tokens.vocab_size
    if ids.size and vocab is not None and int(ids.view(np.uint32).max()) >= vocab:
        raise Irregular  # a negative id reads as >= 2^31 here
    if mask.size and int(mask.max()) > 1:
        raise Irregular
    starts = padded_cu[ends - 1] + np.repeat(np.cumsum(tokens) - tokens, counts)  # int64 [S]
    if mask[starts].any():
        raise Irregular
    _check_padding(ids, mask, starts, lengths, padded - lengths, rules.tokens.pad_id)
    targets = _span_sums(mask, starts)  # int64 [S]: the padded spans tile the batch, padding is 0
    if (targets != meta_targets).any():
        raise Irregular
    for token_id in (rules.tokens.image_id, rules.tokens.audio_id):
        if token_id is not None and (ids == token_id).any():
            raise Irregular  # a placeholder in a pack without media
    return TextTotals(
        sources=int(counts.sum()),
        tokens=int(cu[last].sum()),
        targets=int(targets.sum()),
        padded=int(tokens.sum()),
        source_digests=digests,
        source_packs=np.repeat(batch.indices, counts),
    )


def _check_padding(
    ids: np.ndarray, mask: np.ndarray, starts: np.ndarray, lengths: np.ndarray, pads: np.ndarray, pad_id: int | None
) -> None:
    """Padding (``pads[i]`` tokens after sequence i's ``lengths[i]``) has loss_mask 0 and holds the pad id."""
    total = int(pads.sum())
    if not total:
        return
    before = np.cumsum(pads) - pads
    positions = np.repeat(starts + lengths - before, pads) + np.arange(total)  # int64 [padding tokens]
    if mask[positions].any() or (pad_id is not None and (ids[positions] != pad_id).any()):
        raise Irregular
