"""The text packs (no media members) of a shard -> their totals, every per-pack invariant of ``scan.check_pack``
checked with NumPy for many packs at once; ``Irregular`` at the first doubt. Two steps:

- ``plan_text``, once per shard: the small members of all its text packs (cu_seqlens, cu_seqlens_padded,
  meta.json) and everything that follows from them alone: boundaries, true and padded lengths against
  meta.json, pad_multiple, seq_len; and where every sequence and padding token lies in the mapping.
- ``check_tokens``, per batch of consecutive packs while their bytes are in the cache after hashing: the
  big members, read in place (input_ids never copied): token range and no placeholder (over the batch's
  bytes, as 32-bit words), loss_mask 0/1, 0 at each sequence's first token and in padding, pad ids in
  padding, and each sequence's targets (the set bits of its padded span) equal to meta.json's.

Positions: the text packs' tokens are numbered one after another through the shard (``base[k]`` is pack
k's first), and a sequence row is a boundary row that is not its pack's first, so::

    lengths = cu[row] - cu[row - 1]           (true lengths, > 0, equal meta.json's)
    padded  = padded_cu[row] - padded_cu[row - 1]   (>= lengths; = lengths rounded up to pad_multiple)
    starts  = padded_cu[row - 1] + base       (each sequence's first token)

Example: two packs with padded boundaries [0, 8, 24] and [0, 16] give starts [0, 8, 24]; their padded
spans tile the tokens exactly because every pack's last padded boundary equals its T. Token ``t`` of pack
k sits at byte ``mask_at[k] + t - base[k]`` of the mapping in loss_mask and at word
``ids_word[k] + t - base[k]`` in input_ids.
"""

from __future__ import annotations

import threading
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


@dataclass(frozen=True, slots=True)
class TextPlan:
    """The shard's text packs after ``plan_text``: what ``check_tokens`` reads, and the totals it vouches for."""

    totals: TextTotals
    tokens: np.ndarray  # int64 [K]: T
    mask_at: np.ndarray  # int64 [K]: loss_mask's first byte in the mapping
    ids_word: np.ndarray  # int64 [K]: input_ids' first 32-bit word in the mapping
    spans: np.ndarray  # int64 [2K]: ids_word and ids_word + T of each pack, interleaved
    base: np.ndarray  # int64 [K + 1]: each pack's first token, then the total
    first_sequence: np.ndarray  # int64 [K + 1]: each pack's first sequence, then S
    first_padding: np.ndarray  # int64 [K + 1]: each pack's first padding token in the arrays below, then P
    starts: np.ndarray  # int64 [S]: each sequence's first token
    start_bytes: np.ndarray  # int64 [S]: its loss_mask byte in the mapping
    pad_bytes: np.ndarray  # int64 [P]: the loss_mask byte of each padding token
    pad_words: np.ndarray  # int64 [P]: its input_ids word
    meta_targets: np.ndarray  # int64 [S]


_scratch = threading.local()  # per thread: reused output buffers (fresh ones cost a page fault per 4 KiB)


def _buffer(name: str, size: int, dtype: type) -> np.ndarray:
    """A reused array of at least ``size`` items, its first ``size`` returned (contents undefined)."""
    found: np.ndarray | None = getattr(_scratch, name, None)
    if found is None or found.shape[0] < size:
        found = np.empty(max(size, 1 << 16), dtype=dtype)
        setattr(_scratch, name, found)
    return found[:size]


def _concat(shard: np.ndarray, dtype: str, offsets: list[int], counts: list[int]) -> np.ndarray:
    """The members' data joined: ``shard`` uint8 [bytes], each member ``count`` items of ``dtype`` at its offset."""
    width = np.dtype(dtype).itemsize
    parts = [shard[at : at + n * width] for at, n in zip(offsets, counts, strict=True)]
    return np.concatenate(parts).view(dtype)


