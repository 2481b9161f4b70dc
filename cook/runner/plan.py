"""Input files -> work units of about ``input.unit_bytes`` each, in a fixed order.

JSONL files are cut at line boundaries (the driver counts lines up to each cut, so source ids stay
``<file>#<line in file>``); Parquet files are cut at row-group boundaries (row numbers come from the
file's metadata); a WebDataset tar is one unit. The plan depends only on the files and
``input.unit_bytes``, never on the number of workers, so the output does not either.
"""

from __future__ import annotations

import mmap
import os

import numpy as np

from cook.config import InputConfig
from cook.runner.units import Unit
from cook.sources import list_inputs

READ_BLOCK = 4 * 2**20  # bytes whose newlines are counted at once
NEWLINE = ord("\n")


def jsonl_spans(path: str, unit_bytes: int) -> list[tuple[tuple[int, int], int]]:
    """``[((start, stop), first_line)]`` covering the file; each cut is just after the first newline
    at or past ``start + unit_bytes``. The file is mapped, not read, and its newlines are counted
    with NumPy in blocks (a third of ``bytes.count`` after ``read`` here: 0.04 vs 0.09 s per 231 MB);
    each counted block's pages are unmapped again (``_release``), so the driver's resident memory
    does not grow with the file (mapped pages count in its RSS: +96 MiB for a 468 MB file)."""
    size = os.path.getsize(path)
    if size <= unit_bytes:
        return [((0, size), 1)]
    spans = []
    start, line = 0, 1
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        data = np.frombuffer(mapped, np.uint8)  # uint8 [size]
        try:
            while start < size:
                target = start + unit_bytes
                newline = mapped.find(b"\n", target) if target < size else -1
                stop = size if newline < 0 else newline + 1
                spans.append(((start, stop), line))
                for a in range(start, stop, READ_BLOCK):
                    b = min(a + READ_BLOCK, stop)
                    line += int(np.count_nonzero(data[a:b] == NEWLINE))
                    _release(mapped, a, b)
                start = stop
        finally:
            del data  # the mapping closes only once no array views it
    return spans


def _release(mapped: mmap.mmap, start: int, stop: int) -> None:
    """Drop the whole pages of ``[start, stop)`` from the mapping (they stay in the page cache; a
    later read of them faults them in again). Without ``madvise`` (not every platform) they stay."""
    page = mmap.PAGESIZE
    first, last = start // page * page, stop // page * page
    if last > first and hasattr(mapped, "madvise"):
        mapped.madvise(mmap.MADV_DONTNEED, first, last - first)


def parquet_spans(path: str, unit_bytes: int) -> list[tuple[tuple[int, int], int]]:
    """``[((first_group, stop_group), first_row)]``; an unreadable file is one whole-file unit."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(path).metadata
    except (pa.ArrowException, OSError):
        return [((0, 0), 1)]
    spans: list[tuple[tuple[int, int], int]] = []
    first_group, first_row, row, size = 0, 1, 1, 0
    for group in range(meta.num_row_groups):
        size += meta.row_group(group).total_byte_size
        row += meta.row_group(group).num_rows
        if size >= unit_bytes or group == meta.num_row_groups - 1:
            spans.append(((first_group, group + 1), first_row))
            first_group, first_row, size = group + 1, row, 0
    return spans or [((0, 0), 1)]


def plan_units(config: InputConfig) -> list[Unit]:
    units: list[Unit] = []
    for path, fmt in list_inputs(config.path, config.format):
        if fmt == "jsonl":
            pieces: list[tuple[tuple[int, int] | None, int]] = list(jsonl_spans(path, config.unit_bytes))
        elif fmt == "parquet":
            pieces = list(parquet_spans(path, config.unit_bytes))
        else:
            pieces = [(None, 1)]
        base, size = len(units), os.path.getsize(path)
        for i, (span, first) in enumerate(pieces):
            share = span[1] - span[0] if fmt == "jsonl" and span else size // len(pieces)
            units.append(Unit(base + i, path, fmt, span, first, share))
    return units
