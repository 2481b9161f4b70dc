"""Windows: cut from sample counts in input order, planned from staged lengths, numbered in order; every sample packed once."""

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cook.config import PackingConfig
from cook.runner.units import Rejects, UnitDone, UnitSummary, WindowTask
from cook.runner.windows import Planner, Position, WindowPlan, plan_window_task
from cook.types import MediaItem, PlaceholderBlock, TokenizedSample

START = Position(0)


def _packing(buffer_size: int | str) -> PackingConfig:
    return PackingConfig(seq_len=64, pad_multiple=4, buffer_size=buffer_size)  # type: ignore[arg-type]


def _plan(sizes: list[list[int]], buffer_size: int | str, shard_size: int, start: Position = START):
    """Cut, plan (as a worker would, from the lengths) and number every window; (window, plan) pairs."""
    packing = _packing(buffer_size)
    planner = Planner(packing, shard_size, start, 0, 0, 0)
    windows: list[WindowPlan] = []
    for unit, lengths in enumerate(sizes):
        if unit >= start.unit:
            windows += planner.add(UnitDone(unit, len(lengths), Rejects(), len(lengths), sum(lengths)))
    windows += planner.finish()

    def lengths_of(unit: int) -> tuple[np.ndarray, np.ndarray, bool]:
        return np.array(sizes[unit], np.int32), np.zeros(len(sizes[unit]), np.int32), False

    out = []
    for window in windows:
        plan, done = plan_window_task(window.task, lengths_of, packing)
        window.done = done
        planner.number(window)
        out.append((window, plan))
    return out


def _refs(window: WindowPlan, plan) -> list[tuple[int, int]]:
    """The samples of the window's shard tasks, as (unit, position), sorted."""
    return sorted(map(tuple, np.concatenate([plan.packs_in(t.start, t.stop)[0] for t in window.tasks]).tolist()))


def test_worked_example_from_the_docstring() -> None:
    (w0, p0), (w1, _) = _plan([[5, 6], [7, 8, 9, 10]], 3, 8)
    assert (w0.start, w0.end, w1.start, w1.end) == (Position(0), Position(1, 1), Position(1, 1), Position(2))
    assert w0.task.slices == ((0, 0, 2), (1, 0, 1)) and w1.task.slices == ((1, 1, 4),)
    assert _refs(w0, p0) == [(0, 0), (0, 1), (1, 0)]


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.lists(st.integers(1, 60), max_size=9), min_size=1, max_size=8),
    buffer_size=st.one_of(st.integers(1, 12), st.just("all")),
    shard_size=st.integers(1, 4),
)
def test_every_sample_once_in_window_order(sizes: list[list[int]], buffer_size: int | str, shard_size: int) -> None:
    planned = _plan(sizes, buffer_size, shard_size)
    every = [(u, p) for u, lengths in enumerate(sizes) for p in range(len(lengths))]
    seen, shard, pack = [], 0, 0
    for window, plan in planned:
        assert window.first_shard == shard and window.first_pack == pack
        refs = _refs(window, plan)
        if buffer_size != "all":
            assert len(refs) == buffer_size or window is planned[-1][0]
        assert len(refs) == window.task.samples == window.planned.stats.sequences
        seen += refs
        for task in window.tasks:
            assert task.shard_index == shard and task.first_pack == pack and 1 <= task.packs <= shard_size
            task_refs, bounds = plan.packs_in(task.start, task.stop)
            assert bounds[0] == 0 and bounds[-1] == len(task_refs) and len(bounds) == task.packs + 1
            for a, b in itertools.pairwise(bounds.tolist()):
                assert sum(-(-sizes[u][p] // 4) * 4 for u, p in task_refs[a:b].tolist()) <= 64
            shard, pack = shard + 1, pack + task.packs
        assert window.planned.packs == pack - window.first_pack == plan.packs
    assert seen == every  # windows are consecutive runs of the input, covering it once


def test_a_resumed_plan_continues_where_the_window_started() -> None:
    sizes = [[5, 6, 7], [8, 9], [10, 11, 12, 13]]
    full = _plan(sizes, 4, 1)
    resumed = _plan(sizes, 4, 1, start=full[1][0].start)
    assert full[1][0].start == Position(1, 1)
    assert [_refs(w, p) for w, p in full[1:]] == [_refs(w, p) for w, p in resumed]
    assert [w.task.slices for w, _ in full[1:]] == [w.task.slices for w, _ in resumed]


def test_the_plan_is_the_same_wherever_it_is_made() -> None:
    """A window's plan is a pure function of its slices' lengths: made twice, it is equal."""
    sizes = [[5, 60, 7, 33, 2], [8, 9, 41]]
    (window, first), *_ = _plan(sizes, 8, 2)
    again, done = plan_window_task(
        window.task, lambda u: (np.array(sizes[u], np.int32), np.zeros(len(sizes[u]), np.int32), False), _packing(8)
    )
    assert first.refs.tolist() == again.refs.tolist() and first.bounds.tolist() == again.bounds.tolist()
    assert done == window.done


def test_a_window_is_heavy_when_a_unit_holds_patches_or_audio_not_stored_frames() -> None:
    """The heavy flag (a shard per write job under Ray) comes from the units' staged flag, not from the
    patch counts: an audio-only unit has no patches, yet its shards are heavy; a unit of raw patches is
    heavy; a unit of frames stored png/jpeg (encoded by the cooking worker) is light, as text is."""
    block = (PlaceholderBlock("<so_start>", "<so_embedding>", 4, "<so_end>"),)
    audio = MediaItem("audio", block, audio_features=np.zeros((1, 16, 128), np.float16), audio_lengths=np.array([16]))
    image_block = (PlaceholderBlock("<img>", "<image>", 1, "</img>"),)
    raw = MediaItem("image", image_block, np.zeros((4, 768), np.uint8), (1, 32, 32), "image")
    stored = MediaItem("image", image_block, None, (1, 32, 32), "image", stored_frames=(b"jpeg bytes",))

    def sample(name: str, *media: MediaItem) -> TokenizedSample:
        return TokenizedSample(name, np.arange(9, dtype=np.int32), np.ones(9, np.uint8), media, 5 if media else 0)

    samples = [[sample("a#1")], [sample("a#2", audio)], [sample("a#3", raw)], [sample("a#4", stored)]]
    summaries = {unit: UnitSummary.of(unit, 1, (), unit_samples) for unit, unit_samples in enumerate(samples)}
    assert [summaries[u].heavy for u in range(4)] == [False, True, True, False]
    assert [summaries[u].n_patches.tolist() for u in range(4)] == [[0], [0], [4], [4]]

    def lengths_of(unit: int) -> tuple[np.ndarray, np.ndarray, bool]:
        return summaries[unit].lengths, summaries[unit].n_patches, summaries[unit].heavy

    cases = {((0, 0, 1),): False, ((1, 0, 1),): True, ((2, 0, 1),): True, ((3, 0, 1),): False}
    cases |= {((0, 0, 1), (1, 0, 1)): True, ((3, 0, 1), (2, 0, 1)): True, ((0, 0, 1), (3, 0, 1)): False}
    for slices, heavy in cases.items():
        _, done = plan_window_task(WindowTask(0, slices), lengths_of, _packing(8))
        assert done.heavy is heavy, slices