def _span_sums(mask: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """int64 [S]: the sum of ``mask`` (0/1) from each start to the next (the last: to the end)."""
    if mask.size % 8 == 0 and not (starts % 8).any():
        words = np.bitwise_count(mask.view(np.uint64), out=_buffer("ones", mask.size // 8, np.uint8))  # ones of 8
        return np.add.reduceat(words, starts // 8, dtype=np.int64)
    return np.add.reduceat(mask, starts, dtype=np.int64)


def plan_text(data: np.ndarray, batch: TextBatch, rules: PackRules) -> TextPlan:
    """Every invariant of the packs' small members, and where ``check_tokens`` finds the rest (module doc)."""
    tokens = np.array(batch.tokens, dtype=np.int64)  # int64 [K]: T
    counts = np.array(batch.bounds, dtype=np.int64) - 1  # int64 [K]: n
    meta_lengths, meta_targets, digests = meta_columns(batch.metas, counts)
    cu = _concat(data, "<i4", batch.cu_at, batch.bounds).astype(np.int64)  # int64 [S + K]
    padded_cu = _concat(data, "<i4", batch.padded_at, batch.bounds).astype(np.int64)  # int64 [S + K]
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
    base = np.concatenate([[0], np.cumsum(tokens)])  # int64 [K + 1]
    pack = np.repeat(np.arange(tokens.shape[0]), counts)  # int64 [S]: each sequence's pack
    starts = padded_cu[ends - 1] + base[pack]  # int64 [S]
    pads = padded - lengths  # int64 [S]: padding tokens after each sequence
    total = int(pads.sum())
    pad_pack = np.repeat(pack, pads)  # int64 [P]
    padding = np.repeat(starts + lengths - (np.cumsum(pads) - pads), pads) + np.arange(total)  # int64 [P]
    mask_at = np.array(batch.mask_at, dtype=np.int64)
    ids_at = np.array(batch.ids_at, dtype=np.int64)
    if (ids_at % 4).any():
        raise Irregular  # np.save's headers keep the data aligned; another writer's need not
    ids_word = ids_at // 4
    pack_padding = np.bincount(pad_pack, minlength=tokens.shape[0]) if total else np.zeros_like(tokens)
    totals = TextTotals(
        sources=int(counts.sum()),
        tokens=int(cu[last].sum()),
        targets=int(meta_targets.sum()),
        padded=int(base[-1]),
        source_digests=digests,
        source_packs=np.repeat(batch.indices, counts),
    )
    return TextPlan(
        totals=totals,
        tokens=tokens,
        mask_at=mask_at,
        ids_word=ids_word,
        spans=np.stack([ids_word, ids_word + tokens], axis=1).ravel(),
        base=base,
        first_sequence=np.concatenate([[0], np.cumsum(counts)]),
        first_padding=np.concatenate([[0], np.cumsum(pack_padding)]),
        starts=starts,
        start_bytes=mask_at[pack] + starts - base[pack],
        pad_bytes=mask_at[pad_pack] + padding - base[pad_pack],
        pad_words=ids_word[pad_pack] + padding - base[pad_pack],
        meta_targets=meta_targets,
    )


def check_tokens(data: np.ndarray, words: np.ndarray, plan: TextPlan, lo: int, hi: int, rules: PackRules) -> None:
    """The big members of the plan's packs ``lo:hi`` (``data``: the mapping as uint8, ``words`` as int32)."""
    if lo >= hi:
        return
    ats, tokens = plan.mask_at[lo:hi].tolist(), plan.tokens[lo:hi].tolist()
    mask = _buffer("mask", int(plan.base[hi] - plan.base[lo]), np.uint8)  # uint8 [N]: the packs' loss_mask
    np.concatenate([data[at : at + n] for at, n in zip(ats, tokens, strict=True)], out=mask)
    if int(mask.max()) > 1:
        raise Irregular
    s0, s1 = int(plan.first_sequence[lo]), int(plan.first_sequence[hi])
    p0, p1 = int(plan.first_padding[lo]), int(plan.first_padding[hi])
    if data[plan.start_bytes[s0:s1]].any() or data[plan.pad_bytes[p0:p1]].any():
        raise Irregular  # a target at a sequence's first token or in padding
    pad_id = rules.tokens.pad_id
    if pad_id is not None and (words[plan.pad_words[p0:p1]] != pad_id).any():
        raise Irregular
    targets = _span_sums(mask, plan.starts[s0:s1] - plan.base[lo])  # the padded spans tile the batch
    if (targets != plan.meta_targets[s0:s1]).any():
        raise Irregular
    first_word = int(plan.spans[2 * lo])
    region = words[first_word : int(plan.spans[2 * hi - 1])]  # int32: the packs' input_ids and what lies between
    vocab = rules.tokens.vocab_size
    if vocab is not None:
        maxima = np.maximum.reduceat(region.view(np.uint32), plan.spans[2 * lo : 2 * hi - 1] - first_word)
        if int(maxima[::2].max()) >= vocab:  # the even segments are input_ids; a negative id reads as >= 2^31
            raise Irregular
    for token_id in (rules.tokens.image_id, rules.tokens.audio_id):
        if token_id is not None:
            _no_token(region, first_word, plan, lo, hi, token_id)


def _no_token(region: np.ndarray, first_word: int, plan: TextPlan, lo: int, hi: int, token_id: int) -> None:
    """``Irregular`` when ``token_id`` (a placeholder) is among the input_ids of packs ``lo:hi``: a hit in
    ``region`` counts only inside a pack's input_ids (the bytes between may hold any word)."""
    found = np.equal(region, token_id, out=_buffer("found", region.shape[0], np.bool_))
    if not found.any():
        return
    hits = np.flatnonzero(found) + first_word
    pack = np.searchsorted(plan.ids_word[lo:hi], hits, side="right") - 1 + lo
    if (hits < plan.ids_word[pack] + plan.tokens[pack]).any():
        raise Irregular  # a placeholder in a pack without media
