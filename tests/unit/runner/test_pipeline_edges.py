"""Edges of a run: never more actors than units, nothing left behind by an early failure, progress
counted in input bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from cook.config import config_from_dict
from cook.runner.local import LocalExecutor
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
