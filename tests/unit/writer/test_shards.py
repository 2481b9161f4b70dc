"""The shard writer: byte-identical to ``tarfile`` + ``np.save``, streamed to the file, no member copied.

The oracle below builds each shard independently of the writer (``tarfile`` with the same TarInfo
settings, ``np.save`` of each array in its member dtype, C order), so a writer bug cannot make a
test agree with itself.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import struct
import tarfile
import tracemalloc
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from cook import format as fmt
from cook.manifest import ShardInfo
from cook.packing.packer import build_pack
from cook.types import Pack, TokenizedSample
from cook.writer.members import member_pieces, meta_json, pack_members
from cook.writer.shards import ShardLayout, write_shard
from tests.unit.validate.packs_data import multimodal


# ---------------------------------------------------------------- packs and the oracle
def _pack(lengths: list[int]) -> Pack:
    samples = [TokenizedSample(f"s#{n}", np.arange(n, dtype=np.int32), np.ones(n, np.uint8)) for n in lengths]
    return build_pack(samples, 0, 8)


def _visual(lengths: list[int], n_patches: int, seed: int = 0) -> Pack:
    rng = np.random.default_rng(seed)
    patches = rng.integers(0, 256, (n_patches, fmt.PATCH_VALUES), dtype=np.uint8)  # uint8 [P, 768]
    return replace(_pack(lengths), pixel_patches=patches, media_sizes=np.array([[1, 16, 16 * n_patches]], np.int32))


def _audio(lengths: list[int], frames: int, seed: int = 0) -> Pack:
    rng = np.random.default_rng(seed)
    features = rng.standard_normal((2, frames, fmt.MEL_BINS)).astype(np.float16)  # float16 [C, F, 128]
    return replace(_pack(lengths), audio_features=features, audio_lengths=np.array([frames, frames - 1], np.int32))


def _non_contiguous() -> Pack:
    """Every array strided or Fortran-ordered, already in its member dtype: the writer makes one copy each."""
    pack = _pack([9, 30])
    ids = np.repeat(pack.input_ids, 2)[::2]  # int32 [T], stride 8
    patches = np.asfortranarray(np.arange(5 * 768, dtype=np.uint8).reshape(5, 768))  # uint8 [5, 768], F order
    features = np.arange(2 * 14 * 128, dtype=np.float16).reshape(2, 14, 128)[:, ::2]  # float16 [2, 7, 128]
    return replace(
        pack,
        input_ids=ids,
        loss_mask=np.repeat(pack.loss_mask, 3)[::3],
        pixel_patches=patches,
        media_sizes=np.array([[1, 16, 80]] * 2, np.int32)[::2],
        audio_features=features,
        audio_lengths=np.array([7, 3], np.int32),
    )


def _needs_conversion() -> Pack:
    """Arrays in the wrong dtype (int64, bool, big-endian, float32, int16): converted once, to the member's."""
    pack = _pack([12, 5])
    return replace(
        pack,
        input_ids=pack.input_ids.astype(np.int64),
        loss_mask=pack.loss_mask.astype(bool),
        cu_seqlens=pack.cu_seqlens.astype(">i4"),
        pixel_patches=np.arange(3 * 768, dtype=np.int16).reshape(3, 768) % 256,
        media_sizes=np.array([[1, 16, 48]], np.int64),
        audio_features=np.linspace(-2, 2, 1 * 9 * 128, dtype=np.float32).reshape(1, 9, 128),
        audio_lengths=np.array([9], np.int64),
    )


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _oracle_members(pack: Pack) -> list[tuple[str, bytes]]:
    """Each member's bytes from ``np.save`` (member dtype, C order); member ``x.npy`` is ``Pack.x``."""
    out = []
    for name in fmt.MEMBERS:
        array = None if name == fmt.META else getattr(pack, name.removesuffix(".npy"))
        if name == fmt.META:
            out.append((name, meta_json(pack)))
        elif array is not None:
            out.append((name, _npy(np.ascontiguousarray(array.astype(fmt.MEMBER_DTYPES[name][0])))))
    return out


