"""``buffer_size: all`` is the two-pass plan (issue 12, item 2): pass 1 stages every sample, the driver
plans the whole dataset from the lengths, pass 2 writes the shards. A SIGKILL in pass 2 resumes from
the last save, a Ctrl-C there saves the shards written so far and resumes after them; both reuse the
staged units and end byte-identical to an uninterrupted run."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from cook import format as fmt
from cook.cli.main import main
from cook.runner.output_dir import STATE_NAME, stage_dir
from tests.conftest import REPO
from tests.e2e.test_resume_and_scale import COOK, _digest, _pipeline, raw  # noqa: F401


def _committed_shards(out: Path) -> int:
    try:
        return int(json.loads((out / fmt.PROGRESS_DIR / STATE_NAME).read_text())["shard_count"])
    except (FileNotFoundError, json.JSONDecodeError):
        return 0


@pytest.fixture(scope="module")
def two_pass_reference(raw: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:  # noqa: F811
    tmp = tmp_path_factory.mktemp("ref2")
    pipeline = _pipeline(tmp, raw, tmp / "ref", buffer_size="all")
    assert main(["run", str(pipeline), "--workers", "0", "--quiet"]) == 0
    return _digest(tmp / "ref")


def _interrupt_in_pass_two(pipeline: Path, out: Path, sig: signal.Signals) -> int:
    """Start a run, send ``sig`` once pass 2 has written 16 shards; the run's exit code."""
    proc = subprocess.Popen(
        [*COOK, "run", str(pipeline), "--quiet", "--workers", "0"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    while proc.poll() is None and len(list(out.glob("shard-*.tar"))) < 16:
        time.sleep(0.002)
    assert proc.poll() is None, "the run finished before the signal: make the input larger"
    proc.send_signal(sig)
    return proc.wait()


@pytest.mark.slow  # a reference cook, a killed one and its resume: ~5 s
def test_kill_in_pass_two_resumes_identical(raw: Path, two_pass_reference: dict, tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "ref"
    pipeline = _pipeline(tmp_path, raw, out, buffer_size="all")
    assert _interrupt_in_pass_two(pipeline, out, signal.SIGKILL) == -signal.SIGKILL
    staged = sorted(p.name for p in Path(stage_dir(str(out))).glob("*.json"))
    assert staged, "pass 1 staged the units on disk"
    assert main(["run", str(pipeline), "--workers", "0", "--quiet"]) == 0
    assert _digest(out) == two_pass_reference
    assert not (out / fmt.PROGRESS_DIR).exists()


@pytest.mark.slow  # as above
def test_ctrl_c_in_pass_two_keeps_the_shards_written(raw: Path, two_pass_reference: dict, tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "ref"
    pipeline = _pipeline(tmp_path, raw, out, buffer_size="all")
    assert _interrupt_in_pass_two(pipeline, out, signal.SIGINT) == 130
    assert _committed_shards(out) > 0, "the interrupt saved the shards of the one window committed so far"
    assert main(["run", str(pipeline), "--workers", "0", "--quiet"]) == 0
    assert _digest(out) == two_pass_reference
    assert not (out / fmt.PROGRESS_DIR).exists()
