"""Packs -> deterministic WebDataset tar shards, each with its ``.tar.idx``, written atomically.

Tar headers carry no time, owner or host information (mtime 0, uid/gid 0, mode 0644), so the same
packs always give byte-identical shards. ``.tar.idx`` is Energon's index: one little-endian uint64
per sample, the byte offset of its first header, plus the end offset of the last sample.
"""

from __future__ import annotations

import hashlib
import io
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


def write_shard(out_dir: str, shard_index: int, first_pack: int, packs: list[Pack]) -> ShardInfo:
    """Write ``packs`` as one shard; keys are ``pack_key(first_pack + i)``."""
    name = fmt.shard_name(shard_index)
    offsets: list[int] = []
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for i, pack in enumerate(packs):
            offsets.append(tar.offset)
            key = fmt.pack_key(first_pack + i)
            for member, data in pack_members(pack):
                tar.addfile(_tar_info(f"{key}.{member}", len(data)), io.BytesIO(data))
        offsets.append(tar.offset)
    data = buffer.getvalue()
    path = os.path.join(out_dir, name)
    with atomic_open(path) as handle:
        handle.write(data)
    atomic_write(path + fmt.INDEX_SUFFIX, b"".join(struct.pack("<Q", o) for o in offsets))
    return ShardInfo(name, len(packs), first_pack, len(data), hashlib.sha256(data).hexdigest())
