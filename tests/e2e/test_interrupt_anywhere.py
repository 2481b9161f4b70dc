"""An interrupt at any moment, then a rerun, ends byte-identical to an uninterrupted run (issue 13):
SIGINT and SIGKILL at 20 seeded random moments of a multi-window run, each followed by a rerun,
and ``cook validate`` passes each time."""

from __future__ import annotations

import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from cook import format as fmt
from cook.cli.main import main
from tests.conftest import REPO
from tests.e2e.test_resume_and_scale import COOK, _digest, _pipeline, raw, reference  # noqa: F401

MOMENTS = 20


def _interrupt_at(pipeline: Path, delay_s: float, sig: int) -> int:
    proc = subprocess.Popen(
        [*COOK, "run", str(pipeline), "--quiet", "--workers", "0"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(delay_s)
    if proc.poll() is None:
        proc.send_signal(sig)
    return proc.wait()


@pytest.mark.slow
def test_twenty_random_interrupts(raw: Path, reference: dict, tmp_path: Path) -> None:  # noqa: F811
    rng = random.Random(13)
    for i in range(MOMENTS):
        out = tmp_path / f"run{i}" / "ref"
        out.parent.mkdir()
        pipeline = _pipeline(out.parent, raw, out)
        sig = signal.SIGINT if i % 2 else signal.SIGKILL
        code = _interrupt_at(pipeline, rng.uniform(0.3, 3.0), sig)
        assert code in (0, 130, -signal.SIGKILL, -signal.SIGINT), (
            i,
            sig,
            code,
        )  # -SIGINT: a shell reports it as 130 too
        assert main(["run", str(pipeline), "--workers", "0", "--quiet"]) == 0  # resumed, or it had finished
        assert (out / fmt.MANIFEST_NAME).exists()
        assert _digest(out) == reference, (i, sig)
        assert main(["validate", str(out), "--quiet"]) == 0, (i, sig)
