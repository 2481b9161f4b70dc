"""Atomic file writes: a temp name in the same directory, fsync, then rename.

A crash never leaves a half-written file under its final name.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from typing import BinaryIO

from cook.writer.direct import O_DIRECT


@contextlib.contextmanager
def atomic_fd(path: str, direct: bool = False) -> Iterator[int]:
    """Write ``path`` atomically through the temp file's descriptor (unbuffered); on an exception the temp
    file is removed and ``path`` untouched.

    ``direct`` opens the file with ``O_DIRECT`` where the platform and the filesystem take it
    (``cook.writer.direct``); where they refuse it, the file is opened for buffered writes.
    """
    tmp = f"{path}.tmp-{os.getpid()}"
    fd = _open_for_write(tmp, direct)
    closed = False
    try:
        yield fd
        os.fsync(fd)
        closed = True
        os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        if not closed:
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _open_for_write(path: str, direct: bool) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    if direct and O_DIRECT:
        try:
            return os.open(path, flags | O_DIRECT, 0o666)  # umask applies, as for open()
        except OSError as err:
            if err.errno != errno.EINVAL:  # EINVAL: this filesystem takes no O_DIRECT
                raise
    return os.open(path, flags, 0o666)


@contextlib.contextmanager
def atomic_open(path: str) -> Iterator[BinaryIO]:
    """Write ``path`` atomically; on an exception the temp file is removed and ``path`` untouched."""
    with atomic_fd(path) as fd, open(fd, "wb", closefd=False) as handle:
        yield handle


def atomic_write(path: str, data: bytes | str) -> None:
    with atomic_open(path) as handle:
        handle.write(data.encode("utf-8") if isinstance(data, str) else data)
