"""Shard bytes to the disk with ``O_DIRECT``, through two page-aligned bounce buffers: the switch
``ray.direct_io`` (off by default; docs/SCALING.md has the measurements).

A buffered write copies every byte into the page cache, which the kernel then writes back and
frees. With ``O_DIRECT`` the pieces are copied once, into an aligned buffer of ``CHUNK`` bytes; the
digest is updated from that buffer while it is hot, and a helper thread writes it to the disk while
the next buffer fills. The page cache is not used.

The file's last partial block is written after ``O_DIRECT`` is cleared. A filesystem that refuses
``O_DIRECT`` (``EINVAL`` at open, or at a write) gets the buffered path: ``atomic_fd`` opens without
it, and a refused write clears the flag and is repeated. The caller still fsyncs the file.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import mmap
import os
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

O_DIRECT = getattr(os, "O_DIRECT", 0)  # 0 where the platform has none: always buffered
CHUNK = 8 * 2**20  # bytes per direct write; two such buffers per writer
ALIGN = 4096  # offsets and lengths of a direct write are multiples of this (the buffers are page-aligned)

_buffers: list[memoryview] = []  # this process's bounce buffers, kept: fresh pages cost more than the copy
_buffers_lock = threading.Lock()


def is_direct(fd: int) -> bool:
    return bool(O_DIRECT) and bool(fcntl.fcntl(fd, fcntl.F_GETFL) & O_DIRECT)


def clear_direct(fd: int) -> None:
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~O_DIRECT)


def _pwrite_all(fd: int, view: memoryview, offset: int) -> None:
    """Write all of ``view`` at ``offset``; a direct write the filesystem refuses is repeated buffered."""
    while view.nbytes:
        try:
            written = os.pwrite(fd, view, offset)
        except OSError as err:
            if err.errno != errno.EINVAL or not is_direct(fd):
                raise
            clear_direct(fd)
            continue
        if written <= 0:
            raise OSError(f"pwrite wrote {written} of {view.nbytes} bytes")
        view, offset = view[written:], offset + written


@contextlib.contextmanager
def _bounce() -> Iterator[list[memoryview]]:
    """Two page-aligned ``CHUNK``-byte buffers: this process's own, or fresh ones while those are in use."""
    if not _buffers_lock.acquire(blocking=False):
        yield [memoryview(mmap.mmap(-1, CHUNK)) for _ in range(2)]
        return
    try:
        if not _buffers or _buffers[0].nbytes != CHUNK:
            _buffers[:] = [memoryview(mmap.mmap(-1, CHUNK)) for _ in range(2)]
        yield _buffers
    finally:
        _buffers_lock.release()


def write_direct(fd: int, pieces: list[memoryview]) -> tuple[int, str]:
    """Write ``pieces`` in order from offset 0 of ``fd`` (opened with ``O_DIRECT``); -> (bytes, sha256 hex).

    Each byte is copied once, into a bounce buffer; full buffers are hashed and handed to a helper
    thread, which writes one while the other fills. The tail (less than ``ALIGN`` bytes) is written
    with ``O_DIRECT`` cleared.
    """
    digest = hashlib.sha256()
    offset = fill = current = 0
    with _bounce() as buffers, ThreadPoolExecutor(1, thread_name_prefix="cook-direct") as pool:
        pending: list[Future[None] | None] = [None, None]
        buffer = buffers[0]
        for piece in pieces:
            piece = piece.cast("B") if piece.format != "B" or piece.ndim != 1 else piece
            at = 0
            while at < piece.nbytes:
                n = min(CHUNK - fill, piece.nbytes - at)
                buffer[fill : fill + n] = piece[at : at + n]
                fill, at = fill + n, at + n
                if fill == CHUNK:
                    digest.update(buffer)
                    pending[current] = pool.submit(_pwrite_all, fd, buffer, offset)
                    offset, fill, current = offset + CHUNK, 0, current ^ 1
                    waiting, pending[current] = pending[current], None
                    if waiting is not None:
                        waiting.result()  # that buffer is free again (or its write's error is raised)
                    buffer = buffers[current]
        digest.update(buffer[:fill])
        for waiting in pending:
            if waiting is not None:
                waiting.result()
        aligned = fill - fill % ALIGN
        _pwrite_all(fd, buffer[:aligned], offset)
        if fill > aligned:
            if is_direct(fd):
                clear_direct(fd)
            _pwrite_all(fd, buffer[aligned:fill], offset + aligned)
    return offset + fill, digest.hexdigest()
