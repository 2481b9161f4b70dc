"""A run interrupted under the previous ``state.json`` layout (cook 0.1.0: the pack-count shortfall
inside its ``packing`` object, the shards listed in state.json, no shard log) resumes with the shortfall
and shards it had counted: the finished dataset equals an uninterrupted run's, shortfall included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from cook import format as fmt
from cook.cli.main import main
from cook.manifest import ShardInfo
from cook.runner.output_dir import SHARD_LOG_NAME, STATE_NAME, OutputDir
from cook.runner.resume import state_from_json
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


def test_resume_from_the_previous_state_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_jsonl(tmp_path / "in.jsonl", ROWS)
    assert main(["run", str(_pipeline(tmp_path, "reference")), "--workers", "0", "--quiet"]) == 0
    reference = _finished(tmp_path / "reference")
    assert reference["packing"][UNMET] == reference["packing"]["windows"] == 10

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
    assert state[UNMET] == 3 and UNMET not in state["packing"]  # this layout: its own key

    state["packing"][UNMET] = state.pop(UNMET)  # the previous layout (cook 0.1.0): its own key, and
    log = path.parent / SHARD_LOG_NAME  # the shards listed in state.json, with no shard log
    state["shards"] = [json.loads(line) for line in log.read_bytes()[: state.pop("shard_log_bytes")].splitlines()]
    assert len(state["shards"]) == state.pop("shard_count") > 0
    log.unlink()
    path.write_text(json.dumps(state))
    old = state_from_json(state, [ShardInfo(**entry) for entry in state["shards"]])
    assert old.windows_short_of_pack_count_multiple == 3

    assert main(["run", str(pipeline), "--workers", "0", "--quiet"]) == 0
    assert _finished(tmp_path / "out") == reference
