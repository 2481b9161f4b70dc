"""Packs -> deterministic WebDataset tar shards, each with its ``.tar.idx``, written atomically.

Tar headers carry no time, owner or host information (mtime 0, uid/gid 0, mode 0644), so the same
packs always give byte-identical shards. ``.tar.idx`` is Energon's index: one little-endian uint64
per sample, the byte offset of its first header, plus the end offset of the last sample. The
``ShardLayout`` (every member's place, known while the tar is built) feeds Energon's ``index.sqlite``
(``cook.writer.energon_index``), so nothing re-reads a shard to index it.
"""

from __future__ import annotations

import hashlib
import os
import struct
import tarfile
from dataclasses import dataclass

from cook import format as fmt
from cook.types import Pack
from cook.writer.atomic import atomic_open, atomic_write
from cook.writer.members import pack_members


@dataclass(frozen=True)
class ShardInfo:
    name: str
    packs: int
    first_pack: int
    bytes: int
    sha256: str


def _tar_info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = 0
    info.mode = 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


BLOCK = tarfile.BLOCKSIZE  # 512
RECORD = tarfile.RECORDSIZE  # 10240: the archive is padded to a multiple of this, as tarfile does
_TEMPLATE = bytearray(_tar_info("", 0).tobuf(tarfile.USTAR_FORMAT, "utf-8", "surrogateescape"))
_TEMPLATE[148:156] = b" " * 8  # the checksum is computed over the header with this field as spaces


def member_header(name: str, size: int) -> bytes:
    """The USTAR header ``tarfile`` writes for ``_tar_info(name, size)``, built from a template.

    Byte-identical to ``_tar_info(name, size).tobuf(USTAR_FORMAT)`` (a unit test checks it); only the
    name, size and checksum fields vary, so this skips tarfile's per-member bookkeeping.
    """
    encoded = name.encode("utf-8")
    if len(encoded) > 100 or size >= 8**11:
        return _tar_info(name, size).tobuf(tarfile.USTAR_FORMAT, "utf-8", "surrogateescape")
    header = _TEMPLATE.copy()
    header[: len(encoded)] = encoded
    header[124:136] = b"%011o\x00" % size
    header[148:155] = b"%06o\x00" % sum(header)
    return bytes(header)


@dataclass(frozen=True)
class ShardLayout:
    """Where every sample and member of a shard sits, as Energon indexes it."""

    keys: tuple[str, ...]  # sample keys, in order
    offsets: tuple[int, ...]  # ``.tar.idx``: each sample's first header, then the end of the last
    parts: tuple[tuple[int, str, int, int], ...]  # (sample index, part name, content offset, size)


def shard_bytes(first_pack: int, packs: list[Pack]) -> tuple[bytes, ShardLayout]:
    """The tar of ``packs`` (keys ``pack_key(first_pack + i)``) and its layout."""
    chunks: list[bytes] = []
    keys = [fmt.pack_key(first_pack + i) for i in range(len(packs))]
    offsets: list[int] = []
    parts: list[tuple[int, str, int, int]] = []
    offset = 0
    for i, pack in enumerate(packs):
        offsets.append(offset)
        for member, data in pack_members(pack):
            pad = -len(data) % BLOCK
            chunks += (member_header(f"{keys[i]}.{member}", len(data)), data, b"\0" * pad)
            parts.append((i, member, offset + BLOCK, len(data)))
            offset += BLOCK + len(data) + pad
    offsets.append(offset)
    end = offset + 2 * BLOCK
    chunks.append(b"\0" * (2 * BLOCK + -end % RECORD))
    return b"".join(chunks), ShardLayout(tuple(keys), tuple(offsets), tuple(parts))


def write_shard(out_dir: str, shard_index: int, first_pack: int, packs: list[Pack]) -> tuple[ShardInfo, ShardLayout]:
    """Write ``packs`` as one shard; keys are ``pack_key(first_pack + i)``."""
    name = fmt.shard_name(shard_index)
    data, layout = shard_bytes(first_pack, packs)
    path = os.path.join(out_dir, name)
    with atomic_open(path) as handle:
        handle.write(data)
    atomic_write(path + fmt.INDEX_SUFFIX, struct.pack(f"<{len(layout.offsets)}Q", *layout.offsets))
    return ShardInfo(name, len(packs), first_pack, len(data), hashlib.sha256(data).hexdigest()), layout
