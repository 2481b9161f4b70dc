"""The O_DIRECT shard writer (``ray.direct_io``): exact bytes and digest across chunk boundaries, and the
buffered fallbacks."""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cook import format as fmt
from cook.manifest import ShardInfo
from cook.types import Pack
from cook.writer import direct, shards
from cook.writer.atomic import atomic_fd
from cook.writer.direct import ALIGN, is_direct, write_direct
from cook.writer.shards import ShardLayout, write_shard
from tests.unit.writer.test_shards import _oracle, _pack, _visual

CHUNK = 3 * ALIGN  # small buffers, so that pieces cross them in every way


def _write_direct(out: Path, first_pack: int, packs: list[Pack]) -> tuple[bytes, bytes, ShardInfo, ShardLayout]:
    info, layout = write_shard(str(out), 3, first_pack, packs, direct=True)
    path = out / fmt.shard_name(3)
    assert sorted(p.name for p in out.iterdir()) == [path.name, path.name + fmt.INDEX_SUFFIX]  # no temp left
    return path.read_bytes(), Path(str(path) + fmt.INDEX_SUFFIX).read_bytes(), info, layout


def _takes_direct(root: Path) -> bool:
    with atomic_fd(str(root / "probe"), direct=True) as fd:
        taken = is_direct(fd)
    os.unlink(root / "probe")
    return taken


def _pieces(sizes: list[int], seed: int) -> list[memoryview]:
    rng = np.random.default_rng(seed)
    out = []
    for i, size in enumerate(sizes):
        array = rng.integers(0, 2**31, size=max(1, size // 4), dtype=np.int32)
        out.append(memoryview(array.reshape(-1, 1) if i % 2 else array))  # 2-D views are cast to bytes
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 4 * CHUNK), min_size=1, max_size=12), st.integers(0, 2**31))
def test_direct_write_is_the_joined_pieces_and_their_digest(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], seed: int
) -> None:
    root = tmp_path_factory.mktemp("direct")
    pieces = _pieces(sizes, seed)
    expected = b"".join(piece.tobytes() for piece in pieces)
    old = direct.CHUNK
    direct.CHUNK = CHUNK
    try:
        with atomic_fd(str(root / "out"), direct=True) as fd:
            size, digest = write_direct(fd, pieces)
    finally:
        direct.CHUNK = old
    assert (root / "out").read_bytes() == expected
    assert (size, digest) == (len(expected), hashlib.sha256(expected).hexdigest())


def test_shards_use_o_direct_where_the_filesystem_takes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not direct.O_DIRECT or not _takes_direct(tmp_path):
        pytest.skip("no O_DIRECT on this platform or filesystem")
    seen: list[bool] = []
    real = direct.write_direct

    def spy(fd: int, pieces: list[memoryview]) -> tuple[int, str]:
        seen.append(is_direct(fd))
        return real(fd, pieces)

    monkeypatch.setattr(shards, "write_direct", spy)
    packs = [_visual([30], 2), _pack([400, 7])]
    data, idx, info, _ = _write_direct(tmp_path, 3, packs)
    assert seen == [True]
    assert (data, idx) == _oracle(3, packs) and info.sha256 == hashlib.sha256(data).hexdigest()


def test_a_filesystem_refusing_o_direct_at_open_gets_buffered_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_open = os.open

    def refusing(path: str, flags: int, mode: int = 0o777) -> int:
        if flags & direct.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", refusing)
    packs = [_visual([64], 40), _pack([9])]
    data, idx, info, _ = _write_direct(tmp_path, 0, packs)
    assert (data, idx) == _oracle(0, packs) and info.sha256 == hashlib.sha256(data).hexdigest()


def test_a_refused_direct_write_is_repeated_buffered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not direct.O_DIRECT or not _takes_direct(tmp_path):
        pytest.skip("no O_DIRECT on this platform or filesystem")
    real = os.pwrite
    refused: list[int] = []

    def pwrite(fd: int, data: memoryview, offset: int) -> int:
        if is_direct(fd):
            refused.append(offset)
            raise OSError(errno.EINVAL, "Invalid argument")
        return real(fd, data, offset)

    monkeypatch.setattr(direct, "CHUNK", CHUNK)
    monkeypatch.setattr(os, "pwrite", pwrite)
    packs = [_visual([64], 40), _pack([900, 3])]  # many chunks
    data, idx, _, _ = _write_direct(tmp_path, 7, packs)
    assert refused == [0]  # the first refusal clears O_DIRECT for the rest of the file
    assert (data, idx) == _oracle(7, packs)


def test_an_error_in_the_helper_thread_fails_the_shard_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.pwrite

    def pwrite(fd: int, data: memoryview, offset: int) -> int:
        if offset >= 2 * CHUNK:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data, offset)

    monkeypatch.setattr(direct, "CHUNK", CHUNK)
    monkeypatch.setattr(os, "pwrite", pwrite)
    with pytest.raises(OSError, match="No space"):
        write_shard(str(tmp_path), 0, 0, [_visual([64], 40)], direct=True)
    assert list(tmp_path.iterdir()) == []
