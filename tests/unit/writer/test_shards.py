"""The shard writer builds tar headers from a template: they must be exactly tarfile's bytes."""

from __future__ import annotations

import io
import struct
import tarfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cook import format as fmt
from cook.packing.packer import build_pack
from cook.types import TokenizedSample
from cook.writer.members import pack_members
from cook.writer.shards import _tar_info, member_header, shard_bytes


@pytest.mark.parametrize(
    ("name", "size"),
    [
        ("pack-000000000.input_ids.npy", 0),
        ("a.b", 1),
        ("pack-123456789.cu_seqlens_padded.npy", 8**11 - 1),
        ("x" * 100, 512),
        ("ü.npy", 1023),
        ("d/" + "y" * 99, 7),
    ],
)
def test_member_header_is_tarfiles(name: str, size: int) -> None:
    assert member_header(name, size) == _tar_info(name, size).tobuf(tarfile.USTAR_FORMAT, "utf-8", "surrogateescape")


def _pack(lengths: list[int]):
    samples = [TokenizedSample(f"s#{n}", np.arange(n, dtype=np.int32), np.ones(n, np.uint8)) for n in lengths]
    return build_pack(samples, 0, 8)


def test_shard_bytes_equal_a_tarfile_archive_and_index() -> None:
    packs = [_pack([5, 17]), _pack([300]), _pack([1, 2, 3])]
    data, layout = shard_bytes(7, packs)
    offsets = list(layout.offsets)
    reference = io.BytesIO()
    expected_offsets = []
    with tarfile.open(fileobj=reference, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for i, pack in enumerate(packs):
            expected_offsets.append(tar.offset)
            for member, blob in pack_members(pack):
                tar.addfile(_tar_info(f"{fmt.pack_key(7 + i)}.{member}", len(blob)), io.BytesIO(blob))
        expected_offsets.append(tar.offset)
    assert data == reference.getvalue()
    assert offsets == expected_offsets
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        names = tar.getnames()
    assert names[0] == "pack-000000007.input_ids.npy" and len(names) == 3 * 5
    assert struct.calcsize("<Q") == 8


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(1, 700), min_size=1, max_size=4), min_size=1, max_size=5), st.integers(0, 10**6))
def test_layout_is_where_tarfile_finds_every_member(pack_lengths: list[list[int]], first: int) -> None:
    """What Energon's index is built from: each member's data offset and size, each sample's span."""
    data, layout = shard_bytes(first, [_pack(lengths) for lengths in pack_lengths])
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
