"""Bytes of one raw record -> JSON object, with every failure mapped to a reason code.

``orjson`` parses (the ``json`` module with a duplicate-key hook costs 3x more). orjson keeps the
last of duplicate keys, so duplicates are found by counting colons: in valid JSON a colon outside a
string follows a key, so ``data.count(b":")`` is the keys plus the colons inside strings; orjson's
compact re-serialization of the parsed value has the same count unless a key was dropped (which
removes that key, its colon and any colons in its value). Only ``\u003a`` writes a colon that the
raw text does not show; a record containing it takes the reference path, ``json`` with the
duplicate-key hook, which names the reject. So does anything orjson refuses (invalid JSON, nesting
deeper than its 1024 levels, ``NaN``, lone surrogates) and a run of 19 digits (orjson would turn an
integer beyond 64 bits into a float), so every accept, value and reject is exactly ``json``'s.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from cook.errors import RejectReason
from cook.types import RejectRecord

DIGITS_AS_ZERO = bytes(48 if 48 <= i < 58 else 32 for i in range(256))  # bytes.translate table
LONG_NUMBER = b"0" * 19
ESCAPED_COLONS = (b"\\u003a", b"\\u003A")


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise ValueError(f"duplicate key {dup!r}")
    return out


def _fast_parse(data: bytes) -> Any:
    """The parsed value when orjson reads ``data`` exactly as ``json`` would, else None."""
    if ESCAPED_COLONS[0] in data or ESCAPED_COLONS[1] in data or LONG_NUMBER in data.translate(DIGITS_AS_ZERO):
        return None
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    try:
        compact = orjson.dumps(value)
    except orjson.JSONEncodeError:  # nested deeper than orjson writes (254 levels)
        return None
    return value if compact.count(b":") == data.count(b":") else None  # else: a duplicate key


def decode_json_object(data: bytes, source: str, max_bytes: int) -> dict[str, Any] | RejectRecord:
    """Decode one record. Size is checked before anything is parsed.

    Duplicate keys are rejected (``bad_json``): which value would win is ambiguous.
    """
    if len(data) > max_bytes:
        return RejectRecord(source, RejectReason.TOO_LARGE, f"{len(data)} bytes > input.max_record_bytes")
    value = _fast_parse(data)
    if value is None:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as err:
            return RejectRecord(source, RejectReason.BAD_UTF8, f"invalid UTF-8 at byte {err.start}")
        try:
            value = json.loads(text, object_pairs_hook=_reject_duplicates)
        except RecursionError:
            return RejectRecord(source, RejectReason.BAD_JSON, "JSON nested too deeply")
        except ValueError as err:
            return RejectRecord(source, RejectReason.BAD_JSON, str(err)[:200])
    if not isinstance(value, dict):
        return RejectRecord(source, RejectReason.BAD_TYPE, f"record is a JSON {type(value).__name__}, not an object")
    return value
