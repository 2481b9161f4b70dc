"""The driver's plan: windows of buffer_size samples in input order, every sample packed once."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cook.config import PackingConfig
from cook.runner.units import UnitSummary
from cook.runner.windows import Planner, Position


def _summary(unit: int, lengths: list[int]) -> UnitSummary:
    return UnitSummary(unit, len(lengths), (), np.array(lengths, np.int32), np.zeros(len(lengths), np.int32))


START = Position(0)


def _plan(sizes: list[list[int]], buffer_size: int | str, shard_size: int, start: Position = START):
    packing = PackingConfig(seq_len=64, pad_multiple=4, buffer_size=buffer_size)  # type: ignore[arg-type]
    planner = Planner(packing, shard_size, start, 0, 0, 0)
    windows = []
    for unit, lengths in enumerate(sizes):
        if unit >= start.unit:
            windows += planner.add(_summary(unit, lengths))
    return windows + planner.finish()


def test_worked_example_from_the_docstring() -> None:
    w0, w1 = _plan([[5, 6], [7, 8, 9, 10]], 3, 8)
    assert (w0.start, w0.end, w1.start, w1.end) == (Position(0), Position(1, 1), Position(1, 1), Position(2))
    refs0 = sorted(map(tuple, np.concatenate([t.refs for t in w0.tasks]).tolist()))
    assert refs0 == [(0, 0), (0, 1), (1, 0)]


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.lists(st.integers(1, 60), max_size=9), min_size=1, max_size=8),
    buffer_size=st.one_of(st.integers(1, 12), st.just("all")),
    shard_size=st.integers(1, 4),
)
def test_every_sample_once_in_window_order(sizes: list[list[int]], buffer_size: int | str, shard_size: int) -> None:
    windows = _plan(sizes, buffer_size, shard_size)
    every = [(u, p) for u, lengths in enumerate(sizes) for p in range(len(lengths))]
    seen, shard, pack = [], 0, 0
    for window in windows:
        assert window.first_shard == shard and window.first_pack == pack
        refs = sorted(map(tuple, np.concatenate([t.refs for t in window.tasks]).tolist()))
        if buffer_size != "all":
            assert len(refs) == buffer_size or window is windows[-1]
        seen += refs
        for task in window.tasks:
            assert task.shard_index == shard and task.first_pack == pack and 1 <= task.packs <= shard_size
            for a, b in zip(task.bounds[:-1], task.bounds[1:], strict=True):
                assert sum(-(-sizes[u][p] // 4) * 4 for u, p in task.refs[a:b].tolist()) <= 64
            shard, pack = shard + 1, pack + task.packs
        assert window.packs == pack - window.first_pack
    assert seen == every  # windows are consecutive runs of the input, covering it once


def test_a_resumed_plan_continues_where_the_window_started() -> None:
    sizes = [[5, 6, 7], [8, 9], [10, 11, 12, 13]]
    full = _plan(sizes, 4, 1)
    resumed = _plan(sizes, 4, 1, start=full[1].start)
    assert full[1].start == Position(1, 1)
    tail = [sorted(map(tuple, np.concatenate([t.refs for t in w.tasks]).tolist())) for w in full[1:]]
    again = [sorted(map(tuple, np.concatenate([t.refs for t in w.tasks]).tolist())) for w in resumed]
    assert tail == again
