"""Members of a pack: required, optional pairs, unknown, pickles (never loaded), dtypes, shapes, meta.json."""

from __future__ import annotations

import io
import json
import pickle

import numpy as np
import pytest

from cook import format as fmt
from cook.packfiles import RawPack
from cook.validate.members import parse_pack
from tests.unit.validate.packs_data import build, members, multimodal_members, sequence


def _codes(named: dict[str, bytes]) -> tuple[bool, set[str]]:
    pack, findings = parse_pack(RawPack("pack-000000000", 0, named))
    return pack is not None, {code.value for code, _ in findings}


def _text() -> dict[str, bytes]:
    return members(build([sequence([20, 21], 4), sequence([22], 9)]))


def test_clean_members_parse() -> None:
    assert _codes(_text()) == (True, set())
    assert _codes(multimodal_members()) == (True, set())


def test_missing_and_unknown_members() -> None:
    named = _text()
    del named[fmt.LOSS_MASK]
    assert _codes(named) == (False, {"member_missing"})
    named = multimodal_members()
    del named[fmt.MEDIA_SIZES]
    assert _codes(named) == (False, {"member_missing"})
    named = _text()
    named["extra.txt"] = b"hello"
    assert _codes(named) == (True, {"member_unknown"})


def test_pickles_are_reported_never_loaded() -> None:
    named = _text()
    named["state.pkl"] = pickle.dumps({"a": 1})
    named["more.pyd"] = b"\x80\x04not even a pickle"
    assert _codes(named) == (True, {"pickle_member"})
    named = _text()
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    named[fmt.INPUT_IDS] = buffer.getvalue()
    assert _codes(named) == (False, {"pickle_member"})


def test_dtype_and_shape() -> None:
    named = _text()
    mask = np.load(io.BytesIO(named[fmt.LOSS_MASK]))
    named[fmt.LOSS_MASK] = fmt.npy_bytes(mask.astype(np.int64))
    assert _codes(named) == (True, {"dtype"})  # values survive the cast: checked further as uint8
    named = _text()
    named[fmt.INPUT_IDS] = fmt.npy_bytes(np.array([1.5, 2.0], np.float32))
    assert _codes(named) == (False, {"dtype"})
    named = _text()
    ids = np.load(io.BytesIO(named[fmt.INPUT_IDS]))
    named[fmt.INPUT_IDS] = fmt.npy_bytes(ids[None, :])
    assert _codes(named) == (False, {"shape"})
    named = _text()
    named[fmt.LOSS_MASK] = fmt.npy_bytes(np.zeros(3, np.uint8))
    assert _codes(named) == (False, {"shape"})
    named = multimodal_members()
    named[fmt.PIXEL_PATCHES] = fmt.npy_bytes(np.zeros((4, 769), np.uint8))
    assert _codes(named) == (False, {"shape"})
    named = _text()
    named[fmt.CU_SEQLENS] = b"\x93NUMPY garbage"
    assert _codes(named) == (False, {"npy_invalid"})


@pytest.mark.parametrize(
    "meta",
    [
        b"{not json",
        b"[]",
        json.dumps({"schema_version": 2, "sequences": []}).encode(),
        json.dumps({"schema_version": 1, "sequences": []}).encode(),
        json.dumps({"schema_version": 1, "sequences": [{"source": "a", "length": 1}]}).encode(),
        json.dumps(
            {"schema_version": 1, "sequences": [{"source": "a", "length": True, "targets": 1, "media": []}]}
        ).encode(),
        json.dumps(
            {"schema_version": 1, "sequences": [{"source": "a", "length": 1, "targets": 1, "media": ["gif"]}]}
        ).encode(),
        json.dumps({"schema_version": 1, "extra": 1, "sequences": []}).encode(),
    ],
)
def test_meta_json_must_be_schema_v1(meta: bytes) -> None:
    named = _text()
    named[fmt.META] = meta
    assert _codes(named) == (False, {"meta_invalid"})


def test_npy_fast_path_agrees_with_np_load() -> None:
    from cook.packfiles import read_npy

    for array in (np.arange(7, dtype=np.int32), np.zeros((0, 3), np.int32), np.ones((2, 3, 128), np.float16)):
        data = fmt.npy_bytes(array)
        view = read_npy(memoryview(data))
        assert view.dtype == array.dtype and np.array_equal(view, array) and not view.flags.writeable  # zero-copy
    fortran = io.BytesIO()
    np.save(fortran, np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3)))
    assert read_npy(fortran.getvalue()).tolist() == [[0, 1, 2], [3, 4, 5]]  # not canonical: through np.load
    with pytest.raises(ValueError, match="bytes after the array data"):
        read_npy(fmt.npy_bytes(np.arange(3, dtype=np.int32)) + b"\0\0\0\0")
    with pytest.raises(ValueError):
        read_npy(fmt.npy_bytes(np.arange(3, dtype=np.int32))[:-4])
