"""JSONL file -> RawRecord per line, streamed. Source id ``<file>#<line>`` (lines count from 1).

Whitespace-only lines are not records and are skipped.
"""

from __future__ import annotations

from collections.abc import Iterator

from cook.sources.decode import decode_json_object
from cook.types import RawRecord, RejectRecord


def read_jsonl(path: str, max_record_bytes: int) -> Iterator[RawRecord | RejectRecord]:
    with open(path, "rb") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            source = f"{path}#{line_number}"
            fields = decode_json_object(line, source, max_record_bytes)
            if isinstance(fields, RejectRecord):
                yield fields
            else:
                yield RawRecord(source=source, fields=fields, origin=path)
