"""The input order ``cook repack`` recovers from source ids, and where it cuts a source into units."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from cook.runner.repack_index import _ranges, input_order


def test_files_in_sorted_order_then_records_by_number() -> None:
    names = ["b.jsonl", "a.jsonl", "a.jsonl", "sub/c.parquet", "a.jsonl"]
    ids = ["1", "10", "9", "0", "100"]
    assert input_order(names, ids).tolist() == [2, 1, 4, 0, 3]  # a#9 a#10 a#100 b#1 sub/c#0


def test_tar_samples_by_key() -> None:
    names = ["x.tar", "x.tar", "w.jsonl", "x.tar"]
    ids = ["sample-10", "sample-02", "3", "sample-1"]
    assert input_order(names, ids).tolist() == [2, 1, 3, 0]


def test_no_sequences() -> None:
    assert input_order([], []).tolist() == []


def _source(packs: list[int], seq_bytes: float) -> SimpleNamespace:
    pack = np.array(packs, np.int64)
    return SimpleNamespace(sequences=len(packs), pack=pack, seq_bytes=np.full(len(packs), seq_bytes))


def test_units_end_where_no_pack_spans_the_cut() -> None:
    """Windows of packs {0}, {1}, {2}: a unit of about 150 bytes takes two packs, then the rest."""
    source = _source([0, 0, 1, 1, 2, 2], 50)
    assert _ranges(source, 150) == [(0, 4, 200), (4, 6, 100)]  # type: ignore[arg-type]
    assert _ranges(source, 10_000) == [(0, 6, 300)]  # type: ignore[arg-type]


def test_one_window_is_cut_only_past_split_units() -> None:
    """Two packs interleaved (one window): no clean edge before the end, so the window is one unit
    unless it is over SPLIT_UNITS (4) times unit_bytes."""
    source = _source([0, 1, 0, 1], 50)
    assert _ranges(source, 100) == [(0, 4, 200)]  # type: ignore[arg-type]
    assert _ranges(source, 60) == [(0, 4, 200)]  # type: ignore[arg-type]
    assert _ranges(source, 20) == [(0, 2, 100), (2, 4, 100)]  # type: ignore[arg-type]