def _oracle(first_pack: int, packs: list[Pack]) -> tuple[bytes, bytes]:
    """(the shard's bytes, its ``.tar.idx``) as Python's ``tarfile`` writes them."""
    buffer, offsets = io.BytesIO(), []
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for i, pack in enumerate(packs):
            offsets.append(tar.offset)
            for member, blob in _oracle_members(pack):
                info = tarfile.TarInfo(f"{fmt.pack_key(first_pack + i)}.{member}")
                info.size, info.mtime, info.mode, info.uid, info.gid = len(blob), 0, 0o644, 0, 0
                info.uname = info.gname = ""
                tar.addfile(info, io.BytesIO(blob))
        offsets.append(tar.offset)
    data = buffer.getvalue()
    assert len(data) % tarfile.RECORDSIZE == 0
    return data, struct.pack(f"<{len(offsets)}Q", *offsets)


def _write(out: Path, first_pack: int, packs: list[Pack]) -> tuple[bytes, bytes, ShardInfo, ShardLayout]:
    info, layout = write_shard(str(out), 3, first_pack, packs)
    path = out / fmt.shard_name(3)
    assert sorted(p.name for p in out.iterdir()) == [path.name, path.name + fmt.INDEX_SUFFIX]  # no temp left
    return path.read_bytes(), Path(str(path) + fmt.INDEX_SUFFIX).read_bytes(), info, layout


# ---------------------------------------------------------------- byte identity
SHARDS: dict[str, Callable[[], list[Pack]]] = {
    "text": lambda: [_pack([5, 17]), _pack([300]), _pack([1, 2, 3])],
    "visual": lambda: [_visual([40], 3), _visual([7, 7], 1, seed=1)],
    "audio": lambda: [_audio([20], 11)],
    "multimodal": lambda: [multimodal(), _pack([4]), multimodal()],
    "mixed": lambda: [_pack([8]), _visual([16], 2), _audio([3], 5), multimodal()],
    "non_contiguous": lambda: [_non_contiguous(), _pack([2])],
    "needs_conversion": lambda: [_needs_conversion()],
    "empty_patches": lambda: [_visual([6], 0)],
}


@pytest.mark.parametrize("kind", sorted(SHARDS))
def test_shard_is_byte_identical_to_tarfile_and_np_save(tmp_path: Path, kind: str) -> None:
    packs = SHARDS[kind]()
    data, idx, info, layout = _write(tmp_path, 7, packs)
    expected, expected_idx = _oracle(7, packs)
    assert data == expected
    assert idx == expected_idx
    assert info == ShardInfo(fmt.shard_name(3), len(packs), 7, len(data), hashlib.sha256(data).hexdigest())
    assert layout.offsets == struct.unpack(f"<{len(idx) // 8}Q", idx)


def test_member_pieces_join_to_np_save_bytes() -> None:
    for pack in [multimodal(), _non_contiguous(), _needs_conversion()]:
        joined = [(name, b"".join(pieces)) for name, pieces in member_pieces(pack)]
        assert joined == _oracle_members(pack) == pack_members(pack)


def test_a_failed_write_leaves_no_shard_and_no_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space"):
        write_shard(str(tmp_path), 0, 0, [_pack([4])])
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- no copy
def test_writing_allocates_nothing_the_size_of_a_member(tmp_path: Path) -> None:
    pack = _visual([64], 8000)  # uint8 [8000, 768]: 6 MB of patches
    write_shard(str(tmp_path), 0, 0, [pack])  # warm up imports and caches
    tracemalloc.start()
    try:
        write_shard(str(tmp_path), 1, 1, [pack])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert pack.pixel_patches is not None and peak < pack.pixel_patches.nbytes // 20, peak


