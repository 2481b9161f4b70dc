"""Members of a pack: required, optional pairs, unknown, pickles (never loaded), dtypes, shapes, meta.json."""

from __future__ import annotations

import io
import json
import pickle
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cook import format as fmt
from cook.packfiles import RawPack
from cook.validate.members import meta_entries, parse_pack
from cook.validate.problems import Code, Finding
from tests.conftest import REPO
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


# meta.json bodies near the schema: valid entries, some with one field changed in a way a writer goes wrong
_CHANGES = [  # (key, value) written over a valid entry: what a writer gets wrong, and two that stay valid
    *[("source", v) for v in ("", 1, None)],
    *[(k, v) for k in ("length", "targets") for v in (0, -1, True, 1.0, 2.5, "3", 2**63, 2**63 - 1)],
    *[("media", v) for v in (["gif"], [1], "image", None, ["tiles", "audio"])],
    *[("truncated", v) for v in (False, 1, None, True)],
    ("extra", 1),
]
_VALID_ENTRY = st.fixed_dictionaries(
    {
        "source": st.text(min_size=1, max_size=8),
        "length": st.integers(1, 2**63 - 1),
        "targets": st.integers(1, 9),
        "media": st.lists(st.sampled_from(["image", "video", "tiles", "audio"]), max_size=3),
    },
    optional={"truncated": st.just(True)},
)
_ENTRY = st.one_of(
    _VALID_ENTRY,
    st.tuples(_VALID_ENTRY, st.sampled_from(_CHANGES)).map(lambda t: {**t[0], t[1][0]: t[1][1]}),
    st.tuples(_VALID_ENTRY, st.sampled_from(["source", "length", "targets", "media"])).map(
        lambda t: {k: v for k, v in t[0].items() if k != t[1]}
    ),
)
_BODY = st.fixed_dictionaries(
    {"schema_version": st.sampled_from([1, 1, 1, 1, 2, True, "1"]), "sequences": st.lists(_ENTRY, max_size=2)},
    optional={"extra": st.just(1)},
)


def _cook_stricter(body: dict[str, Any]) -> bool:
    """Where cook's rule is documented to be stricter than the JSON Schema: a non-empty source, an integral
    count that is a JSON integer below 2**63 (the schema's "integer" takes 3.0), and the schema_version of
    a pack's own kind (no frame members here: 1)."""
    if body["schema_version"] != 1:
        return True
    for entry in body["sequences"]:
        counts = [entry.get("length"), entry.get("targets")]
        if entry.get("source") == "" or any(
            isinstance(v, float) or (isinstance(v, int) and v >= 2**63) for v in counts
        ):
            return True
    return False


def _check_against_schema(body: dict[str, Any]) -> None:
    import jsonschema

    schema = json.loads((REPO / "schemas" / "packed_sample.v1.schema.json").read_text())
    expected = jsonschema.Draft202012Validator(schema).is_valid(body) and not _cook_stricter(body)
    findings: list[Finding] = []
    entries = meta_entries(json.dumps(body).encode(), False, findings)
    assert (entries is not None) == expected == (not findings), (body, findings)
    if entries is not None:
        assert [e.to_meta().to_meta() for e in entries] == body["sequences"]
    else:
        assert [code for code, _ in findings] == [Code.META_INVALID]


@settings(max_examples=300, deadline=None)
@given(_BODY)
def test_meta_json_rule_agrees_with_the_json_schema(body: dict[str, Any]) -> None:
    """The validator's meta.json rule (msgspec, ``members.SequenceEntry``) accepts exactly the bodies that
    schemas/packed_sample.v1.schema.json accepts (jsonschema, independent) where cook is not documented
    stricter, and reads their entries back as written."""
    _check_against_schema(body)


@pytest.mark.parametrize(("key", "value"), _CHANGES)
def test_each_meta_json_change_against_the_json_schema(key: str, value: Any) -> None:
    """Every change of ``_CHANGES`` on its own, in the second of two entries."""
    valid = {"source": "chat.jsonl#3", "length": 7, "targets": 2, "media": ["image"]}
    _check_against_schema({"schema_version": 1, "sequences": [valid, {**valid, key: value}]})
