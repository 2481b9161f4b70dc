"""A run interrupted by cook 0.1.0 (its ``state.json`` layout: the pack-count shortfall inside
``packing``, the shards listed in state.json, no shard log; its fingerprint with each unit's first
line number) is another run's: ``cook run`` exits 2 with one line, and ``--overwrite`` cooks the
dataset an uninterrupted run cooks."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from cook import format as fmt
from cook.cli.main import main
from cook.config import load_config
from cook.runner.output_dir import SHARD_LOG_NAME, STATE_NAME, OutputDir
from cook.runner.plan import plan_units
from tests.conftest import pipeline_dict, write_jsonl

UNMET = "windows_short_of_pack_count_multiple"
ROWS = [
    {"messages": [{"role": "user", "content": f"q{i} " + "why " * (i % 40)}, {"role": "assistant", "content": f"a{i}"}]}
    for i in range(200)
]


def _pipeline(tmp_path: Path, name: str) -> Path:
    data = pipeline_dict(
        str(tmp_path / "in.jsonl"),
        str(tmp_path / name),
        # 20 samples a window can never make 64 packs: every window is short of the multiple
        packing={"seq_len": 256, "buffer_size": 20, "pack_count_multiple": 64},
        output={"shard_size": 4},
        ray={"checkpoint_interval_s": 0},  # a save after every commit: the test stops at the third window's
    )
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _finished(out: Path) -> dict[str, Any]:
    manifest = json.loads((out / fmt.MANIFEST_NAME).read_text())
    return {key: value for key, value in manifest.items() if key != "pipeline"}  # pipeline: the output dir differs


def _fingerprint_of_cook_0_1_0(pipeline: Path) -> str:
    """The fingerprint cook 0.1.0 gave this run: its plan held each unit's first line number."""
    config = load_config(str(pipeline))
    body = {
        "pipeline": {key: value for key, value in config.to_dict().items() if key != "ray"},
        "plan": [(u.path, u.format, u.span, u.first_index, os.path.getsize(u.path)) for u in plan_units(config.input)],
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


def test_a_run_interrupted_by_cook_0_1_0_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_jsonl(tmp_path / "in.jsonl", ROWS)
    assert main(["run", str(_pipeline(tmp_path, "reference")), "--workers", "0", "--quiet"]) == 0
    reference = _finished(tmp_path / "reference")

    real_save = OutputDir.save

    def save_then_stop(output: OutputDir) -> None:
        real_save(output)
        if output.state.windows == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(OutputDir, "save", save_then_stop)
    pipeline = _pipeline(tmp_path, "out")
    assert main(["run", str(pipeline), "--workers", "0", "--quiet"]) == 130
    monkeypatch.undo()
    path = tmp_path / "out" / fmt.PROGRESS_DIR / STATE_NAME
    state = json.loads(path.read_text())
    state["packing"][UNMET] = state.pop(UNMET)  # cook 0.1.0's layout: the shortfall inside "packing",
    log = path.parent / SHARD_LOG_NAME  # the shards listed in state.json, with no shard log
    state["shards"] = [json.loads(line) for line in log.read_bytes()[: state.pop("shard_log_bytes")].splitlines()]
    assert len(state["shards"]) == state.pop("shard_count") > 0
    log.unlink()
    state["fingerprint"] = _fingerprint_of_cook_0_1_0(pipeline)
    path.write_text(json.dumps(state))
    capsys.readouterr()

    assert main(["run", str(pipeline), "--workers", "0", "--quiet"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.endswith("holds an interrupted run of a different pipeline or input; pass --overwrite to discard it")
    assert main(["run", str(pipeline), "--workers", "0", "--quiet", "--overwrite"]) == 0
    assert _finished(tmp_path / "out") == reference
