"""Parquet file (or a range of its row groups) -> RawRecord per row, streamed a batch at a time.

Source id ``<name>#<row>`` (``name``: the file's source name, ``files.source_name``; rows count from
1 in the whole file, like JSONL lines; ``first_index`` is the number of the span's first row).
``span`` is ``(first_row_group, stop_row_group)``. A file pyarrow cannot open is one ``bad_archive``
failure for the whole span (a failed ``RawRecord``, ``RawRecord.failed``).

**JSON-text cells.** The structured fields the cookers read (``JSON_COLUMNS``: ``messages``,
``conversations``, ``tools``; and ``tool_calls`` inside each message) may be stored either as nested
Parquet values (a list of structs) or as strings of JSON text, as many Hugging Face dumps store them.
A string there is decoded by the rule a JSONL line is (``parse_json``: duplicate keys, depth), so both
forms give the same record; JSON text that does not decode is ``bad_json``, naming the column::

    messages = '[{"role": "user", "content": "Hi"}]'  -> [{"role": "user", "content": "Hi"}]
    messages = '[{"role": "user"'                      -> bad_json "column 'messages': Expecting ..."

No other string is decoded: ``content`` stays text, and ``images``/``videos``/``audios`` strings are
one file name each, as in JSONL.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

from cook.errors import RejectReason
from cook.sources.cursor import Cursor
from cook.sources.decode import parse_json
from cook.types import RawRecord

BATCH_ROWS = 1024
JSON_COLUMNS: Final = ("messages", "conversations", "tools")  # a string cell here is JSON text


def read_parquet(
    path: str,
    max_record_bytes: int,
    span: tuple[int, int] | None = None,
    first_index: int = 1,
    name: str | None = None,
    cursor: Cursor | None = None,
) -> Iterator[RawRecord]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    name = path if name is None else name
    cursor = Cursor() if cursor is None else cursor

    try:
        parquet = pq.ParquetFile(path)
        groups = None if span is None else list(range(*span))
        meta = parquet.metadata
        cursor.total = meta.num_rows if groups is None else sum(meta.row_group(g).num_rows for g in groups)
        batches = parquet.iter_batches(batch_size=BATCH_ROWS, row_groups=groups)
        row = first_index - 1
        for batch in batches:
            sizes = _row_sizes(batch)
            for index, fields in enumerate(batch.to_pylist()):
                row += 1
                cursor.done += 1
                source = f"{name}#{row}"
                if sizes is not None and sizes[index] > max_record_bytes:
                    detail = "row larger than input.max_record_bytes"
                    yield RawRecord.failed(source, path, RejectReason.TOO_LARGE, detail)
                    continue
                error = _decode_json_cells(fields)
                if error is not None:
                    yield RawRecord.failed(source, path, RejectReason.BAD_JSON, error)
                    continue
                yield RawRecord(source=source, fields=fields, origin=path)
    except (pa.ArrowException, OSError) as err:
        detail = f"unreadable parquet: {err}"[:300]
        yield RawRecord.failed(f"{name}#<file>", path, RejectReason.BAD_ARCHIVE, detail)


def _decode_json_cells(fields: dict[str, Any]) -> str | None:
    """Replace each JSON-text cell of ``fields`` (module docstring) by its value, in place; the
    first cell's error detail when one does not decode, else None."""
    for column in JSON_COLUMNS:
        text = fields.get(column)
        if isinstance(text, str):
            try:
                fields[column] = parse_json(text)
            except ValueError as err:
                return f"column {column!r}: {str(err)[:200]}"
    messages = fields.get("messages")
    if isinstance(messages, list):
        for index, message in enumerate(messages):
            calls = message.get("tool_calls") if isinstance(message, dict) else None
            if isinstance(calls, str):
                try:
                    message["tool_calls"] = parse_json(calls)
                except ValueError as err:
                    return f"column 'messages': messages[{index}].tool_calls: {str(err)[:200]}"
    return None


def _row_sizes(batch: object) -> list[int] | None:
    """Approximate bytes of each row: the sum of its string/binary column lengths."""
    import pyarrow as pa
    import pyarrow.compute as pc

    total = None
    for column in batch.columns:  # type: ignore[attr-defined]
        if pa.types.is_string(column.type) or pa.types.is_binary(column.type):
            lengths = pc.fill_null(pc.binary_length(column), 0)
            total = lengths if total is None else pc.add(total, lengths)
    return None if total is None else total.to_pylist()
