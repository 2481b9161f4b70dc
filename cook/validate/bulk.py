"""One shard -> ``ShardScan`` at the speed of read + sha256: the fast path of ``scan.scan_shard``.

    shard -map_shard-> bytes (a text shard of <= 16 MiB hashed whole here) -read_layout-> member table
        -> the small members of all text packs at once (``.npy`` headers here, the rest in
           text_checks.plan_text: boundaries, meta.json, where every sequence lies)
        -> batches of ~4 MiB of text packs: sha256 over the batch's bytes (which brings them into the
           cache), then its input_ids and loss_mask checked in place (text_checks.check_tokens); a pack
           with media members is parsed and checked on its own (scan.check_pack: few packs, many bytes)

The fast path vouches for a shard only when it finds nothing wrong: the tar is plain, every array
member has ``np.save``'s canonical header with the schema dtype, every meta.json is schema v1, and
every invariant of ``check_pack`` holds. Then it returns exactly the ``ShardScan`` that
``scan.stream_shard`` would (a unit test compares the two). On the first doubt it returns ``None``
and ``stream_shard`` walks the shard again and names the problems, so every problem keeps its code
and detail; only clean shards are fast.
"""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
import re
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from cook import format as fmt
from cook.validate.digests import source_digests
from cook.validate.members import parse_pack
from cook.validate.meta_columns import Irregular
from cook.validate.npy_members import array_members, members_like
from cook.validate.problems import PackRules
from cook.validate.scan import ShardScan, add_totals, check_pack, pack_index
from cook.validate.shards import MemberData, RawPack, check_index_offsets
from cook.validate.tar_layout import TarLayout, map_shard, read_layout
from cook.validate.text_checks import TextBatch, TextPlan, check_tokens, plan_text

BATCH_BYTES: Final = 4 << 20  # packs checked together: small enough to stay in the cache after hashing
WHOLE_BYTES: Final = 16 << 20  # a text shard up to this size is hashed first, whole (it stays in the cache)
HASH_SLICE: Final = 1 << 20
_COLUMN: Final = {name: i for i, name in enumerate(fmt.MEMBERS)}
_REQUIRED: Final = [_COLUMN[name] for name in fmt.REQUIRED_MEMBERS]
_OPTIONAL_PAIRS: Final = [(_COLUMN[a], _COLUMN[b]) for a, b in (fmt.VISUAL_MEMBERS, fmt.AUDIO_MEMBERS)]
_ARRAYS: Final = (
    (fmt.INPUT_IDS, "<i4"),
    (fmt.LOSS_MASK, "|u1"),
    (fmt.CU_SEQLENS, "<i4"),
    (fmt.CU_SEQLENS_PADDED, "<i4"),
)
TEXT, MEDIA = 0, 1
_KEYS: Final = re.compile(rb"(?:%s[0-9]{%d})*" % (fmt.PACK_KEY_PREFIX.encode(), fmt.PACK_KEY_DIGITS))


@dataclass(slots=True)
class _Hasher:
    """sha256 of the shard, fed in order up to a given offset (nothing when disabled): from the mapping,
    or, for a shard of mostly media bytes, read from the file into one reused buffer (no page faults)."""

    data: mmap.mmap
    path: str
    enabled: bool
    from_file: bool
    done: int = 0
    digest: Any = field(default_factory=hashlib.sha256)

    def upto(self, end: int) -> None:
        if not self.enabled or end <= self.done:
            return
        if self.from_file:
            if end == len(self.data):  # one pass at the end: the checks do not need these bytes cached
                self._read()
            return
        view = memoryview(self.data)
        try:
            for start in range(self.done, end, HASH_SLICE):
                self.digest.update(view[start : min(start + HASH_SLICE, end)])
        finally:
            view.release()
        self.done = end

    def _read(self) -> None:
        buffer = memoryview(bytearray(HASH_SLICE))  # one per shard (not shared: callers may use threads)
        with open(self.path, "rb", buffering=0) as handle:
            while got := handle.readinto(buffer):
                self.digest.update(buffer[:got])
                self.done += got
        if self.done != len(self.data):
            raise Irregular  # the file changed under us: stream_shard reports what it finds


