"""The reader's fast ``.npy`` parse gives exactly what ``format.load_npy`` gives, and anything it does
not recognize goes to ``load_npy`` (so object arrays still raise)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cook import format as fmt
from cook.reader.pack import _load_npy

DTYPES = ["<i4", "<i8", "|u1", "<f2", "<f4", "|b1"]


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(DTYPES), st.lists(st.integers(0, 5), min_size=0, max_size=3), st.booleans())
def test_fast_parse_equals_load_npy(dtype: str, shape: list[int], via_np_save: bool) -> None:
    array = (np.arange(int(np.prod(shape)), dtype=np.int64) % 7).astype(dtype).reshape(shape)
    if via_np_save:
        buffer = io.BytesIO()
        np.save(buffer, array)
        data = buffer.getvalue()
    else:
        data = fmt.npy_bytes(array)
    parsed, reference = _load_npy(data), fmt.load_npy(data)
    assert parsed.dtype == reference.dtype and parsed.shape == reference.shape
    assert np.array_equal(parsed, reference) and parsed.flags.writeable


def test_unrecognized_headers_fall_back() -> None:
    big_endian = fmt.load_npy(_save(np.arange(3, dtype=">i4")))
    assert _load_npy(_save(np.arange(3, dtype=">i4"))).tolist() == big_endian.tolist() == [0, 1, 2]
    assert _load_npy(_save(np.asfortranarray(np.ones((2, 3), dtype="<i4")))).shape == (2, 3)
    with pytest.raises(ValueError):
        _load_npy(_save(np.array([{"a": 1}], dtype=object)))
    with pytest.raises(ValueError):
        _load_npy(_save(np.arange(4, dtype="<i4"))[:-2])  # truncated data: load_npy refuses it


def _save(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()
