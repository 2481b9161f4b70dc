"""One shard -> ``ShardScan`` at the speed of read + sha256: the fast path of ``scan.scan_shard``.

    shard -map_shard-> bytes -read_layout-> member table -> batches of ~1 MiB of packs:
        sha256 over the batch's bytes (which brings them into the cache), then every text pack of the
        batch checked at once with NumPy (text_checks.check_text); a pack with media members is parsed
        and checked on its own (scan.check_pack: few packs, many bytes)

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
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from cook import format as fmt
from cook.validate.digests import source_digests
from cook.validate.members import parse_pack
from cook.validate.meta_columns import Irregular
from cook.validate.npy import canonical_header
from cook.validate.problems import PackRules
from cook.validate.scan import ShardScan, add_totals, check_pack, pack_index
from cook.validate.shards import RawPack, check_index_offsets
from cook.validate.tar_layout import TarLayout, map_shard, read_layout
from cook.validate.text_checks import TextBatch, check_text

BATCH_BYTES: Final = 4 << 20  # packs checked together: small enough to stay in the cache after hashing
HASH_SLICE: Final = 1 << 20
TEXT_MEMBERS: Final = frozenset(fmt.REQUIRED_MEMBERS)
MEDIA_MEMBERS: Final = frozenset(
    TEXT_MEMBERS | frozenset(extra)
    for extra in (fmt.VISUAL_MEMBERS, fmt.AUDIO_MEMBERS, fmt.VISUAL_MEMBERS + fmt.AUDIO_MEMBERS)
)
_NPY_MAGIC: Final = b"\x93NUMPY\x01\x00"
_HEADER_CACHE_LIMIT: Final = 4096
_headers: dict[bytes, tuple[str, int, int]] = {}  # canonical .npy header -> (dtype str, length, data bytes)


@dataclass(slots=True)
class _Hasher:
    """sha256 of the mapped shard, fed in order up to a given offset (nothing when disabled)."""

    data: mmap.mmap
    enabled: bool
    done: int = 0
    digest: Any = field(default_factory=hashlib.sha256)

    def upto(self, end: int) -> None:
        if not self.enabled:
            return
        view = memoryview(self.data)
        try:
            for start in range(self.done, end, HASH_SLICE):
                self.digest.update(view[start : min(start + HASH_SLICE, end)])
        finally:
            view.release()
        self.done = max(self.done, end)


def bulk_scan(root: str, name: str, first_pack: int | None, rules: PackRules, verify_sha256: bool) -> ShardScan | None:
    """The shard's ``ShardScan`` when it is clean, else None (``stream_shard`` then checks it)."""
    path = os.path.join(root, name)
    try:
        data = map_shard(path)
    except (OSError, ValueError):
        return None  # stream_shard reports the unreadable shard
    if data is None:
        return None
    try:
        layout = read_layout(data)
        if layout is None or not _keys_in_sequence(layout, first_pack):
            return None
        return _scan(data, path, name, layout, rules, verify_sha256)
    except Irregular:
        return None
    finally:
        with contextlib.suppress(BufferError):  # a view still alive: the mapping goes with it
            data.close()


def _keys_in_sequence(layout: TarLayout, first_pack: int | None) -> bool:
    if first_pack is None:
        return True
    return all(key == fmt.pack_key(first_pack + i) for i, key in enumerate(layout.keys))


@dataclass(slots=True)
class _Sources:
    """The digest and pack index of every source, in pack order, as arrays per batch or pack."""

    digests: list[np.ndarray] = field(default_factory=list)
    packs: list[np.ndarray] = field(default_factory=list)

    def finish(self, scan: ShardScan) -> None:
        scan.source_digests = np.concatenate([np.zeros(0, np.uint64), *self.digests])
        scan.source_packs = np.concatenate([np.zeros(0, np.int64), *self.packs])


