"""Edges of a run: never more actors than units, nothing left behind by an early failure, progress
counted in input bytes, an interrupt in the driver's own step saved whole."""

from __future__ import annotations

import hashlib
import json
import signal
from pathlib import Path

import pytest

from cook import format as fmt
from cook.config import config_from_dict
from cook.runner.driver import Driver
from cook.runner.local import LocalExecutor
from cook.runner.output_dir import STATE_NAME
from cook.runner.pipeline import run_pipeline
from cook.runner.progress import Progress
from tests.conftest import pipeline_dict, write_jsonl


def _chats(n: int) -> list[dict]:
    return [
        {"messages": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]}
        for i in range(n)
    ]


def test_never_more_actors_than_units(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "a.jsonl", _chats(5))
    write_jsonl(tmp_path / "b.jsonl", _chats(5))
    config = config_from_dict(pipeline_dict(str(tmp_path), str(tmp_path / "out"), ray={"num_actors": 7}))
    asked = []

    def factory(cfg):
        asked.append(cfg.ray.num_actors)
        return LocalExecutor(cfg)

    run_pipeline(config, factory, progress=False)
    assert asked == [2]  # two files, two units


def test_an_early_failure_leaves_nothing_behind(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "a.jsonl", _chats(5))
    out = tmp_path / "out"
    config = config_from_dict(pipeline_dict(str(tmp_path), str(out)))

    def broken(cfg):
        raise RuntimeError("no workers today")

    with pytest.raises(RuntimeError, match="no workers today"):
        run_pipeline(config, broken, progress=False)
    assert sorted(p.name for p in out.iterdir()) == []  # no rejects.jsonl.partial, no progress, no lock


def test_progress_counts_input_bytes(capsys) -> None:
    bar = Progress(4_000_000, interval_s=0.0)
    bar.update(1_000_000, records=10, tokens=500, rejects=1)
    line = capsys.readouterr().err
    assert "25% of 4.0 MB, 10 records" in line and "1 rejects" in line


def test_an_interrupt_in_the_drivers_own_step_saves_a_whole_state(tmp_path: Path, monkeypatch) -> None:
    """A Ctrl-C that lands while the driver commits a shard (its own work, not a wait on the workers)
    is raised once that commit is whole, and saves it: the state counts the shard, and the rerun ends
    byte-identical to an uninterrupted run. Python's own handler raised it in the middle of the commit,
    where nothing could be saved."""
    (tmp_path / "raw").mkdir()
    write_jsonl(tmp_path / "raw" / "a.jsonl", _chats(60))
    extra = {"packing": {"buffer_size": 8, "seq_len": 64, "overflow": "truncate"}, "output": {"shard_size": 1}}

    def config(out: str):
        return config_from_dict(pipeline_dict(str(tmp_path / "raw"), str(tmp_path / out), **extra))

    run_pipeline(config("ref"), LocalExecutor, progress=False)
    commit = Driver._commit

    def interrupted_commit(self: Driver) -> None:
        before = self.committed
        commit(self)
        if before == 0 and self.committed > 0:  # the first shard committed: Ctrl-C lands right here
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(Driver, "_commit", interrupted_commit)
    with pytest.raises(KeyboardInterrupt):
        run_pipeline(config("out"), LocalExecutor, progress=False)
    state = json.loads((tmp_path / "out" / fmt.PROGRESS_DIR / STATE_NAME).read_text())
    assert state["shard_count"] >= 1  # the commit it landed in was saved
    monkeypatch.setattr(Driver, "_commit", commit)
    run_pipeline(config("out"), LocalExecutor, progress=False)

    def shards(out: str) -> dict[str, str]:
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((tmp_path / out).glob("shard-*"))}

    assert shards("out") == shards("ref") and len(shards("ref")) > 2
