"""Issue 14: the orjson fast path accepts and rejects exactly what the reference parser (``json``
with a duplicate-key hook) does, with the same reason codes: duplicate keys, depth, bad UTF-8."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cook.errors import RejectReason
from cook.sources.decode import _reject_duplicates, decode_json_object
from cook.types import RejectRecord

KEYS = st.sampled_from(["a", "b", 'q"uote', "back\\slash", "colon:", '": "x', "ключ", "😀", ""])


def reference(data: bytes) -> tuple[str, Any]:
    """What the pre-orjson decoder did: ('ok', value) or (reason, None)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return RejectReason.BAD_UTF8, None
    try:
        value = json.loads(text, object_pairs_hook=_reject_duplicates)
    except RecursionError:
        return RejectReason.BAD_JSON, None
    except ValueError:
        return RejectReason.BAD_JSON, None
    return ("ok", value) if isinstance(value, dict) else (RejectReason.BAD_TYPE, None)


def outcome(data: bytes) -> tuple[str, Any]:
    got = decode_json_object(data, "s#1", 10**9)
    return (got.reason, None) if isinstance(got, RejectRecord) else ("ok", got)


def _pairs_json(pairs: list[tuple[str, Any]]) -> str:
    """An object text that may repeat keys (json.dumps of a dict cannot)."""
    return "{" + ", ".join(f"{json.dumps(k)} : {v}" for k, v in pairs) + "}"


LEAF = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.text(max_size=8).map(json.dumps),
    st.sampled_from(["null", "1.5", "1e400", "-0.0", "1E-400", "true", "0.1e1", "12345678901234567890"]),
)
VALUE = st.recursive(
    LEAF,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda xs: "[" + ",".join(xs) + "]"),
        st.lists(st.tuples(KEYS, inner), max_size=4).map(_pairs_json),
    ),
    max_leaves=12,
)


@settings(max_examples=500, deadline=None)
@given(pairs=st.lists(st.tuples(KEYS, VALUE), max_size=5), spaces=st.sampled_from(["", " ", "\n\t "]))
def test_fast_path_agrees_with_reference(pairs: list[tuple[str, Any]], spaces: str) -> None:
    data = _pairs_json(pairs).replace(" : ", spaces + ":" + spaces).encode()
    assert outcome(data) == reference(data)


def test_duplicates_are_found_anywhere() -> None:
    cases = [
        b'{"a": 1, "a": 2}',
        b'{"m": [{"role": "user", "role": "assistant"}]}',
        b'{"x": {"y": {"z": 1, "z" :1}}}',
        b'{"a": "\\u003a", "a": "\\u003A"}',  # escaped colons would balance the dropped key's colon
    ]
    for data in cases:
        got = decode_json_object(data, "s#1", 10**9)
        assert isinstance(got, RejectRecord) and got.reason == RejectReason.BAD_JSON and "duplicate key" in got.detail


def test_key_lookalikes_inside_strings_are_not_keys() -> None:
    data = json.dumps({"a": '": 1, "a": 2', "b": ["\\", '"', "c:"], 'k"': {"v": 'x\\": '}}).encode()
    assert outcome(data) == ("ok", json.loads(data))


def test_inputs_only_json_accepts_still_decode_as_before() -> None:
    for data in (b'{"x": NaN}', b'{"x": 123456789012345678901234567890}', b'{"x": "\\ud800"}', b'{"x": Infinity}'):
        assert outcome(data) == reference(data) and outcome(data)[0] == "ok"


def test_reason_codes_kept() -> None:
    deep = b'{"a": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    got = decode_json_object(deep, "s#1", 10**9)
    assert isinstance(got, RejectRecord) and got.reason == RejectReason.BAD_JSON and "deeply" in got.detail
    nested = b'{"a": ' + b"[" * 300 + b"]" * 300 + b"}"  # orjson reads 1024 levels but writes only 254
    assert outcome(nested) == reference(nested) and outcome(nested)[0] == "ok"
    assert outcome(b'{"a": "\xff\xfe"}')[0] == RejectReason.BAD_UTF8
    assert outcome(b"[1, 2]")[0] == RejectReason.BAD_TYPE
    assert outcome(b"null")[0] == RejectReason.BAD_TYPE
    assert outcome(b'{"a": 1')[0] == RejectReason.BAD_JSON
    assert outcome(b"\xef\xbb\xbf{}") == reference(b"\xef\xbb\xbf{}")
