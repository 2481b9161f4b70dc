"""``make train-demo``'s entry point (``python -m cook.train.demo``): cooks the bundled demo, runs SFT
steps through cook.reader and prints the exact per-step line; a second run reuses the cooked demo
while it is current (same pipeline, inputs, tokenizer, cook version) and re-cooks when it is not."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from cook import format as fmt
from cook.train import demo
from tests.conftest import REPO

LINE = re.compile(
    r"step (?P<step>\d+) loss (?P<loss>\d+\.\d{4}) aux (?P<aux>\d+\.\d{4}) aux weight: "
    r"supervised=(?P<supervised>\d+\.\d{6}) legacy=(?P<legacy>\d+\.\d{3}) tokens/s (?P<rate>\d+)"
)

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def test_train_demo_cooks_then_reuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(REPO)  # the demo pipeline's paths are relative to the repository root
    out = tmp_path / "demo"
    argv = ["--out", str(out), "--steps", "2", "--hidden", "32"]
    assert demo.main(argv) == 0
    first = capsys.readouterr()
    lines = first.out.splitlines()
    assert len(lines) == 2 and "cooking pipelines/demo.yaml" in first.err
    for number, line in enumerate(lines, start=1):
        match = LINE.fullmatch(line)
        assert match, line
        assert int(match["step"]) == number and match["supervised"] == "1.000000"
        assert float(match["legacy"]) > 1.0 and float(match["aux"]) > 0 and int(match["rate"]) > 0
    assert demo.is_current(str(out), "pipelines/demo.yaml")

    manifest_mtime = os.stat(out / fmt.MANIFEST_NAME).st_mtime_ns
    assert demo.main([*argv, "--loss-normalization", "sample", "--micro-batches", "1"]) == 0
    second = capsys.readouterr()
    assert "reusing" in second.err and os.stat(out / fmt.MANIFEST_NAME).st_mtime_ns == manifest_mtime
    assert all(LINE.fullmatch(line) for line in second.out.splitlines())

    changed = tmp_path / "demo.yaml"
    shutil.copy(REPO / "pipelines" / "demo.yaml", changed)
    assert demo.is_current(str(out), str(changed))  # same bytes, same stamp
    changed.write_text(changed.read_text().replace("seq_len: 4096", "seq_len: 2048"))
    assert not demo.is_current(str(out), str(changed))
    (out / demo.STAMP_NAME).unlink()
    assert not demo.is_current(str(out), "pipelines/demo.yaml")
