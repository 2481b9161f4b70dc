"""JSONL file (or a byte range of it) -> RawRecord per line, streamed.

Source id ``<name>#<line>`` (``name``: the file's source name, see ``files.source_name``; lines count
from 1 in the whole file; ``first_index`` is the number of the first line of the span).
Whitespace-only lines are not records and are skipped. A span always starts at a line start and
ends just after a newline (see ``cook.runner.plan``).

A file whose first non-blank byte is ``[`` is most likely a pretty-printed JSON array under a
``.jsonl`` name: every failure read from it carries ``ARRAY_HINT`` in its detail.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import BinaryIO, Final

from cook.sources.cursor import Cursor
from cook.sources.decode import decode_record
from cook.sources.files import first_byte
from cook.types import RawRecord

ARRAY_HINT: Final = "; the file looks like a JSON array: name the file .json to read it as one"


def read_jsonl(
    path: str,
    max_record_bytes: int,
    span: tuple[int, int] | None = None,
    first_index: int = 1,
    name: str | None = None,
    cursor: Cursor | None = None,
) -> Iterator[RawRecord]:
    name = path if name is None else name
    cursor = Cursor() if cursor is None else cursor
    hint = ARRAY_HINT if first_byte(path) == b"[" else ""
    with open(path, "rb") as handle:
        cursor.total = os.fstat(handle.fileno()).st_size if span is None else span[1] - span[0]
        lines = handle if span is None else _span_lines(handle, *span)
        for line_number, line in enumerate(lines, start=first_index):
            cursor.done += len(line)
            if not line.strip():
                continue
            yield decode_record(line, f"{name}#{line_number}", path, max_record_bytes, hint=hint)


def _span_lines(handle: BinaryIO, start: int, stop: int) -> Iterator[bytes]:
    handle.seek(start)
    position = start
    while position < stop:
        line = handle.readline()
        if not line:
            return
        position += len(line)
        yield line