def _scan(data: mmap.mmap, path: str, name: str, layout: TarLayout, rules: PackRules, sha: bool) -> ShardScan:
    scan = ShardScan(name, complete=True, packs=len(layout.keys), bytes=len(data), offsets=list(layout.offsets))
    hasher = _Hasher(data, sha)
    sources = _Sources()
    batch = TextBatch()
    offsets = layout.offsets
    for i, (key, members) in enumerate(zip(layout.keys, layout.members, strict=True)):
        if members.keys() == TEXT_MEMBERS:
            _add_text_pack(batch, data, members, pack_index(key))
            if offsets[i + 1] - offsets[batch.first] >= BATCH_BYTES:
                hasher.upto(offsets[i + 1])
                _flush(data, batch, rules, scan, sources)
                batch = TextBatch(first=i + 1)
        elif frozenset(members) in MEDIA_MEMBERS:
            hasher.upto(offsets[i])
            _flush(data, batch, rules, scan, sources)
            hasher.upto(offsets[i + 1])
            _media_pack(data, key, offsets[i], members, rules, scan, sources)
            batch = TextBatch(first=i + 1)
        else:
            raise Irregular
    hasher.upto(len(data))
    _flush(data, batch, rules, scan, sources)
    scan.sha256 = hasher.digest.hexdigest() if sha else None
    sources.finish(scan)
    scan.add(check_index_offsets(path, offsets, True))
    return scan


def _flush(data: mmap.mmap, batch: TextBatch, rules: PackRules, scan: ShardScan, sources: _Sources) -> None:
    if not batch.tokens:
        return
    totals = check_text(data, batch, rules)
    scan.sources += totals.sources
    scan.tokens += totals.tokens
    scan.targets += totals.targets
    scan.padded += totals.padded
    sources.digests.append(totals.source_digests)
    sources.packs.append(totals.source_packs)


def _npy_1d(data: mmap.mmap, member: tuple[int, int], dtype: str) -> tuple[int, int]:
    """(data offset, length) of a canonical 1-D ``.npy`` member of ``dtype`` with nothing after its data."""
    offset, size = member
    prefix = data[offset : offset + 10]
    if len(prefix) < 10 or prefix[:8] != _NPY_MAGIC:
        raise Irregular
    total = 10 + prefix[8] + (prefix[9] << 8)
    header = data[offset : offset + total]
    parsed = _headers.get(header)
    if parsed is None:
        found = canonical_header(header[10:])
        if found is None or len(found[1]) != 1:
            raise Irregular
        parsed = (found[0].str, found[1][0], found[1][0] * found[0].itemsize)
        if len(_headers) >= _HEADER_CACHE_LIMIT:
            _headers.clear()
        _headers[header] = parsed
    if parsed[0] != dtype or size - total != parsed[2]:
        raise Irregular
    return offset + total, parsed[1]


def _add_text_pack(batch: TextBatch, data: mmap.mmap, members: dict[str, tuple[int, int]], index: int) -> None:
    ids_at, tokens = _npy_1d(data, members[fmt.INPUT_IDS], "<i4")
    mask_at, mask_tokens = _npy_1d(data, members[fmt.LOSS_MASK], "|u1")
    cu_at, bounds = _npy_1d(data, members[fmt.CU_SEQLENS], "<i4")
    padded_at, padded_bounds = _npy_1d(data, members[fmt.CU_SEQLENS_PADDED], "<i4")
    if mask_tokens != tokens or bounds != padded_bounds or bounds < 2:
        raise Irregular
    meta_at, meta_size = members[fmt.META]
    batch.add(index, (ids_at, mask_at, cu_at, padded_at), tokens, bounds, data[meta_at : meta_at + meta_size])


def _media_pack(
    data: mmap.mmap,
    key: str,
    offset: int,
    members: dict[str, tuple[int, int]],
    rules: PackRules,
    scan: ShardScan,
    sources: _Sources,
) -> None:
    """A pack with media members, through the per-pack parser and checks (its bytes are mostly media)."""
    view = memoryview(data)
    raw = RawPack(key, offset, {member: view[at : at + size] for member, (at, size) in members.items()})
    pack, findings = parse_pack(raw)
    if pack is None or findings or check_pack(pack, rules):
        raise Irregular
    names: list[str] = []
    indices: list[int] = []
    add_totals(scan, pack, key, names, indices)
    sources.digests.append(source_digests(names))
    sources.packs.append(np.array(indices, dtype=np.int64))
