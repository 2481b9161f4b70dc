"""RayExecutor under the driver: bounded outstanding jobs, results equal to in-process, and only
small things (summaries, shard entries) cross to the driver."""

from __future__ import annotations

import hashlib
import time
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cook.config import config_from_dict
from cook.runner.local import LocalExecutor
from cook.runner.pipeline import run_pipeline
from cook.runner.plan import plan_units
from cook.runner.ray_executor import IN_FLIGHT_PER_ACTOR, MAX_JOBS_PER_CALL, RayExecutor, jobs_per_call, limits
from cook.runner.units import TRACE_DONE, Attempt, ShardTask, Unit, WindowTask, WriteTask, decode_jobs
from cook.runner.worker import read_unit
from tests.conftest import pipeline_dict, write_jsonl


def _chat(i: int, words: int) -> dict:
    return {
        "messages": [
            {"role": "user", "content": f"question {i} " + "word " * words},
            {"role": "assistant", "content": f"answer {i}"},
        ]
    }


class CountingRayExecutor(RayExecutor):
    """Records the most jobs outstanding at any submission, riders aside, and the jobs of each call."""

    peak = 0
    calls: ClassVar[list[list[str]]] = []

    def submit(self, job, attempt=None, tries=0):
        super().submit(job, attempt, tries)
        CountingRayExecutor.peak = max(CountingRayExecutor.peak, self.outstanding() - self._riding)

    def _send(self, jobs):
        CountingRayExecutor.calls.append([type(job).__name__ for job, _, _ in jobs])
        super()._send(jobs)


def _shards(out: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.glob("shard-*"))}


@pytest.mark.slow  # Ray and in-process over uneven units: ~4 s (test_one_and_two_actors_give_identical_output stays in make test)
def test_uneven_units_bounded_and_identical_to_in_process(tmp_path: Path, ray_session) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    # one heavy file first, then many light ones: the light units finish before the heavy one
    write_jsonl(raw / "a_heavy.jsonl", [_chat(i, 300) for i in range(300)])
    for f in range(12):
        write_jsonl(raw / f"b_light_{f:02d}.jsonl", [_chat(f * 10 + i, 2) for i in range(3)])
    extra = {"packing": {"buffer_size": 50, "seq_len": 2048}, "output": {"shard_size": 2}}
    ray_config = config_from_dict(pipeline_dict(str(raw), str(tmp_path / "ray"), **extra))
    local_config = config_from_dict(pipeline_dict(str(raw), str(tmp_path / "local"), **extra))

    CountingRayExecutor.peak = 0
    CountingRayExecutor.calls.clear()
    summary = run_pipeline(ray_config, lambda c: CountingRayExecutor(c, None, 2), progress=False)
    local = run_pipeline(local_config, LocalExecutor, progress=False)
    # the loop's CPU is this process's (the in-process run cooks in it), a part of all it has used
    assert 0 < summary.driver_loop_cpu_s < local.driver_loop_cpu_s + summary.driver_loop_cpu_s <= time.process_time()

    assert CountingRayExecutor.peak <= IN_FLIGHT_PER_ACTOR * 2
    calls = CountingRayExecutor.calls
    assert sum(map(len, calls)) > len(calls)  # window jobs rode on cooks
    for call in calls:  # riders first, then at most one call's own job (one job a call: 2 actors)
        riders = [kind for kind in call if kind in ("WindowTask", "WriteTask")]  # text: every write rides
        assert call[: len(riders)] == riders and len(call) - len(riders) <= 1, call
    assert _shards(tmp_path / "ray") == _shards(tmp_path / "local") and summary.shards > 4
    shard_bytes = sum(p.stat().st_size for p in (tmp_path / "ray").glob("shard-*.tar"))
    assert 0 < summary.driver_received_bytes < shard_bytes / 4  # ids and masks never cross
    assert sum(summary.shards_by_writer.values()) == summary.shards
    assert not (tmp_path / "ray" / ".cook-progress").exists()  # the stage went with the finished run


@settings(max_examples=60, deadline=None)
@example(actors=2, steps=[(True, False, 0), (True, False, 0), (True, True, 0), (False, False, 0), (True, False, 0)])
@given(
    actors=st.integers(1, 9), steps=st.lists(st.tuples(st.booleans(), st.booleans(), st.integers(0, 99)), max_size=300)
)
def test_the_actor_picked_is_the_least_busy_then_fewest_writes_then_first(actors: int, steps: list) -> None:
    """The heap picks what a scan over every actor picks, whatever jobs were handed out and finished
    (and after the heap is rebuilt of its stale entries)."""
    executor = RayExecutor.__new__(RayExecutor)  # no Ray: only the picking
    executor.actors = [object()] * actors
    executor._busy, executor._writes = [0] * actors, [0] * actors
    executor._ranks = [(0, 0, a) for a in range(actors)]
    running: list[tuple[int, bool]] = []
    for hand_out, is_write, which in steps:
        if hand_out or not running:
            picked = executor._pick()
            scan = min(range(actors), key=lambda a: (executor._busy[a], executor._writes[a], a))
            assert picked == scan
            executor._load(picked, 1, is_write)
            running.append((picked, is_write))
        else:
            actor, was_write = running.pop(which % len(running))
            executor._load(actor, -1, -was_write)
    assert len(executor._ranks) <= 4 * actors + 64 + 1


