"""A shard's bytes (mapped once) -> its member table: the fast path of ``shards.ShardWalk``.

``read_layout`` walks the tar headers of a mapped shard in one Python loop that reads only each
header's name and size, then checks every header at once with NumPy (checksum, member type, size
digits, no prefix field) and the end of the archive (two zero blocks, only zeros after them). It
accepts only the plain layout cook writes; anything else (a truncation, a corrupt header, a pax or
GNU member, a member split from its pack, a duplicate) returns ``None`` and the shard goes to
``ShardWalk``, which names the problem. Accepting is therefore a promise that ``ShardWalk`` would
walk the same packs, offsets and members with no finding.

Example: members ``pack-000000000.input_ids.npy`` (header at 0, 9216 bytes), ``pack-000000000.loss_mask.npy``
(header at 9728), ... -> ``TarLayout(keys=["pack-000000000", ...], offsets=[0, ..., end marker],
members=[{"input_ids.npy": (512, 9216), ...}, ...])``: each member's content offset and size.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from typing import Final

import numpy as np

BLOCK: Final = 512
_ZERO_BLOCK: Final = bytes(BLOCK)
_OCTAL_POWERS: Final = 8 ** np.arange(5, -1, -1, dtype=np.int64)  # the 6 checksum digits


@dataclass(frozen=True, slots=True)
class TarLayout:
    """Where every pack and member of a well-formed shard sits."""

    keys: list[str]  # pack keys, in file order
    offsets: list[int]  # each pack's first header, then the end-of-archive marker (as ``ShardWalk.offsets``)
    members: list[dict[str, tuple[int, int]]]  # per pack: member name -> (content offset, size)


def map_shard(path: str) -> mmap.mmap | None:
    """The whole shard mapped read-only (pages filled up front); None for an empty file."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size == 0:
            return None
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        return mmap.mmap(handle.fileno(), size, flags=flags, prot=mmap.PROT_READ)


def read_layout(data: mmap.mmap) -> TarLayout | None:
    """The member table of ``data``, or None when anything about the tar is not plain (see the module doc)."""
    size = len(data)
    headers: list[bytes] = []
    names: list[bytes] = []
    sizes: list[int] = []
    offset = 0
    while offset + BLOCK <= size:
        header = data[offset : offset + BLOCK]
        if header[0] == 0:  # cook never writes an empty name: the end marker, or not plain
            break
        try:
            length = int(header[124:135], 8)
        except ValueError:
            return None
        if length < 0:
            return None
        end = header.find(0, 0, 100)
        headers.append(header)
        names.append(header[:end] if end >= 0 else header[:100])
        sizes.append(length)
        offset += BLOCK + length + (-length % BLOCK)
    if offset + 2 * BLOCK > size or data[offset : offset + 2 * BLOCK] != _ZERO_BLOCK * 2 or not headers:
        return None
    if np.frombuffer(data, np.uint8, offset=offset).any() or not _headers_plain(headers):
        return None
    return _group(names, sizes, offset)


def _headers_plain(headers: list[bytes]) -> bool:
    """Every header: checksum right (6 octal digits, NUL, space), size 11 octal digits and NUL, a regular
    member, no prefix field (so the walk's ``int(size field, 8)`` read exactly what ``ShardWalk`` reads)."""
    table = np.frombuffer(b"".join(headers), np.uint8).reshape(-1, BLOCK)  # uint8 [members, 512]
    digits = table[:, 148:154].astype(np.int64) - ord("0")
    size_digits = table[:, 124:135]
    if (digits < 0).any() or (digits > 7).any() or (table[:, 154] != 0).any() or (table[:, 155] != ord(" ")).any():
        return False
    if (size_digits < ord("0")).any() or (size_digits > ord("7")).any() or (table[:, 135] != 0).any():
        return False
    stored = digits @ _OCTAL_POWERS
    actual = table[:, :148].sum(axis=1, dtype=np.int64) + table[:, 156:].sum(axis=1, dtype=np.int64) + 8 * 32
    kinds = table[:, 156]
    regular = (kinds == ord("0")) | (kinds == 0)
    return bool((stored == actual).all() and regular.all() and not table[:, 345:500].any())


def _group(names: list[bytes], sizes: list[int], end: int) -> TarLayout | None:
    """Members -> packs by key (the name up to its first "."): contiguous, each member once."""
    keys: list[str] = []
    offsets: list[int] = []
    members: list[dict[str, tuple[int, int]]] = []
    current: dict[str, tuple[int, int]] = {}
    key: str | None = None
    offset = 0
    try:
        for raw_name, length in zip(names, sizes, strict=True):
            member_key, _, member = raw_name.decode("utf-8").partition(".")
            if member_key != key:
                key, current = member_key, {}
                keys.append(member_key)
                offsets.append(offset)
                members.append(current)
            if member in current:
                return None
            current[member] = (offset + BLOCK, length)
            offset += BLOCK + length + (-length % BLOCK)
    except UnicodeDecodeError:
        return None
    if len(set(keys)) != len(keys):
        return None  # a pack split in two
    offsets.append(end)
    return TarLayout(keys, offsets, members)
