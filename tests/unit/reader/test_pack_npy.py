"""The ``.npy`` parse the reader shares with ``cook validate`` (``packfiles.read_npy``) gives exactly what
``format.load_npy`` gives (as a read-only view of the member bytes), anything it does not recognize goes
to ``load_npy`` (so object arrays still raise), and ``decode_pack``'s tensors own writable memory, never
the member bytes."""

from __future__ import annotations

import io
import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cook import format as fmt
from cook.packfiles import read_npy
from cook.reader.pack import PackFormatError, decode_pack
from tests.unit.reader.reader_data import crude_pack

DTYPES = ["<i4", "<i8", "|u1", "<f2", "<f4", "|b1"]


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(DTYPES), st.lists(st.integers(0, 5), min_size=0, max_size=3), st.booleans())
def test_fast_parse_equalsread_npy(dtype: str, shape: list[int], via_np_save: bool) -> None:
    array = (np.arange(int(np.prod(shape)), dtype=np.int64) % 7).astype(dtype).reshape(shape)
    if via_np_save:
        buffer = io.BytesIO()
        np.save(buffer, array)
        data = buffer.getvalue()
    else:
        data = fmt.npy_bytes(array)
    parsed, reference = read_npy(data), fmt.load_npy(data)
    assert parsed.dtype == reference.dtype and parsed.shape == reference.shape
    assert np.array_equal(parsed, reference)


def test_decoded_tensors_are_writable_copies() -> None:
    media = {fmt.MEDIA_SIZES: np.array([[1, 16, 16]], dtype=np.int32)}
    crude = crude_pack([([5, 6, 7], [0, 1, 1]), ([8, 9], [0, 1])], pad_multiple=4, **media)
    sample = decode_pack(crude)
    tensors = [sample.input_ids, sample.target_mask, sample.cu_seqlens, sample.cu_seqlens_padded, sample.media_sizes]
    for tensor in tensors:
        assert tensor is not None and tensor.numpy().flags.writeable
        tensor.zero_()  # writes to the tensor's own memory, not to the crude sample's bytes
    again = decode_pack(crude)
    assert again.cu_seqlens.tolist() == [0, 3, 5] and again.cu_seqlens_padded.tolist() == [0, 4, 8]
    assert again.input_ids.tolist() == [5, 6, 7, 0, 8, 9, 0, 0] and again.media_sizes.tolist() == [[1, 16, 16]]


def test_unrecognized_headers_fall_back() -> None:
    big_endian = fmt.load_npy(_save(np.arange(3, dtype=">i4")))
    assert read_npy(_save(np.arange(3, dtype=">i4"))).tolist() == big_endian.tolist() == [0, 1, 2]
    assert read_npy(_save(np.asfortranarray(np.ones((2, 3), dtype="<i4")))).shape == (2, 3)
    with pytest.raises(ValueError):
        read_npy(_save(np.array([{"a": 1}], dtype=object)))
    with pytest.raises(ValueError):
        read_npy(_save(np.arange(4, dtype="<i4"))[:-2])  # truncated data: load_npy refuses it


def _save(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def test_a_cached_header_still_checks_length_and_member() -> None:
    """The header cache skips the parse, never a check: a truncated member with a header seen before, or
    a header seen for another member of another dtype, is still refused."""
    crude = crude_pack([([5, 6, 7], [0, 1, 1])], pad_multiple=4, key="pack-000000003")
    assert decode_pack(crude).input_ids.tolist() == [5, 6, 7, 0]  # caches this shape's headers
    truncated = dict(crude, **{fmt.INPUT_IDS: crude[fmt.INPUT_IDS][:-4]})
    with pytest.raises(PackFormatError, match=re.escape("pack-000000003: member 'input_ids.npy' is not a plain")):
        decode_pack(truncated)
    swapped = dict(crude, **{fmt.INPUT_IDS: fmt.npy_bytes(np.array([1, 0, 1, 1], dtype=np.uint8))})
    with pytest.raises(PackFormatError, match=re.escape("member 'input_ids.npy' is uint8")):
        decode_pack(swapped)  # the same header as loss_mask.npy, cached for that member only
    assert decode_pack(crude).input_ids.tolist() == [5, 6, 7, 0]


@pytest.mark.parametrize("version", [0, 3, "1", None])
def test_a_pack_schema_this_reader_does_not_know_is_refused(version: object) -> None:
    crude = crude_pack([([5, 6, 7], [0, 1, 1])], 4)
    meta = json.loads(crude[fmt.META])
    for known in fmt.PACK_SCHEMA_VERSIONS:  # 1, and 2 (a pack with frame members)
        crude[fmt.META] = json.dumps({**meta, "schema_version": known}).encode()
        assert decode_pack(crude).input_ids.tolist() == [5, 6, 7, 0]
    crude[fmt.META] = json.dumps({**meta, "schema_version": version}).encode()
    with pytest.raises(PackFormatError, match=r"schema_version .*: this reader reads packs of schema 1 and 2"):
        decode_pack(crude)