@dataclass(slots=True)
class _Sources:
    """The digest and pack index of every source, in pack order, as arrays per batch or pack."""

    digests: list[np.ndarray] = field(default_factory=list)
    packs: list[np.ndarray] = field(default_factory=list)
    names: list[str] = field(default_factory=list)  # sources of media packs, digested at the end
    name_packs: list[int] = field(default_factory=list)

    def finish(self, scan: ShardScan) -> None:
        """The shard's sources (text packs' in order, then media packs'; digest and pack stay paired)."""
        digests, packs = [*self.digests, source_digests(self.names)], [*self.packs, np.array(self.name_packs, np.int64)]
        scan.source_digests = np.concatenate([np.zeros(0, np.uint64), *digests])
        scan.source_packs = np.concatenate([np.zeros(0, np.int64), *packs])


def bulk_scan(root: str, name: str, first_pack: int | None, rules: PackRules, verify_sha256: bool) -> ShardScan | None:
    """The shard's ``ShardScan`` when it is clean, else None (``stream_shard`` then checks it)."""
    path = os.path.join(root, name)
    try:
        mapped = map_shard(path)
    except (OSError, ValueError):
        return None  # stream_shard reports the unreadable shard
    if mapped is None:
        return None
    data, media = mapped
    try:
        hasher = _Hasher(data, path, verify_sha256, media)
        if not media and len(data) <= WHOLE_BYTES:
            hasher.upto(len(data))  # all at once: the whole shard is then in the cache for every check
        layout = read_layout(data, populated=not media)
        indices = None if layout is None else _pack_indices(layout.keys, first_pack)
        if layout is None or indices is None:
            return None
        return _scan(data, path, name, layout, indices, rules, hasher)
    except Irregular:
        return None
    finally:
        with contextlib.suppress(BufferError):  # a view still alive: the mapping goes with it
            data.close()


def _pack_indices(keys: list[str], first_pack: int | None) -> np.ndarray | None:
    """int64 [K]: each key's pack index; None when ``first_pack`` is given and a key is not
    ``pack_key(first_pack + i)`` (``stream_shard`` reports it). Keys of ``pack_key``'s form are read at once."""
    width = len(fmt.PACK_KEY_PREFIX) + fmt.PACK_KEY_DIGITS
    joined = "".join(keys).encode("utf-8", "surrogatepass")
    if len(joined) == width * len(keys) and _KEYS.fullmatch(joined):
        digits = np.frombuffer(joined, np.uint8).reshape(-1, width)[:, len(fmt.PACK_KEY_PREFIX) :]
        indices = (digits.astype(np.int64) - ord("0")) @ (10 ** np.arange(fmt.PACK_KEY_DIGITS - 1, -1, -1))
    else:
        indices = np.array([pack_index(key) for key in keys], dtype=np.int64)
        if first_pack is not None and any(key != fmt.pack_key(first_pack + i) for i, key in enumerate(keys)):
            return None
    if first_pack is not None and (indices != first_pack + np.arange(len(keys))).any():
        return None
    return indices


def _kinds(present: np.ndarray) -> np.ndarray:
    """int64 [K]: TEXT or MEDIA per pack (bool [K, 9] members present); ``Irregular`` for any other member set."""
    required = present[:, _REQUIRED].all(axis=1)
    pairs = np.stack([present[:, a] == present[:, b] for a, b in _OPTIONAL_PAIRS], axis=1).all(axis=1)
    media = present[:, [a for a, _ in _OPTIONAL_PAIRS]].any(axis=1)
    if not (required & pairs).all():
        raise Irregular
    kinds: np.ndarray = np.where(media, MEDIA, TEXT)
    return kinds


