"""Input files -> work units of about ``input.unit_bytes`` each, in a fixed order.

JSONL files are cut at line boundaries: each cut is found by a seek and a short read (the driver reads
about ``SEEK_BLOCK`` per unit, never the file). Source ids stay ``<file>#<line in file>``, so a unit after a
file's first needs the number of lines before it: the units are planned with ``first_index`` None
there, and ``LineCountTask`` jobs have the workers count the newlines of the units before
(``count_lines``), which ``with_first_lines`` turns into first line numbers. Parquet files are cut at
row-group boundaries (row numbers come from the file's metadata); a WebDataset tar is one unit. The
plan depends only on the files and ``input.unit_bytes``, never on the number of workers, so the
output does not either.

    plan_units -> units (JSONL first lines unknown after a file's first unit)
      -> line_count_tasks -> workers: count_lines -> LineCounts -> with_first_lines -> units to cook
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import BinaryIO

from cook.config import InputConfig
from cook.runner.units import LineCountTask, Unit
from cook.sources import list_inputs

READ_BLOCK = 4 * 2**20  # bytes read (and whose newlines are counted) at once
SEEK_BLOCK = 64 * 2**10  # bytes read at a time from a cut's mark to the end of its line
COUNT_TASK_BYTES = 256 * 2**20  # about this much input per LineCountTask (one file's consecutive units)


def jsonl_cuts(path: str, unit_bytes: int) -> list[tuple[int, int]]:
    """``[(start, stop)]`` byte ranges covering the file; each cut is just after the first newline at or
    past ``start + unit_bytes``. Only the bytes from each mark to its line's end are read."""
    size = os.path.getsize(path)
    if size <= unit_bytes:
        return [(0, size)]
    spans, start = [], 0
    with open(path, "rb") as handle:
        while start + unit_bytes < size and (stop := _line_end(handle, start + unit_bytes)) is not None:
            spans.append((start, stop))
            start = stop
    if start < size:
        spans.append((start, size))
    return spans


def _line_end(handle: BinaryIO, mark: int) -> int | None:
    """The offset just after the first newline at or past ``mark``; None when there is none."""
    handle.seek(mark)
    at = mark
    while block := handle.read(SEEK_BLOCK):
        newline = block.find(b"\n")
        if newline >= 0:
            return at + newline + 1
        at += len(block)
    return None


def count_lines(path: str, spans: Sequence[tuple[int, int]]) -> list[int]:
    """The newlines in each byte range ``[start, stop)`` of ``path`` (a worker's job, ``LineCountTask``),
    read ``READ_BLOCK`` bytes at a time into one reused buffer (no fresh pages per read)."""
    counts = []
    buffer = bytearray(READ_BLOCK)
    with open(path, "rb", buffering=0) as handle:
        for start, stop in spans:
            handle.seek(start)
            newlines, left = 0, stop - start
            while left > 0 and (read := handle.readinto(memoryview(buffer)[: min(READ_BLOCK, left)])):
                newlines += buffer.count(b"\n", 0, read)
                left -= read
            counts.append(newlines)
    return counts


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
    """The work units of the input, in order. A JSONL unit after its file's first has ``first_index``
    None until its lines are counted (``line_count_tasks``, then ``with_first_lines``)."""
    units: list[Unit] = []
    for path, fmt in list_inputs(config.path, config.format):
        if fmt == "jsonl":
            pieces: list[tuple[tuple[int, int] | None, int | None]] = [
                (span, 1 if i == 0 else None) for i, span in enumerate(jsonl_cuts(path, config.unit_bytes))
            ]
        elif fmt == "parquet":
            pieces = list(parquet_spans(path, config.unit_bytes))
        else:
            pieces = [(None, 1)]
        base, size = len(units), os.path.getsize(path)
        for i, (span, first) in enumerate(pieces):
            share = span[1] - span[0] if fmt == "jsonl" and span else size // len(pieces)
            units.append(Unit(base + i, path, fmt, span, first, share))
    return units


def line_count_tasks(units: Sequence[Unit]) -> list[LineCountTask]:
    """The line counts ``with_first_lines`` needs: every unit followed by one whose first line is unknown
    (the next unit of its file), a file's consecutive units grouped up to about ``COUNT_TASK_BYTES``."""
    tasks: list[LineCountTask] = []
    group: list[Unit] = []
    size = 0  # the group's input bytes
    for unit, after in itertools.pairwise(units):
        if after.first_index is not None:
            continue
        assert unit.span is not None and after.path == unit.path, (unit, after)
        if group and (group[-1].index != unit.index - 1 or size >= COUNT_TASK_BYTES):
            tasks.append(_count_task(group))
            group, size = [], 0
        group.append(unit)
        size += unit.size_bytes
    return [*tasks, _count_task(group)] if group else tasks


def _count_task(units: list[Unit]) -> LineCountTask:
    return LineCountTask(units[0].index, units[0].path, tuple(unit.span for unit in units if unit.span is not None))


def with_first_lines(units: Sequence[Unit], newlines: Mapping[int, int]) -> list[Unit]:
    """``units`` with each unknown ``first_index`` set from the unit before it (same file): its first
    line plus its newlines (``newlines``: unit index -> count, from ``LineCounts``)."""
    resolved: list[Unit] = []
    for unit in units:
        if unit.first_index is None:
            before = resolved[-1]
            assert before.first_index is not None and before.path == unit.path, (before, unit)
            unit = replace(unit, first_index=before.first_index + newlines[before.index])
        resolved.append(unit)
    return resolved
