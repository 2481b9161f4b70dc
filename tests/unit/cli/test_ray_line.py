"""The Ray status line says "starting" only when cook starts Ray itself, and goes above the bar."""

import io
import sys
from pathlib import Path

import pytest

from cook.cli.run_cmd import executor_factory, ray_line
from cook.config import config_from_dict
from cook.runner.progress import Progress
from tests.conftest import pipeline_dict


def test_starting_only_for_an_embedded_ray() -> None:
    assert ray_line(None, 2) == "cook: starting Ray (2 actors)..."
    assert ray_line("local", 1) == "cook: starting Ray (1 actor)..."
    assert ray_line("10.0.0.5:6379", 3) == "cook: joining Ray at 10.0.0.5:6379 (3 actors)..."
    assert ray_line("auto", 2) == "cook: joining Ray at auto (2 actors)..."


def test_the_ray_line_goes_above_a_live_bar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ray_session) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    bar = Progress(100)
    executor = executor_factory(None, 1, quiet=False)(config_from_dict(pipeline_dict(str(tmp_path), str(tmp_path))))
    executor.close()
    bar.close()
    (line,) = [line for line in terminal.getvalue().split("\n") if "Ray" in line]
    assert line.split("\r")[-1] == "cook: starting Ray (1 actor)..."