def test_jobs_per_call_grows_with_the_actors_up_to_its_cap() -> None:
    assert [jobs_per_call(0, n) for n in (1, 2, 63, 64, 95, 96, 256, 1024, 10_000)] == [1, 1, 1, 2, 2, 3, 8, 16, 16]
    assert MAX_JOBS_PER_CALL == 16 and jobs_per_call(4, 2) == 4 and jobs_per_call(1, 10_000) == 1


def test_limits_fill_every_call_and_stage_only_what_fills_them() -> None:
    assert limits(2, 1) == (4, 12)  # one job a call: as before jobs_per_call (2 jobs, 6 units an actor)
    for actors, per_call in ((2, 5), (64, 2), (1024, 16)):
        slots, lookahead = limits(actors, per_call)
        assert slots == IN_FLIGHT_PER_ACTOR * actors * per_call  # every call full
        assert lookahead - slots == limits(actors, 1)[1] - limits(actors, 1)[0]  # the same margin beyond them


class _Run:
    """An actor's ``run.remote``: records each call's jobs (by kind) instead of running them."""

    def __init__(self, calls: list[list[str]]) -> None:
        self.calls = calls

    def remote(self, sent: bytes) -> _Ref:
        self.calls.append([type(job).__name__ for job, _ in decode_jobs(sent)])
        return _Ref()


class _Ref:
    """A call's ref, never answered."""

    def future(self) -> Future:
        return Future()


def _executor(actors: int, per_call: int, calls: list[list[str]]) -> RayExecutor:
    """A RayExecutor without Ray: its actors record the calls sent to them."""
    executor = RayExecutor.__new__(RayExecutor)
    executor.actors = [SimpleNamespace(run=_Run(calls)) for _ in range(actors)]
    executor._busy, executor._writes = [0] * actors, [0] * actors
    executor._ranks = [(0, 0, a) for a in range(actors)]
    executor._running, executor._waiting, executor._riders = {}, [], []
    executor._outstanding = executor._riding = 0
    executor.jobs_per_call = per_call
    executor._slots, executor.lookahead = limits(actors, per_call)
    return executor


@pytest.mark.parametrize("per_call", [1, 3])
def test_window_jobs_ride_in_the_next_cooks_call_and_take_no_slot(per_call: int) -> None:
    calls: ClassVar[list[list[str]]] = []
    executor = _executor(2, per_call, calls)
    window = WindowTask(0, ((0, 0, 10),))
    text_write = WriteTask((ShardTask(0, 0, window, 0, 4),))
    media_write = WriteTask((ShardTask(1, 4, window, 4, 8),), heavy=True)
    base = executor.slots
    for job in (window, text_write):
        executor.submit(job)
    assert calls == [] and executor.outstanding() == 2 and executor.slots == base + 2  # held, no slot taken
    executor.submit(media_write)  # heavy: not a rider, a call's job like a cook (the riders ride with it)
    for k in range(per_call):
        executor.submit(Unit(k, "x.jsonl", "jsonl"))
    riders = ["WindowTask", "WriteTask"]
    if per_call == 1:
        assert calls == [[*riders, "WriteTask"], ["Unit"]]
    else:
        assert calls == [[*riders, "WriteTask", *["Unit"] * (per_call - 1)]]  # a call's worth of them; one waits
        assert [type(job).__name__ for job, _, _ in executor._waiting] == ["Unit"]
    assert executor.outstanding() == 3 + per_call and executor.slots == base + 2


def test_a_unit_traced_to_its_end_has_no_record_to_blame(tmp_path: Path) -> None:
    """A traced unit whose call is lost mid-record blames that record; one lost after its last record was
    cooked (its reply in flight when the next call on the actor killed it) blames none: run again."""
    write_jsonl(tmp_path / "a.jsonl", [_chat(i, 2) for i in range(5)])
    config = config_from_dict(pipeline_dict(str(tmp_path), str(tmp_path / "out")))
    (unit,) = plan_units(config.input)
    trace = tmp_path / "trace"
    records = read_unit(config, unit, str(trace))
    next(records), next(records)  # a worker lost while cooking record 1
    assert trace.read_text().split() == ["0", "1"]
    executor = RayExecutor.__new__(RayExecutor)  # no Ray: only the attribution
    executor._trace_dir = str(tmp_path)
    attempt = Attempt(str(trace))
    assert executor._next_attempt(unit, attempt) == Attempt(str(trace), frozenset({1}))
    assert [ordinal for ordinal, _ in records] == [2, 3, 4]  # every record cooked
    assert trace.read_text().split() == ["0", "1", "2", "3", "4", TRACE_DONE]
    assert executor._next_attempt(unit, attempt) is attempt
    assert executor._next_attempt(unit, Attempt()) == Attempt(str(tmp_path / "trace-000000"))  # first crash
