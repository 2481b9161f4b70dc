"""Bytes of one raw record -> JSON object, with every failure mapped to a reason code.

The standard ``json`` module parses, with an ``object_pairs_hook`` that rejects duplicate keys (which
value would win is ambiguous).
"""

from __future__ import annotations

import json
from typing import Any

from cook.errors import RejectReason
from cook.types import RejectRecord


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise ValueError(f"duplicate key {dup!r}")
    return out


def decode_json_object(data: bytes, source: str, max_bytes: int) -> dict[str, Any] | RejectRecord:
    """Decode one record. Size is checked before anything is parsed.

    Rejects: ``too_large``, ``bad_utf8``, ``bad_json`` (invalid JSON, nesting too deep, a duplicate
    key), ``bad_type`` (valid JSON that is not an object).
    """
    if len(data) > max_bytes:
        return RejectRecord(source, RejectReason.TOO_LARGE, f"{len(data)} bytes > input.max_record_bytes")
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
