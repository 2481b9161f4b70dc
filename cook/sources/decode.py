"""Bytes of one raw record -> ``RawRecord``, with every failure mapped to a reason code.

The standard ``json`` module parses, with an ``object_pairs_hook`` that rejects duplicate keys (which
value would win is ambiguous); ``parse_json`` is that one rule, which the Parquet source applies to
its JSON-text cells too. A record that does not decode is a failed ``RawRecord`` in its place
(``RawRecord.failed``): its ``read()`` raises the reject.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cook.errors import RejectReason
from cook.types import RawRecord


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        raise ValueError(f"duplicate key {dup!r}")
    return out


def parse_json(text: str) -> Any:
    """The JSON value ``text`` holds. Raises ``ValueError`` with the reason: invalid JSON, a duplicate
    key at any depth, nesting too deep for the parser."""
    try:
        return json.loads(text, object_pairs_hook=_reject_duplicates)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def decode_record(
    data: bytes,
    source: str,
    origin: str,
    max_bytes: int,
    members: Mapping[str, bytes] | None = None,
    hint: str = "",
) -> RawRecord:
    """The record whose JSON object ``data`` holds. Size is checked before anything is parsed.

    Failures (``hint`` ends each detail): ``too_large``, ``bad_utf8``, ``bad_json`` (invalid JSON,
    nesting too deep, a duplicate key), ``bad_type`` (valid JSON that is not an object).
    """
    if len(data) > max_bytes:
        return RawRecord.failed(
            source, origin, RejectReason.TOO_LARGE, f"{len(data)} bytes > input.max_record_bytes{hint}"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        return RawRecord.failed(source, origin, RejectReason.BAD_UTF8, f"invalid UTF-8 at byte {err.start}{hint}")
    try:
        value = parse_json(text)
    except ValueError as err:
        return RawRecord.failed(source, origin, RejectReason.BAD_JSON, f"{str(err)[:200]}{hint}")
    if not isinstance(value, dict):
        detail = f"record is a JSON {type(value).__name__}, not an object{hint}"
        return RawRecord.failed(source, origin, RejectReason.BAD_TYPE, detail)
    return RawRecord(source, value, origin, members or {})
