"""Input files -> work units of about ``input.unit_bytes`` each, in a fixed order.

JSONL files are cut at line boundaries (the driver counts lines up to each cut, so source ids stay
``<file>#<line in file>``); Parquet files are cut at row-group boundaries (row numbers come from the
file's metadata); a WebDataset tar is one unit. The plan depends only on the files and
``input.unit_bytes``, never on the number of workers, so the output does not either.
"""

from __future__ import annotations

import os

from cook.config import InputConfig
from cook.runner.units import Unit
from cook.sources import list_inputs

READ_BLOCK = 4 * 2**20  # bytes read (and whose newlines are counted) at once


def jsonl_spans(path: str, unit_bytes: int) -> list[tuple[tuple[int, int], int]]:
    """``[((start, stop), first_line)]`` covering the file; each cut is just after the first newline
    at or past ``start + unit_bytes``. The file is read once, ``READ_BLOCK`` bytes at a time, so the
    driver's memory does not grow with the file."""
    size = os.path.getsize(path)
    if size <= unit_bytes:
        return [((0, size), 1)]
    spans = []
    start, first_line, lines = 0, 1, 0  # lines: newlines read since ``start``
    offset = 0  # the file offset of ``block``
    with open(path, "rb") as handle:
        while block := handle.read(READ_BLOCK):
            at = 0  # newlines before ``at`` in this block are counted
            while (mark := start + unit_bytes - offset) < len(block):
                newline = block.find(b"\n", max(mark, at))
                if newline < 0:
                    break
                lines += block.count(b"\n", at, newline + 1)
                stop = offset + newline + 1
                spans.append(((start, stop), first_line))
                start, first_line, lines, at = stop, first_line + lines, 0, newline + 1
            lines += block.count(b"\n", at)
            offset += len(block)
    if start < size:
        spans.append(((start, size), first_line))
    return spans


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
