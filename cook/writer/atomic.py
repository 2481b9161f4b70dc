"""Atomic file writes: a temp name in the same directory, fsync, then rename.

A crash never leaves a half-written file under its final name.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from typing import BinaryIO


@contextlib.contextmanager
def atomic_open(path: str) -> Iterator[BinaryIO]:
    """Write ``path`` atomically; on an exception the temp file is removed and ``path`` untouched."""
    tmp = f"{path}.tmp-{os.getpid()}"
    handle = open(tmp, "wb")  # noqa: SIM115 - closed below on every path
    try:
        yield handle
        handle.flush()
        os.fsync(handle.fileno())
        handle.close()
        os.replace(tmp, path)
    except BaseException:
        handle.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write(path: str, data: bytes | str) -> None:
    with atomic_open(path) as handle:
        handle.write(data.encode("utf-8") if isinstance(data, str) else data)


def atomic_copy(source: str, path: str) -> None:
    with atomic_open(path) as handle, open(source, "rb") as src:
        shutil.copyfileobj(src, handle)
