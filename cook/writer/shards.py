"""Packs -> deterministic WebDataset tar shards, each with its ``.tar.idx``, written atomically.

Members are streamed as pieces: tar header, ``.npy`` header, a view of the array's own buffer and
padding; the shard is never joined into one ``bytes``. With ``O_DIRECT`` (``cook.writer.direct``)
each piece is copied once, into a bounce buffer that is hashed and written; where the filesystem
refuses ``O_DIRECT`` the pieces go to the kernel in ``os.writev`` batches with no copy, the sha256
updated piece by piece.

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
from cook.manifest import ShardInfo
from cook.types import Pack
from cook.writer.atomic import atomic_fd, atomic_write
from cook.writer.direct import is_direct, write_direct
from cook.writer.members import member_pieces


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


_ZEROS = memoryview(bytes(2 * BLOCK + RECORD))  # padding and the end-of-archive trailer are slices of this


def _iov_max() -> int:
    """The most buffers one ``writev`` takes (``IOV_MAX``, 1024 on Linux); 1024 where sysconf cannot say."""
    limit = os.sysconf("SC_IOV_MAX") if "SC_IOV_MAX" in os.sysconf_names else -1
    return limit if limit > 0 else 1024


IOV_MAX = _iov_max()


def shard_pieces(first_pack: int, packs: list[Pack]) -> tuple[list[memoryview], ShardLayout]:
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
        for member, contents in member_pieces(pack):
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


DIRECT_IO = True  # shards go to the disk with O_DIRECT where the filesystem takes it (cook.writer.direct)


def _writev_all(fd: int, pieces: list[memoryview]) -> None:
    """Write all of ``pieces`` (non-empty, at most ``IOV_MAX``) in order; a short write resumes mid-piece."""
    pending = list(pieces)  # the caller's list stays whole: it hashes the pieces afterwards
    while pending:
        written = os.writev(fd, pending)
        if written <= 0:
            raise OSError(f"writev wrote {written} of {sum(p.nbytes for p in pending)} bytes")
        done = 0
        while done < len(pending) and written >= pending[done].nbytes:
            written -= pending[done].nbytes
            done += 1
        pending = pending[done:]
        if written:
            pending[0] = pending[0][written:]


def write_pieces(fd: int, pieces: list[memoryview]) -> tuple[int, str]:
    """The buffered path: ``pieces`` to ``fd`` in ``writev`` batches of at most ``IOV_MAX``; -> (bytes, sha256).

    The digest is updated with each piece as its batch is written, so the bytes are never joined.
    """
    digest = hashlib.sha256()
    size = 0
    for start in range(0, len(pieces), IOV_MAX):
        batch = pieces[start : start + IOV_MAX]
        _writev_all(fd, batch)
        for piece in batch:
            digest.update(piece)
            size += piece.nbytes
    return size, digest.hexdigest()


def write_shard(out_dir: str, shard_index: int, first_pack: int, packs: list[Pack]) -> tuple[ShardInfo, ShardLayout]:
    """Write ``packs`` as one shard and its ``.tar.idx``, atomically; keys are ``pack_key(first_pack + i)``.

    Each member goes from its pack's array to the file with one copy: into the direct writer's
    bounce buffer (``write_direct``), or, where the filesystem takes no ``O_DIRECT``, into the page
    cache (``write_pieces``: no copy in cook when the array is C-contiguous in the member dtype).
    ``ShardInfo.sha256`` is the digest of the file.
    """
    name = fmt.shard_name(shard_index)
    pieces, layout = shard_pieces(first_pack, packs)
    path = os.path.join(out_dir, name)
    with atomic_fd(path, direct=DIRECT_IO) as fd:
        size, sha256 = write_direct(fd, pieces) if is_direct(fd) else write_pieces(fd, pieces)
    atomic_write(path + fmt.INDEX_SUFFIX, struct.pack(f"<{len(layout.offsets)}Q", *layout.offsets))
    return ShardInfo(name, len(packs), first_pack, size, sha256), layout