# ---------------------------------------------------------------- layout
@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(1, 700), min_size=1, max_size=4), min_size=1, max_size=5), st.integers(0, 10**6))
def test_layout_is_where_tarfile_finds_every_member(
    tmp_path_factory: pytest.TempPathFactory, pack_lengths: list[list[int]], first: int
) -> None:
    """What Energon's index is built from: each member's data offset and size, each sample's span."""
    data, _, _, layout = _write(tmp_path_factory.mktemp("layout"), first, [_pack(lengths) for lengths in pack_lengths])
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = tar.getmembers()
        end = tar.offset
    keys = [fmt.pack_key(first + i) for i in range(len(pack_lengths))]
    assert layout.keys == tuple(keys)
    parts = tuple(
        (keys.index(m.name.split(".", 1)[0]), m.name.split(".", 1)[1], m.offset_data, m.size) for m in members
    )
    assert layout.parts == parts
    starts = [m.offset for m in members if m.name.endswith("." + fmt.INPUT_IDS)]
    assert layout.offsets == (*starts, end)


# ---------------------------------------------------------------- npy_header
@pytest.mark.parametrize(
    "array",
    [
        np.arange(7, dtype="<i4"),
        np.zeros((0, 768), np.uint8),
        np.ones((3, 5, 128), "<f2"),
        np.array(3.5),
        np.arange(12, dtype=">i8").reshape(3, 4),
        np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4)),
        np.arange(40, dtype=np.int16).reshape(5, 8)[:, ::3],
        np.zeros((2, 3), [("a", "<i4"), ("b", "u1", (2,))]),
        np.zeros((2, 0, 3, 1, 1, 2), "<u2"),
        np.array(["ab", "c"]),
    ],
    ids=lambda a: f"{a.dtype}{list(a.shape)}",
)
def test_npy_header_plus_data_is_np_save(array: np.ndarray) -> None:
    assert fmt.npy_header(array) + array.tobytes(order="A") == _npy(array)
    assert fmt.npy_bytes(array) == _npy(np.ascontiguousarray(array))


def test_npy_header_switches_to_format_2_as_np_save_does() -> None:
    array = np.zeros(2, [(f"field_{i:05d}", "<i4") for i in range(4000)])  # header over 65535 bytes
    with pytest.warns(UserWarning, match="format 2.0"):
        expected = _npy(array)
    header = fmt.npy_header(array)
    assert header[6:8] == b"\x02\x00" and header + array.tobytes() == expected


def test_npy_header_refuses_object_arrays() -> None:
    with pytest.raises(ValueError, match="object"):
        fmt.npy_header(np.array([{"a": 1}], dtype=object))


DTYPES = ["<i4", ">i4", "u1", "<f2", ">f8", "?", "<c8", "S3", "<U2", "<M8[s]", "i8"]


@settings(max_examples=150, deadline=None)
@given(
    hnp.arrays(st.sampled_from(DTYPES).map(np.dtype), hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5)),
    st.sampled_from(["C", "F", "strided"]),
)
def test_npy_header_matches_np_save_for_any_array(array: np.ndarray, layout: str) -> None:
    if layout == "F":
        array = np.asfortranarray(array)
    elif layout == "strided" and array.ndim:
        array = array[::2]
    assert fmt.npy_header(array) + array.tobytes(order="A") == _npy(array)
    assert fmt.npy_bytes(array) == _npy(np.ascontiguousarray(array))


@settings(max_examples=300, deadline=None)
@given(
    sources=st.lists(
        st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=20), min_size=1, max_size=5
    ),
    truncated=st.lists(st.booleans(), min_size=5, max_size=5),
    frames=st.booleans(),
)
def test_meta_json_is_the_compact_sorted_json_dumps_of_its_body(
    sources: list[str], truncated: list[bool], frames: bool
) -> None:
    """Any source text (quotes, backslashes, control characters, non-ASCII): the same bytes as the
    standard library's compact, key-sorted, UTF-8 form."""
    samples = [
        TokenizedSample(source, np.arange(3 + k, dtype=np.int32), np.ones(3 + k, np.uint8), truncated=cut)
        for k, (source, cut) in enumerate(zip(sources, truncated, strict=False))
    ]
    pack = build_pack(samples, 0, 8)
    version = fmt.FRAME_SCHEMA_VERSION if frames else fmt.SCHEMA_VERSION
    body = {"schema_version": version, "sequences": [s.to_meta() for s in pack.sequences]}
    expected = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    assert meta_json(pack, frames) == expected
