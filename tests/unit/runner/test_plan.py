"""JSONL work units: cuts just after a newline at or past each ``unit_bytes`` mark, found by short reads
from each mark; exact first lines, counted by the workers' ``LineCountTask``s, not by the planner."""

from __future__ import annotations

import io
import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cook.config import InputConfig
from cook.runner import plan
from cook.runner.plan import count_lines, jsonl_cuts, line_count_tasks, plan_units, with_first_lines
from cook.runner.units import Unit


def _reference(data: bytes, unit_bytes: int) -> list[tuple[tuple[int, int], int]]:
    """The plan as a reader finds it: read ``unit_bytes``, then the rest of the line (``readline``)."""
    if len(data) <= unit_bytes:
        return [((0, len(data)), 1)]
    handle, spans, start = io.BytesIO(data), [], 0
    while start < len(data):
        chunk = handle.read(unit_bytes)
        chunk += handle.readline() if handle.tell() < len(data) else b""
        spans.append(((start, start + len(chunk)), data[:start].count(b"\n") + 1))
        start += len(chunk)
    return spans


def jsonl_spans(path: str, unit_bytes: int) -> list[tuple[tuple[int, int], int]]:
    """``[((start, stop), first_line)]``: the cuts, each with its first line counted here."""
    cuts = jsonl_cuts(path, unit_bytes)
    return list(zip(cuts, itertools.accumulate(count_lines(path, cuts[:-1]), initial=1), strict=True))


def first_lines(units: list[Unit]) -> list[Unit]:
    """What a run does with its workers' counts, counted here: every task, then ``with_first_lines``."""
    newlines: dict[int, int] = {}
    for task in line_count_tasks(units):
        newlines.update(zip(itertools.count(task.first_unit), count_lines(task.path, task.spans)))
    return with_first_lines(units, newlines)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=30), st.booleans(), st.integers(1, 90), st.integers(1, 64))
def test_spans_match_the_definition(
    tmp_path_factory: pytest.TempPathFactory, lines: list[int], last_newline: bool, unit_bytes: int, block: int
) -> None:
    data = b"\n".join(b"x" * n for n in lines) + (b"\n" if last_newline and lines else b"")
    path = tmp_path_factory.mktemp("plan") / "in.jsonl"
    path.write_bytes(data)
    old = plan.READ_BLOCK, plan.SEEK_BLOCK
    plan.READ_BLOCK = plan.SEEK_BLOCK = block  # count, and look for a line's end, in blocks that end anywhere
    try:
        spans = jsonl_spans(str(path), unit_bytes)
    finally:
        plan.READ_BLOCK, plan.SEEK_BLOCK = old
    assert spans == _reference(data, unit_bytes)
    assert [s for (s, _), _ in spans] == [0] + [e for (_, e), _ in spans[:-1]] and spans[-1][0][1] == len(data)


def test_a_cut_lands_after_the_newline_at_the_mark(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"aaa\nbbb\nccc\n")  # newlines at 3, 7, 11
    assert jsonl_spans(str(path), 4) == [((0, 8), 1), ((8, 12), 3)]  # byte 4 is in line 2: cut after it
    assert jsonl_spans(str(path), 3) == [((0, 4), 1), ((4, 8), 2), ((8, 12), 3)]


def _lines(path: Path, count: int, seed: int) -> list[bytes]:
    rows = [b'{"n": %d, "pad": "%s"}' % (i, b"x" * ((i * 7919 + seed) % 300)) for i in range(count)]
    path.write_bytes(b"".join(row + b"\n" for row in rows))
    return rows


def test_units_get_first_lines_from_the_workers_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each file's first unit starts at line 1; the others wait for the counts of the units before them,
    grouped per file into tasks of about COUNT_TASK_BYTES, and then match the in-process definition."""
    _lines(tmp_path / "a.jsonl", 900, 1)
    _lines(tmp_path / "b.jsonl", 5, 2)  # one unit: nothing to count
    _lines(tmp_path / "c.jsonl", 400, 3)
    monkeypatch.setattr(plan, "COUNT_TASK_BYTES", 20_000)
    units = plan_units(InputConfig(path=str(tmp_path / "*.jsonl"), unit_bytes=4_000))
    by_file = {name: [u for u in units if u.path.endswith(name)] for name in ("a.jsonl", "b.jsonl", "c.jsonl")}
    assert [u.first_index for u in by_file["b.jsonl"]] == [1]
    for name in ("a.jsonl", "c.jsonl"):
        assert by_file[name][0].first_index == 1 and len(by_file[name]) > 5
        assert all(u.first_index is None for u in by_file[name][1:])
    tasks = line_count_tasks(units)
    counted = [index for task in tasks for index in range(task.first_unit, task.first_unit + len(task.spans))]
    last = {by_file[name][-1].index for name in by_file}
    assert counted == [u.index for u in units if u.index not in last]  # every unit but each file's last
    assert all(len({units[i].path for i in range(t.first_unit, t.first_unit + len(t.spans))}) == 1 for t in tasks)
    assert len(tasks) > 2 and all(len(t.spans) * 4_000 <= 20_000 + 4_400 for t in tasks)
    resolved = first_lines(units)
    for name in by_file:
        expected = jsonl_spans(str(tmp_path / name), 4_000)
        assert [(u.span, u.first_index) for u in resolved if u.path.endswith(name)] == expected
        assert expected[-1][1] > 1 or name == "b.jsonl"


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="counts this process's reads in /proc/self/io")
def test_planning_reads_a_few_bytes_per_unit_not_the_file(tmp_path: Path) -> None:
    """The planner reads from each cut's mark to its line's end: one SEEK_BLOCK per unit of a ~20 MB file."""
    path = tmp_path / "big.jsonl"
    _lines(path, 120_000, 4)
    assert path.stat().st_size > 16 * 2**20

    def read_bytes() -> int:
        return int(
            next(line for line in Path("/proc/self/io").read_text().splitlines() if line.startswith("rchar:")).split()[
                1
            ]
        )

    before = read_bytes()
    units = plan_units(InputConfig(path=str(path), unit_bytes=2**20))
    spent = read_bytes() - before
    assert len(units) >= 16 and spent < len(units) * plan.SEEK_BLOCK + 2**16
    assert first_lines(units)[-1].first_index == jsonl_spans(str(path), 2**20)[-1][1]
