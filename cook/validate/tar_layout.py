"""A shard's bytes (mapped once) -> its member table: the fast path of ``shards.ShardWalk``.

``read_layout`` finds the tar headers of a mapped shard at once (the blocks with the ustar magic, whose
sizes chain from one to the next: exactly the headers a walk visits), or, when that chain does not
hold, walks them in one Python loop that reads only each header's size; then it checks every header
at once with NumPy (checksum, member type, size digits, no prefix field) and groups the members (at
once when all keys have one length): the name up to its first "." is the pack key, the rest one of
``format.MEMBERS``; packs contiguous, no member twice; the archive ends with two zero blocks and only
zeros after them. It accepts only the plain layout cook writes; anything else (a truncation, a corrupt
header, a pax or GNU member, an unknown member, a member split from its pack, a duplicate) returns
``None`` and the shard goes to ``ShardWalk``, which names the problem. Accepting is a promise that
``ShardWalk`` would walk the same packs, offsets and members with no finding.

Example: members ``pack-000000000.input_ids.npy`` (header at 0, 9216 bytes), ``pack-000000000.loss_mask.npy``
(header at 9728), ... -> ``TarLayout(keys=["pack-000000000", ...], offsets=[0, ..., end marker])`` with
``at[0, 0] = 512`` and ``size[0, 0] = 9216`` (member column 0 is ``format.MEMBERS[0]``, input_ids.npy).
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from typing import Final

import numpy as np

from cook import format as fmt

BLOCK: Final = 512
NAME_FIELD: Final = 100
_ZERO_BLOCKS: Final = bytes(2 * BLOCK)
_OCTAL_POWERS: Final = 8 ** np.arange(5, -1, -1, dtype=np.int64)  # the 6 checksum digits
_SIZE_POWERS: Final = 8 ** np.arange(10, -1, -1, dtype=np.int64)  # the 11 size digits
_MAGIC: Final = np.frombuffer(b"ustar", np.uint8)  # POSIX ustar magic at offset 257 of every header cook writes
_COLUMNS: Final = {name.encode(): i for i, name in enumerate(fmt.MEMBERS)}  # member name -> its column
_SORTED_MEMBERS: Final = np.array(sorted(_COLUMNS), dtype=bytes)  # the member names, sorted ("S" strings)
_SORTED_COLUMNS: Final = np.array([_COLUMNS[name] for name in sorted(_COLUMNS)], dtype=np.int64)
PEEK_BYTES: Final = 1 << 16  # read to guess a shard's kind from its first pack
MEDIA_BYTES: Final = 1 << 20
_EVEN_BYTES: Final = np.uint64(0x00FF00FF00FF00FF)
_LANE: Final = np.uint64(0xFFFF)
_MEDIA_MEMBERS: Final = frozenset({fmt.PIXEL_PATCHES.encode(), fmt.AUDIO_FEATURES.encode()})


@dataclass(frozen=True, slots=True)
class TarLayout:
    """Where every pack and member of a well-formed shard sits."""

    keys: list[str]  # pack keys, in file order
    offsets: list[int]  # each pack's first header, then the end-of-archive marker (as ``ShardWalk.offsets``)
    at: np.ndarray  # int64 [K, 9]: content offset of each ``format.MEMBERS`` member, -1 when absent
    size: np.ndarray  # int64 [K, 9]: its size in bytes, -1 when absent


def map_shard(path: str) -> tuple[mmap.mmap, bool] | None:
    """The whole shard mapped read-only, and whether its bytes are mostly media (None for an empty file).

    A shard of text packs is mapped with its pages filled up front (its checks read every byte); a
    shard whose first pack holds a large media member is not: its media bytes are only hashed, which
    a plain read does faster than faults on the mapping, so only the pages parsed are ever mapped.
    """
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size == 0:
            return None
        media = _media_heavy(os.pread(handle.fileno(), PEEK_BYTES, 0))
        flags = mmap.MAP_SHARED | (0 if media else getattr(mmap, "MAP_POPULATE", 0))
        return mmap.mmap(handle.fileno(), size, flags=flags, prot=mmap.PROT_READ), media


def _media_heavy(head: bytes) -> bool:
    """Whether the first pack in ``head`` (the shard's first bytes) has a media member of MEDIA_BYTES or more."""
    offset, key = 0, None
    while offset + BLOCK <= len(head) and head[offset]:
        try:
            length = int(head[offset + 124 : offset + 135], 8)
        except ValueError:
            return False
        member_key, _, member = head[offset : offset + NAME_FIELD].partition(b"\0")[0].partition(b".")
        if key is not None and member_key != key:
            return False
        key = member_key
        if member in _MEDIA_MEMBERS and length >= MEDIA_BYTES:
            return True
        offset += BLOCK + max(length, 0) + (-max(length, 0) % BLOCK)
    return False


def blocks(data: mmap.mmap) -> np.ndarray:
    """uint8 [B, 512]: the shard as tar blocks (a view; a partial last block left out)."""
    count = len(data) // BLOCK
    return np.frombuffer(data, np.uint8, count=count * BLOCK).reshape(count, BLOCK)


def read_layout(data: mmap.mmap, populated: bool = True) -> TarLayout | None:
    """The member table of ``data``, or None when anything about the tar is not plain (see the module doc).
    ``populated``: every page is mapped already (a text shard), so looking at every block costs no fault."""
    size = len(data)
    walked = _chain(data) if populated else None
    if walked is None:
        walked = _walk(data)
    if walked is None:
        return None
    starts, sizes, offset = walked
    if not starts.shape[0] or offset + 2 * BLOCK > size or data[offset : offset + 2 * BLOCK] != _ZERO_BLOCKS:
        return None
    if np.frombuffer(data, np.uint8, offset=offset).any():
        return None
    table = blocks(data)[starts // BLOCK]  # uint8 [M, 512], a copy
    if not _headers_plain(table):
        return None  # a corrupt or non-regular header
    return _group(table[:, :NAME_FIELD], starts, sizes, offset)


Walked = tuple[np.ndarray, list[int], int]  # int64 [M] header offsets, member sizes, the end of the last member


def _walk(data: mmap.mmap) -> Walked | None:
    """The headers ``ShardWalk`` visits, one at a time: each header's size says where the next one is."""
    size = len(data)
    headers: list[int] = []
    sizes: list[int] = []
    add_header, add_size = headers.append, sizes.append
    offset = 0
    try:
        while offset + BLOCK <= size and data[offset]:  # cook never writes an empty name: a zero byte ends
            length = int(data[offset + 124 : offset + 135], 8)
            if length < 0:
                return None
            add_header(offset)
            add_size(length)
            offset += BLOCK + length + (-length % BLOCK)
    except ValueError:
        return None
    return np.array(headers, dtype=np.int64), sizes, offset


def _chain(data: mmap.mmap) -> Walked | None:
    """What ``_walk`` returns, found at once: the blocks with the ustar magic are the candidates, and when
    each one's size (11 octal digits) leads exactly to the next and the last to a zero byte (or the end),
    they are the headers the walk visits. None (walk one at a time) at any doubt: a member's data
    that happens to hold the magic, a header without it, a size field ``int(field, 8)`` reads otherwise."""
    table = blocks(data)
    found = np.flatnonzero(table[:, 257] == _MAGIC[0])
    found = found[(table[found, 257:262] == _MAGIC).all(axis=1)]  # int64 [C]: candidate blocks
    if not found.shape[0] or found[0] != 0:
        return None
    digits = table[found, 124:135].astype(np.int64) - ord("0")  # int64 [C, 11]
    if (digits < 0).any() or (digits > 7).any() or not table[found, 0].all():
        return None
    lengths = digits @ _SIZE_POWERS  # int64 [C]
    starts = found * BLOCK
    after = starts + BLOCK + lengths + (-lengths % BLOCK)  # where the walk goes next
    end = int(after[-1])
    if (after[:-1] != starts[1:]).any() or (end + BLOCK <= len(data) and data[end]):
        return None
    return starts, lengths.tolist(), end


def _group(names: np.ndarray, starts: np.ndarray, sizes: list[int], end: int) -> TarLayout | None:
    """Members -> packs: key = the name up to its first ".", the rest one of ``format.MEMBERS``
    (``names``: uint8 [M, 100], the headers' name fields)."""
    split = _split_fixed(names)
    if split is None:
        split = _split_each(names)
    if split is None:
        return None  # a member that is not schema v1 (or a pickle): ShardWalk and parse_pack report it
    keys, column = split
    new_pack = np.ones(keys.shape[0], dtype=bool)  # bool [M]
    new_pack[1:] = keys[1:] != keys[:-1]
    firsts = np.flatnonzero(new_pack)
    pack_keys: list[bytes] = keys[firsts].tolist()
    if len(set(pack_keys)) != len(pack_keys):
        return None  # a pack split in two
    try:
        names_of_packs = [key.decode("utf-8") for key in pack_keys]
    except UnicodeDecodeError:
        return None
    pack = np.cumsum(new_pack) - 1  # int64 [M]
    rising = (column[1:] > column[:-1]) | new_pack[1:]  # in each pack, members in format.MEMBERS order: no twice
    if not rising.all() and np.unique(pack * len(fmt.MEMBERS) + column).shape[0] != pack.shape[0]:
        return None  # a member twice in one pack
    at = np.full((len(pack_keys), len(fmt.MEMBERS)), -1, dtype=np.int64)
    size = np.full((len(pack_keys), len(fmt.MEMBERS)), -1, dtype=np.int64)
    at[pack, column] = starts + BLOCK
    size[pack, column] = sizes
    return TarLayout(names_of_packs, [*starts[firsts].tolist(), end], at, size)


Split = tuple[np.ndarray, np.ndarray]  # bytes [M]: each member's key, int64 [M]: its column in format.MEMBERS


def _split_fixed(names: np.ndarray) -> Split | None:
    """The split at once when every name has its first "." at one place (keys of one length, no NUL in
    them) and after it one of ``format.MEMBERS`` and only NULs; None otherwise (``_split_each`` decides)."""
    dots = names == ord(".")
    width = int(dots[0].argmax())
    if not dots[0, width] or not dots[:, width].all() or dots[:, :width].any() or not names[:, :width].all():
        return None
    tails = np.ascontiguousarray(names[:, width + 1 :]).view(f"S{NAME_FIELD - width - 1}").ravel()
    found = np.minimum(np.searchsorted(_SORTED_MEMBERS, tails), len(_SORTED_MEMBERS) - 1)
    if (_SORTED_MEMBERS[found] != tails).any():  # "S" drops trailing NULs only: a name, then NULs
        return None
    keys = np.ascontiguousarray(names[:, :width]).view(f"S{width}").ravel()
    return keys, _SORTED_COLUMNS[found]


def _split_each(names: np.ndarray) -> Split | None:
    """The split name by name: up to the first NUL, then at the first "."; None for a member not in the schema."""
    raw = names.tobytes()
    parts = [raw[at : at + NAME_FIELD].partition(b"\0")[0].partition(b".") for at in range(0, len(raw), NAME_FIELD)]
    columns = [_COLUMNS.get(member, -1) if dot else -1 for _, dot, member in parts]
    if min(columns) < 0:
        return None
    return np.array([key for key, _, _ in parts], dtype=bytes), np.array(columns, dtype=np.int64)


def _headers_plain(table: np.ndarray) -> bool:
    """Every header: checksum right (6 octal digits, NUL, space), size 11 octal digits and NUL, a regular
    member, no prefix field (so the walk's ``int(size field, 8)`` read exactly what ``ShardWalk`` reads)."""
    digits = table[:, 148:154].astype(np.int64) - ord("0")
    size_digits = table[:, 124:135]
    if (digits < 0).any() or (digits > 7).any() or (table[:, 154] != 0).any() or (table[:, 155] != ord(" ")).any():
        return False
    if (size_digits < ord("0")).any() or (size_digits > ord("7")).any() or (table[:, 135] != 0).any():
        return False
    stored = digits @ _OCTAL_POWERS
    sums = _byte_sums(table) - table[:, 148:156].sum(axis=1, dtype=np.int64)
    actual = sums + 8 * ord(" ")  # the checksum field counts as spaces
    kinds = table[:, 156]
    regular = (kinds == ord("0")) | (kinds == 0)
    return bool((stored == actual).all() and regular.all() and not table[:, 345:500].any())


def _byte_sums(table: np.ndarray) -> np.ndarray:
    """int64 [M]: the sum of each row's bytes (``table``: uint8 [M, 512], contiguous), eight at a time: even and
    odd bytes added in 16-bit lanes (at most 64 * 510 < 2^16 in each lane of a row's sum), then the lanes."""
    words = table.view(np.uint64)  # uint64 [M, 64]
    lanes = ((words & _EVEN_BYTES) + ((words >> np.uint64(8)) & _EVEN_BYTES)).sum(axis=1, dtype=np.uint64)
    total = lanes & _LANE
    for shift in (16, 32, 48):
        total += (lanes >> np.uint64(shift)) & _LANE
    sums: np.ndarray = total.astype(np.int64)
    return sums
