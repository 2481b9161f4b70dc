"""``make train-demo``'s entry point (``python -m cook.train.demo``): cooks the bundled demo, runs SFT
steps through cook.reader and prints the exact per-step line; a demo ``make cook`` (``cook run ...
--overwrite``) just cooked is reused as it is, a different run in the directory is re-cooked, an empty
one cooked, and the demo prints none of the known third-party warnings (Megatron-Core's Transformer
Engine / Apex fallbacks, torch's ``pin_memory`` without an accelerator)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cook import format as fmt
from cook.cli.main import main as cook_main
from cook.train import demo
from tests.conftest import REPO

LINE = re.compile(
    r"step (?P<step>\d+) loss (?P<loss>\d+\.\d{4}) aux (?P<aux>\d+\.\d{4}) aux weight: "
    r"supervised=(?P<supervised>\d+\.\d{6}) legacy=(?P<legacy>\d+\.\d{3}) tokens/s (?P<rate>\d+)"
)
KNOWN_WARNINGS = ("Transformer Engine and Apex are not installed", "'pin_memory' argument is set as true")

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def _mtimes(out: Path) -> tuple[int, int]:
    return os.stat(out / fmt.MANIFEST_NAME).st_mtime_ns, os.stat(out / fmt.RUN_RECORD_NAME).st_mtime_ns


def _check_lines(stdout: str, steps: int) -> None:
    lines = stdout.splitlines()
    assert len(lines) == steps
    for number, line in enumerate(lines, start=1):
        match = LINE.fullmatch(line)
        assert match, line
        assert int(match["step"]) == number and match["supervised"] == "1.000000"
        assert float(match["legacy"]) > 1.0 and float(match["aux"]) > 0 and int(match["rate"]) > 0


@pytest.mark.slow  # cooks the demo twice and trains: ~12 s
def test_train_demo_reuses_make_cook_then_cooks_what_differs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.chdir(REPO)  # the demo pipeline's paths are relative to the repository root
    out = tmp_path / "demo"
    # `make cook`, then `make train-demo` as a fresh process: the cooked run is reused untouched
    assert (
        cook_main(["run", "pipelines/demo.yaml", "--output", str(out), "--overwrite", "--workers", "0", "--quiet"]) == 0
    )
    capsys.readouterr()
    cooked = _mtimes(out)
    argv = ["--out", str(out), "--steps", "2", "--hidden", "32"]
    command = [sys.executable, "-m", "cook.train.demo", *argv, "--loss-normalization", "sample", "--micro-batches", "1"]
    reused = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert reused.returncode == 0, reused.stderr
    assert f"train-demo: reusing {out} (cook run: the same run finished there)" in reused.stderr
    assert _mtimes(out) == cooked and not (out / ".train-demo.json").exists()
    assert [warning for warning in KNOWN_WARNINGS if warning in reused.stderr] == []
    _check_lines(reused.stdout, 2)

    changed = tmp_path / "demo.yaml"  # another run in out/demo: re-cooked with --overwrite
    changed.write_text((REPO / "pipelines" / "demo.yaml").read_text().replace("seq_len: 4096", "seq_len: 2048"))
    assert demo.main(["--pipeline", str(changed), *argv]) == 0
    recooked = capsys.readouterr()
    assert (
        f"train-demo: cooking {changed} into {out} with --overwrite (output.dir: {str(out)!r} holds a finished run "
        "(packing.seq_len differs); pass --overwrite to replace it)"
    ) in recooked.err
    assert json.loads((out / fmt.MANIFEST_NAME).read_text())["seq_len"] == 2048
    _check_lines(recooked.out, 2)

    fresh = tmp_path / "fresh"  # nothing there: cooked
    assert demo.main(["--out", str(fresh), "--steps", "1", "--hidden", "32"]) == 0
    first = capsys.readouterr()
    assert f"train-demo: cooked pipelines/demo.yaml into {fresh}" in first.err
    _check_lines(first.out, 1)
