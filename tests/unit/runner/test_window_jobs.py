"""A window is planned by a worker and its shards written by any worker: a worker that finds no staged
plan (a fresh node, a crash after planning) or another window's plan makes it again, and writes the
same bytes."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

from cook.config import config_from_dict
from cook.packing.metrics import PackingStats
from cook.runner.local import LocalExecutor
from cook.runner.pipeline import run_pipeline
from cook.runner.plan import plan_units
from cook.runner.staging import DiskStore
from cook.runner.units import Job, PackPlan, Rejects, ShardTask, UnitDone, WindowDone, WindowTask, WriteDone, WriteTask
from cook.runner.windows import SHARDS_PER_WRITE, Planner, Position
from cook.runner.worker import CookWorker
from tests.conftest import pipeline_dict, write_jsonl


def _chats(n: int) -> list[dict]:
    return [
        {
            "messages": [
                {"role": "user", "content": f"question {i} " * (i % 7 + 1)},
                {"role": "assistant", "content": f"a{i}"},
            ]
        }
        for i in range(n)
    ]


def test_a_shard_is_the_same_whichever_worker_writes_it(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "a.jsonl", _chats(40))
    write_jsonl(tmp_path / "b.jsonl", _chats(30))
    out = tmp_path / "out"
    config = config_from_dict(pipeline_dict(str(tmp_path), str(out), packing={"seq_len": 256, "buffer_size": 50}))
    planner = CookWorker(config, DiskStore(config.output.dir))
    done = [planner.cook_unit(unit) for unit in plan_units(config.input)]
    assert all(isinstance(d, UnitDone) for d in done) and [d.samples for d in done] == [40, 30]
    window = WindowTask(0, ((0, 0, 40), (1, 0, 10)))
    planned = planner.plan_window(window)
    assert isinstance(planned, WindowDone) and planned.stats.sequences == 50 and planned.packs >= 2
    task = ShardTask(0, 0, window, 0, planned.packs)
    planner.write_shard(task)
    shard = out / "shard-000000.tar"
    first = shard.read_bytes()

    staged = planner.store.plan(window)
    assert isinstance(staged, PackPlan) and staged.packs == planned.packs
    other = CookWorker(config, DiskStore(config.output.dir))  # another worker reads the staged plan
    assert other.store.plan(window) is not None
    shard.unlink()
    other.write_shard(task)
    assert shard.read_bytes() == first

    planner.store.drop_plan(0)  # no plan staged: the writer makes it again
    fresh = CookWorker(config, DiskStore(config.output.dir))
    shard.unlink()
    fresh.write_shard(task)
    assert shard.read_bytes() == first

    fresh.store.put_plan(WindowTask(0, ((1, 0, 30),)), staged)  # a stale file of another window 0
    assert CookWorker(config, DiskStore(config.output.dir)).store.plan(window) is None
    shard.unlink()
    CookWorker(config, DiskStore(config.output.dir)).write_shard(task)
    assert shard.read_bytes() == first


def test_a_window_goes_out_as_write_jobs_of_its_uncommitted_shards(tmp_path: Path) -> None:
    """Planner numbers a window's shards; ``writes`` hands them out SHARDS_PER_WRITE at a time, skipping
    those already committed (a resume), and a worker's write job writes each as ``write_shard`` does."""
    write_jsonl(tmp_path / "a.jsonl", _chats(40))
    out = tmp_path / "out"
    config = config_from_dict(
        pipeline_dict(str(tmp_path), str(out), packing={"seq_len": 64, "buffer_size": 40}, output={"shard_size": 1})
    )
    worker = CookWorker(config, DiskStore(config.output.dir))
    (done,) = [worker.cook_unit(unit) for unit in plan_units(config.input)]
    planner = Planner(config.packing, 1, Position(0), 0, 5, 100)  # 5 shards and 100 packs before this window
    (window,) = planner.add(done)
    window.done = worker.plan_window(window.task)
    planner.number(window)
    packs = window.planned.packs
    assert packs > SHARDS_PER_WRITE, packs  # a shard per pack: more shards than one write job takes
    writes = window.writes(committed=0, per_job=SHARDS_PER_WRITE)
    assert [len(w.shards) for w in writes] == [SHARDS_PER_WRITE] * (packs // SHARDS_PER_WRITE) + (
        [packs % SHARDS_PER_WRITE] if packs % SHARDS_PER_WRITE else []
    )
    tasks = [task for write in writes for task in write.shards]
    assert [t.shard_index for t in tasks] == list(range(5, 5 + packs))
    assert [(t.first_pack, t.start, t.stop) for t in tasks] == [(100 + k, k, k + 1) for k in range(packs)]
    resumed = window.writes(committed=7, per_job=SHARDS_PER_WRITE)  # shards 5 and 6 were committed before an interrupt
    assert [t.shard_index for w in resumed for t in w.shards] == list(range(7, 5 + packs))

    result = worker.work(writes[0])
    assert isinstance(result, WriteDone)
    assert [s.shard_index for s in result.shards] == [t.shard_index for t in writes[0].shards]
    first = (out / "shard-000005.tar").read_bytes()
    (out / "shard-000005.tar").unlink()
    single = worker.write_shard(writes[0].shards[0])
    assert single == result.shards[0] and (out / "shard-000005.tar").read_bytes() == first


