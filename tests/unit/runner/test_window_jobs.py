"""A window is planned by a worker and its shards written by any worker: a worker that finds no staged
plan (a fresh node, a crash after planning) or another window's plan makes it again, and writes the
same bytes."""

from __future__ import annotations

from pathlib import Path

from cook.config import config_from_dict
from cook.runner.plan import plan_units
from cook.runner.staging import DiskStore
from cook.runner.units import PackPlan, ShardTask, UnitDone, WindowDone, WindowTask
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
