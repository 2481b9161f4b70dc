"""JSONL file (or a byte range of it) -> RawRecord per line, streamed.

Source id ``<file>#<line>`` (lines count from 1 in the whole file; ``first_index`` is the number of
the first line of the span). Whitespace-only lines are not records and are skipped. A span always
starts at a line start and ends just after a newline (see ``cook.runner.plan``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from cook.sources.decode import decode_json_object
from cook.types import RawRecord, RejectRecord


def read_jsonl(
    path: str, max_record_bytes: int, span: tuple[int, int] | None = None, first_index: int = 1
) -> Iterator[RawRecord | RejectRecord]:
    with open(path, "rb") as handle:
        lines = handle if span is None else _span_lines(handle, *span)
        for line_number, line in enumerate(lines, start=first_index):
            if not line.strip():
                continue
            source = f"{path}#{line_number}"
            fields = decode_json_object(line, source, max_record_bytes)
            if isinstance(fields, RejectRecord):
                yield fields
            else:
                yield RawRecord(source=source, fields=fields, origin=path)


def _span_lines(handle: BinaryIO, start: int, stop: int) -> Iterator[bytes]:
    handle.seek(start)
    position = start
    while position < stop:
        line = handle.readline()
        if not line:
            return
        position += len(line)
        yield line
