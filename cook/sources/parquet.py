"""Parquet file (or a range of its row groups) -> RawRecord per row, streamed a batch at a time.

Source id ``<name>#<row>`` (``name``: the file's source name, ``files.source_name``; rows count from
1 in the whole file, like JSONL lines; ``first_index`` is the number of the span's first row).
``span`` is ``(first_row_group, stop_row_group)``. A file pyarrow cannot open is one ``bad_archive``
failure for the whole span (a failed ``RawRecord``, ``RawRecord.failed``).
"""

from __future__ import annotations

from collections.abc import Iterator

from cook.errors import RejectReason
from cook.types import RawRecord

BATCH_ROWS = 1024


def read_parquet(
    path: str,
    max_record_bytes: int,
    span: tuple[int, int] | None = None,
    first_index: int = 1,
    name: str | None = None,
) -> Iterator[RawRecord]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    name = path if name is None else name

    try:
        parquet = pq.ParquetFile(path)
        groups = None if span is None else list(range(*span))
        batches = parquet.iter_batches(batch_size=BATCH_ROWS, row_groups=groups)
        row = first_index - 1
        for batch in batches:
            sizes = _row_sizes(batch)
            for index, fields in enumerate(batch.to_pylist()):
                row += 1
                source = f"{name}#{row}"
                if sizes is not None and sizes[index] > max_record_bytes:
                    detail = "row larger than input.max_record_bytes"
                    yield RawRecord.failed(source, path, RejectReason.TOO_LARGE, detail)
                    continue
                yield RawRecord(source=source, fields=fields, origin=path)
    except (pa.ArrowException, OSError) as err:
        detail = f"unreadable parquet: {err}"[:300]
        yield RawRecord.failed(f"{name}#<file>", path, RejectReason.BAD_ARCHIVE, detail)


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
