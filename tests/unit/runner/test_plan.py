"""JSONL work units: cuts just after a newline at or past each ``unit_bytes`` mark, exact first lines."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cook.runner import plan
from cook.runner.plan import jsonl_spans


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


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=30), st.booleans(), st.integers(1, 90), st.integers(1, 64))
def test_spans_match_the_definition(
    tmp_path_factory: pytest.TempPathFactory, lines: list[int], last_newline: bool, unit_bytes: int, block: int
) -> None:
    data = b"\n".join(b"x" * n for n in lines) + (b"\n" if last_newline and lines else b"")
    path = tmp_path_factory.mktemp("plan") / "in.jsonl"
    path.write_bytes(data)
    old = plan.READ_BLOCK
    plan.READ_BLOCK = block  # count in blocks that end anywhere in a unit
    try:
        spans = jsonl_spans(str(path), unit_bytes)
    finally:
        plan.READ_BLOCK = old
    assert spans == _reference(data, unit_bytes)
    assert [s for (s, _), _ in spans] == [0] + [e for (_, e), _ in spans[:-1]] and spans[-1][0][1] == len(data)


def test_a_cut_lands_after_the_newline_at_the_mark(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"aaa\nbbb\nccc\n")  # newlines at 3, 7, 11
    assert jsonl_spans(str(path), 4) == [((0, 8), 1), ((8, 12), 3)]  # byte 4 is in line 2: cut after it
    assert jsonl_spans(str(path), 3) == [((0, 4), 1), ((4, 8), 2), ((8, 12), 3)]
