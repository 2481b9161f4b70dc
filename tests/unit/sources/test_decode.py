"""One raw record's bytes -> a RawRecord of its JSON object, or a failed one with its reason code and
detail: duplicate keys anywhere, depth, bad UTF-8, a value that is not an object."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cook.errors import Rejected, RejectReason
from cook.sources.decode import decode_record

KEYS = st.sampled_from(["a", "b", 'q"uote', "back\\slash", "colon:", '": "x', "ключ", "😀", ""])
VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)),
    max_leaves=12,
)


def outcome(data: bytes) -> tuple[str, Any]:
    got = decode_record(data, "s#1", "a.jsonl", 10**9)
    return ("ok", got.fields) if got.failure is None else (got.failure.reason, got.failure.detail)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(KEYS, VALUES, max_size=5), st.sampled_from([None, 2]))
def test_an_object_without_duplicates_decodes_to_its_value(value: dict[str, Any], indent: int | None) -> None:
    assert outcome(json.dumps(value, indent=indent, ensure_ascii=False).encode()) == ("ok", value)


def test_duplicates_are_found_anywhere() -> None:
    cases = [
        (b'{"a": 1, "a": 2}', "'a'"),
        (b'{"m": [{"role": "user", "role": "assistant"}]}', "'role'"),
        (b'{"x": {"y": {"z": 1, "z" :1}}}', "'z'"),
        (b'{"a": "\\u003a", "a": "\\u003A"}', "'a'"),
    ]
    for data, key in cases:
        assert outcome(data) == (RejectReason.BAD_JSON, f"duplicate key {key}")


def test_key_lookalikes_inside_strings_are_not_keys() -> None:
    data = json.dumps({"a": '": 1, "a": 2', "b": ["\\", '"', "c:"], 'k"': {"v": 'x\\": '}}).encode()
    assert outcome(data) == ("ok", json.loads(data))


def test_what_json_accepts_decodes() -> None:
    for data, value in (
        (b'{"x": 123456789012345678901234567890}', 123456789012345678901234567890),
        (b'{"x": "\\ud800"}', "\ud800"),
        (b'{"x": 1e400}', float("inf")),
    ):
        assert outcome(data) == ("ok", {"x": value})
    nan = decode_record(b'{"x": NaN}', "s#1", "a.jsonl", 100).fields
    assert nan["x"] != nan["x"]


def test_reason_codes_and_details() -> None:
    deep = b'{"a": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    assert outcome(deep) == (RejectReason.BAD_JSON, "JSON nested too deeply")
    nested = b'{"a": ' + b"[" * 300 + b"]" * 300 + b"}"
    assert outcome(nested) == ("ok", json.loads(nested))
    assert outcome(b'{"a": "\xff\xfe"}') == (RejectReason.BAD_UTF8, "invalid UTF-8 at byte 7")
    assert outcome(b"[1, 2]") == (RejectReason.BAD_TYPE, "record is a JSON list, not an object")
    assert outcome(b"null") == (RejectReason.BAD_TYPE, "record is a JSON NoneType, not an object")
    assert outcome(b'{"a": 1') == (RejectReason.BAD_JSON, "Expecting ',' delimiter: line 1 column 8 (char 7)")
    assert outcome(b"\xef\xbb\xbf{}") == (
        RejectReason.BAD_JSON,
        "Unexpected UTF-8 BOM (decode using utf-8-sig): line 1 column 1 (char 0)",
    )
    too_large = decode_record(b'{"a": 1}', "s#1", "a.jsonl", 7, hint="; a hint")
    assert (too_large.source, too_large.fields, too_large.origin) == ("s#1", {}, "a.jsonl")
    with pytest.raises(Rejected) as info:
        too_large.read()
    assert (info.value.reason, info.value.detail) == (
        RejectReason.TOO_LARGE,
        "8 bytes > input.max_record_bytes; a hint",
    )


def test_a_decoded_record_carries_its_members_and_reads_as_itself() -> None:
    record = decode_record(b'{"a": 1}', "s#k", "s.tar", 100, {"k.jpg": b"JPEG"})
    assert (record.fields, record.members, record.failure) == ({"a": 1}, {"k.jpg": b"JPEG"}, None)
    assert record.read() is record