def _scan(
    data: mmap.mmap, path: str, name: str, layout: TarLayout, indices: np.ndarray, rules: PackRules, hasher: _Hasher
) -> ShardScan:
    scan = ShardScan(name, complete=True, packs=len(layout.keys), bytes=len(data), offsets=list(layout.offsets))
    sources = _Sources()
    kinds = _kinds(layout.at >= 0)
    text_rows = np.flatnonzero(kinds == TEXT)
    shard = np.frombuffer(data, np.uint8)  # uint8 [bytes]: views of the mapping
    words = np.frombuffer(data, "<i4", count=len(data) // 4)
    plan = _plan(data, layout, indices, text_rows, rules, scan, sources)
    offsets = layout.offsets
    start, first = 0, 0  # the pending text batch: its first pack in the layout, and in the plan
    done = 0  # text packs checked
    for i, kind in enumerate(kinds.tolist()):
        if kind == TEXT:
            done += 1
            if offsets[i + 1] - offsets[start] >= BATCH_BYTES:
                hasher.upto(offsets[i + 1])
                _check(shard, words, plan, first, done, rules)
                start, first = i + 1, done
        else:
            hasher.upto(offsets[i])
            _check(shard, words, plan, first, done, rules)
            hasher.upto(offsets[i + 1])
            _media_pack(data, layout, i, rules, scan, sources)
            start, first = i + 1, done
    hasher.upto(len(data))
    _check(shard, words, plan, first, done, rules)
    scan.sha256 = hasher.digest.hexdigest() if hasher.enabled else None
    sources.finish(scan)
    scan.add(check_index_offsets(path, offsets, True))
    return scan


def _plan(
    data: mmap.mmap,
    layout: TarLayout,
    indices: np.ndarray,
    rows: np.ndarray,
    rules: PackRules,
    scan: ShardScan,
    sources: _Sources,
) -> TextPlan | None:
    """``plan_text`` of the layout's text packs ``rows`` (None when there are none), its totals counted in."""
    if not rows.shape[0]:
        return None
    plan = plan_text(np.frombuffer(data, np.uint8), _batch(data, layout, indices, rows), rules)
    totals = plan.totals
    scan.sources += totals.sources
    scan.tokens += totals.tokens
    scan.targets += totals.targets
    scan.padded += totals.padded
    sources.digests.append(totals.source_digests)
    sources.packs.append(totals.source_packs)
    return plan


def _check(shard: np.ndarray, words: np.ndarray, plan: TextPlan | None, lo: int, hi: int, rules: PackRules) -> None:
    if plan is not None:
        check_tokens(shard, words, plan, lo, hi, rules)


def _batch(data: mmap.mmap, layout: TarLayout, indices: np.ndarray, rows: np.ndarray) -> TextBatch:
    """The packs' array members as (data offset, length), from their ``.npy`` headers."""
    at = {member: layout.at[rows, _COLUMN[member]] for member, _ in _ARRAYS}
    size = {member: layout.size[rows, _COLUMN[member]] for member, _ in _ARRAYS}
    ids_at, tokens = array_members(data, at[fmt.INPUT_IDS], size[fmt.INPUT_IDS], "<i4")
    cu_at, bounds = array_members(data, at[fmt.CU_SEQLENS], size[fmt.CU_SEQLENS], "<i4")
    mask_at, mask_tokens = members_like(
        data, at[fmt.LOSS_MASK], size[fmt.LOSS_MASK], "|u1", at[fmt.INPUT_IDS], ids_at, tokens
    )
    padded_at, padded_bounds = members_like(
        data, at[fmt.CU_SEQLENS_PADDED], size[fmt.CU_SEQLENS_PADDED], "<i4", at[fmt.CU_SEQLENS], cu_at, bounds
    )
    if mask_tokens != tokens or bounds != padded_bounds or min(bounds) < 2:
        raise Irregular
    column = _COLUMN[fmt.META]
    spans = zip(layout.at[rows, column].tolist(), layout.size[rows, column].tolist(), strict=True)
    metas = [data[at : at + size] for at, size in spans]
    return TextBatch(indices[rows], ids_at, mask_at, cu_at, padded_at, tokens, bounds, metas)


def _media_pack(
    data: mmap.mmap, layout: TarLayout, row: int, rules: PackRules, scan: ShardScan, sources: _Sources
) -> None:
    """A pack with media members, through the per-pack parser and checks (its bytes are mostly media)."""
    view = memoryview(data)
    members: dict[str, MemberData] = {
        fmt.MEMBERS[column]: view[at : at + size]
        for column, (at, size) in enumerate(zip(layout.at[row].tolist(), layout.size[row].tolist(), strict=True))
        if at >= 0
    }
    key = layout.keys[row]
    pack, findings = parse_pack(RawPack(key, layout.offsets[row], members))
    if pack is None or findings or check_pack(pack, rules):
        raise Irregular
    add_totals(scan, pack, key, sources.names, sources.name_packs)