class _RecordingExecutor(LocalExecutor):
    """Keeps every job the driver hands out; groups shards in write jobs as the Ray executor does."""

    shards_per_write = SHARDS_PER_WRITE

    jobs: ClassVar[list[Job]] = []

    def submit(self, job):
        _RecordingExecutor.jobs.append(job)
        super().submit(job)


@pytest.mark.parametrize("buffer_size", [30, "all"])
def test_the_driver_writes_each_window_in_write_jobs_of_its_consecutive_shards(
    tmp_path: Path, buffer_size: int | str
) -> None:
    """A write job per window while its shards fit in one (``SHARDS_PER_WRITE``); a larger window
    (``all``: one window) is spread over several; every shard written once, in numbered order."""
    write_jsonl(tmp_path / "a.jsonl", _chats(120))
    config = config_from_dict(
        pipeline_dict(
            str(tmp_path / "a.jsonl"),
            str(tmp_path / "out"),
            packing={"seq_len": 64, "buffer_size": buffer_size},
            output={"shard_size": 2},
        )
    )
    _RecordingExecutor.jobs = []
    summary = run_pipeline(config, _RecordingExecutor, progress=False)
    windows = [job for job in _RecordingExecutor.jobs if isinstance(job, WindowTask)]
    writes = [job for job in _RecordingExecutor.jobs if isinstance(job, WriteTask)]
    written = [task.shard_index for write in writes for task in write.shards]
    assert sorted(written) == list(range(summary.shards)) and summary.shards > SHARDS_PER_WRITE
    for write in writes:
        indexes = [task.shard_index for task in write.shards]
        assert indexes == list(range(indexes[0], indexes[0] + len(indexes))) and len(indexes) <= SHARDS_PER_WRITE
        assert len({task.window for task in write.shards}) == 1  # one window's shards
    shards_of = {window: sum(task.window == window for write in writes for task in write.shards) for window in windows}
    assert len(writes) == sum(-(-shards // SHARDS_PER_WRITE) for shards in shards_of.values())  # as few as fit
    if buffer_size == "all":
        assert len(windows) == 1 and len(writes) > 1


def test_in_process_each_shard_is_a_write_job_of_its_own(tmp_path: Path) -> None:
    """In-process a job costs the driver nothing, so a Ctrl-C keeps every shard written: one per job."""
    write_jsonl(tmp_path / "a.jsonl", _chats(60))
    config = config_from_dict(
        pipeline_dict(
            str(tmp_path / "a.jsonl"),
            str(tmp_path / "out"),
            packing={"seq_len": 64, "buffer_size": "all"},
            output={"shard_size": 2},
        )
    )

    class OneByOne(LocalExecutor):
        jobs: ClassVar[list[Job]] = []

        def submit(self, job: Job) -> None:
            OneByOne.jobs.append(job)
            super().submit(job)

    summary = run_pipeline(config, OneByOne, progress=False)
    writes = [job for job in OneByOne.jobs if isinstance(job, WriteTask)]
    assert [len(write.shards) for write in writes] == [1] * summary.shards and summary.shards > 1


def test_a_heavy_window_is_written_a_shard_per_job() -> None:
    """Shards of raw patches or audio are heavy: one job for all of a window's would leave the other
    actors idle. A light window (text, frames stored png/jpeg) goes ``SHARDS_PER_WRITE`` shards a job."""
    stats = PackingStats(64)
    for heavy, sizes in ((False, [16, 16, 8]), (True, [1] * 40)):
        planner = Planner(config_from_dict(pipeline_dict("x.jsonl", "out")).packing, 1, Position(0), 0, 0, 0)
        (window,) = planner.add(UnitDone(0, 40, Rejects.of(()), 40, 400)) or planner.finish()
        window.done = WindowDone(window.index, 40, stats, False, heavy)
        planner.number(window)
        assert [len(w.shards) for w in window.writes(0, SHARDS_PER_WRITE)] == sizes
