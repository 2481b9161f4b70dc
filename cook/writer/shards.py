"""Packs -> deterministic WebDataset tar shards, each with its ``.tar.idx``, written atomically.

Members are streamed as pieces: tar header (``tarfile.TarInfo``), ``.npy`` header, a view of the
array's own buffer and padding; the shard is never joined into one ``bytes``. The pieces go to the
file through an ordinary buffered write, and the sha256 is updated with each piece as it is written;
with ``direct`` (the switch ``ray.direct_io``) they go through ``cook.writer.direct`` instead.

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
from cook.contract import RAW_STORAGE, FrameStorage
from cook.manifest import ShardInfo
from cook.types import Pack
from cook.writer.atomic import atomic_fd, atomic_open, atomic_write
from cook.writer.direct import write_direct
from cook.writer.members import member_pieces

BLOCK = tarfile.BLOCKSIZE  # 512
RECORD = tarfile.RECORDSIZE  # 10240: the archive is padded to a multiple of this, as tarfile does


def member_header(name: str, size: int) -> bytes:
    """The USTAR header of member ``name`` (``size`` bytes), with no time, owner or host in it."""
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = 0
    info.mode = 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info.tobuf(tarfile.USTAR_FORMAT, "utf-8", "surrogateescape")


@dataclass(frozen=True)
class ShardLayout:
    """Where every sample and member of a shard sits, as Energon indexes it."""

    keys: tuple[str, ...]  # sample keys, in order
    offsets: tuple[int, ...]  # ``.tar.idx``: each sample's first header, then the end of the last
    parts: tuple[tuple[int, str, int, int], ...]  # (sample index, part name, content offset, size)


_ZEROS = memoryview(bytes(2 * BLOCK + RECORD))  # padding and the end-of-archive trailer are slices of this


def shard_pieces(
    first_pack: int, packs: list[Pack], storage: FrameStorage = RAW_STORAGE, video_storage: FrameStorage | None = None
) -> tuple[list[memoryview], ShardLayout]:
    """The tar of ``packs`` (keys ``pack_key(first_pack + i)``) as ordered, non-empty pieces, and its layout.

    Per member: its tar header, its pieces from ``member_pieces`` (an array's ``.npy`` header, then a
    view of the array's own buffer), then zero padding to a 512-byte block; then two zero blocks and
    zeros up to a multiple of ``RECORD``, as ``tarfile`` closes an archive. Joined, the pieces are
    the shard's bytes; no array is copied to build them.
    """
    pieces: list[memoryview] = []
    keys = [fmt.pack_key(first_pack + i) for i in range(len(packs))]
    offsets: list[int] = []
    parts: list[tuple[int, str, int, int]] = []
    offset = 0
    for i, pack in enumerate(packs):
        offsets.append(offset)
        for member, contents in member_pieces(pack, storage, video_storage):
            size = sum(piece.nbytes for piece in contents)
            pad = -size % BLOCK
            pieces += (memoryview(member_header(f"{keys[i]}.{member}", size)), *contents, _ZEROS[:pad])
            parts.append((i, member, offset + BLOCK, size))
            offset += BLOCK + size + pad
    offsets.append(offset)
    end = offset + 2 * BLOCK
    pieces.append(_ZEROS[: 2 * BLOCK + -end % RECORD])
    layout = ShardLayout(tuple(keys), tuple(offsets), tuple(parts))
    return [piece for piece in pieces if piece.nbytes], layout


def write_shard(
    out_dir: str,
    shard_index: int,
    first_pack: int,
    packs: list[Pack],
    direct: bool = False,
    storage: FrameStorage = RAW_STORAGE,
    video_storage: FrameStorage | None = None,
) -> tuple[ShardInfo, ShardLayout]:
    """Write ``packs`` as one shard and its ``.tar.idx``, atomically; keys are ``pack_key(first_pack + i)``.

    ``ShardInfo.sha256`` is the digest of the file, computed from the pieces as they are written.
    ``direct``: write with ``O_DIRECT`` (``cook.writer.direct``); the bytes are the same.
    ``storage``, ``video_storage``: how image and video frames are stored (``cook.writer.members``).
    """
    name = fmt.shard_name(shard_index)
    pieces, layout = shard_pieces(first_pack, packs, storage, video_storage)
    path = os.path.join(out_dir, name)
    if direct:
        with atomic_fd(path, direct=True) as fd:
            size, sha256 = write_direct(fd, pieces)
    else:
        digest = hashlib.sha256()
        size = 0
        with atomic_open(path) as handle:
            for piece in pieces:
                handle.write(piece)
                digest.update(piece)
                size += piece.nbytes
        sha256 = digest.hexdigest()
    atomic_write(path + fmt.INDEX_SUFFIX, struct.pack(f"<{len(layout.offsets)}Q", *layout.offsets))
    return ShardInfo(name, len(packs), first_pack, size, sha256), layout
