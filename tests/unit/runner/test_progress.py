"""Progress within a unit: a one-file cook moves the bar before the file is done, with either
executor, and ends on exactly the plan's bytes and the records read; no ETA until there is a rate;
a status line never lands inside the bar's line."""

from __future__ import annotations

import io
import itertools
import os
import sys
from pathlib import Path
from typing import ClassVar

import pytest

from cook.config import config_from_dict
from cook.runner import pipeline, progress, ray_executor
from cook.runner.local import LocalExecutor
from cook.runner.progress import Progress
from cook.runner.ray_executor import RayExecutor
from tests.conftest import pipeline_dict, write_jsonl

RECORDS = 400


class Recorder(Progress):
    """A Progress that keeps every update: ``(amount, counts)``."""

    made: ClassVar[list[Recorder]] = []

    def __init__(self, total: int, *args, **kwargs) -> None:
        super().__init__(total, *args, **kwargs)
        self.updates: list[tuple[int, dict[str, int]]] = []
        Recorder.made.append(self)

    @property
    def shown(self) -> bool:  # it keeps every update: the reports are wanted
        return True

    def update(self, amount: int, **counts: int) -> None:
        self.updates.append((amount, counts))
        super().update(amount, **counts)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


def _one_file(tmp_path: Path) -> Path:
    raw = tmp_path / "raw"
    raw.mkdir()
    rows = [
        {
            "messages": [
                {"role": "user", "content": f"question {i} " + "word " * 20},
                {"role": "assistant", "content": "a"},
            ]
        }
        for i in range(RECORDS)
    ]
    write_jsonl(raw / "one.jsonl", rows)
    return raw


def _cook_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, factory) -> Recorder:
    raw = _one_file(tmp_path)
    config = config_from_dict(pipeline_dict(str(raw), str(tmp_path / "out")))
    Recorder.made = []
    monkeypatch.setattr(pipeline, "Progress", Recorder)
    summary = pipeline.run_pipeline(config, factory, progress=False)
    assert summary.counts["records_in"] == RECORDS
    (bar,) = Recorder.made
    assert bar.total == os.path.getsize(raw / "one.jsonl")
    return bar


def _check_within_unit(bar: Recorder) -> None:
    """Reports came before the unit's summary (the one update with tokens), some of them from the middle
    of the file, and the totals are exact."""
    (last,) = [i for i, (_, counts) in enumerate(bar.updates) if "tokens" in counts]
    partial = bar.updates[:last]
    assert all(amount >= 0 and counts["records"] >= 0 for amount, counts in partial)
    done = list(itertools.accumulate(amount for amount, _ in partial))
    records = list(itertools.accumulate(counts["records"] for _, counts in partial))
    assert any(0 < d < bar.total for d in done) and any(0 < r < RECORDS for r in records)
    assert done[-1] <= bar.total and records[-1] <= RECORDS
    assert bar.done == bar.total and bar.counts["records"] == RECORDS


def test_in_process_cook_reports_within_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bar = _cook_recorded(tmp_path, monkeypatch, lambda c: LocalExecutor(c, report_interval_s=0.0))
    _check_within_unit(bar)
    assert len(bar.updates) > RECORDS / 2  # interval 0: a report after every record (bar the ones not moving)


def test_ray_cook_reports_within_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ray_session) -> None:
    """The actor's reports are on the board before its answer (it waits for its last post), and the
    driver takes them before it hands on the unit (``UNIT_POLL_S`` 0: always), so some come first."""
    _TakesCounted.takes = 0
    monkeypatch.setattr(ray_executor, "UNIT_POLL_S", 0.0)
    bar = _cook_recorded(tmp_path, monkeypatch, lambda c: _TakesCounted(c, None, 1, report_interval_s=0.0))
    _check_within_unit(bar)
    assert _TakesCounted.takes > 0  # progress is shown: the driver takes the reports (and the count sees it)


class _TakesCounted(RayExecutor):
    """A RayExecutor that counts the driver's takes from the progress board."""

    takes = 0

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        board = self._board

        class Counting:
            def __getattr__(self, name: str):
                if name == "take":
                    _TakesCounted.takes += 1
                return getattr(board, name)

        self._board, self._real_board = Counting(), board

    def close(self) -> None:
        self._board = self._real_board
        super().close()


@pytest.mark.slow  # a Ray cook, ~8 s; the progress board under Ray stays in make test (test_ray_cook_reports_within_the_file)
def test_ray_cook_without_progress_never_takes_reports(tmp_path: Path, ray_session) -> None:
    """``--quiet``: nothing shows progress, so the driver takes no reports (the board keeps none)."""
    raw = str(_one_file(tmp_path))
    config = config_from_dict(pipeline_dict(raw, str(tmp_path / "out")))
    _TakesCounted.takes = 0
    summary = pipeline.run_pipeline(config, lambda c: _TakesCounted(c, None, 1, report_interval_s=0.0), progress=False)
    assert summary.counts["records_in"] == RECORDS and _TakesCounted.takes == 0  # shown: see the test above


def test_no_eta_until_a_rate(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    clock = Clock()
    monkeypatch.setattr(progress, "time", clock)
    bar = Progress(1_000_000, interval_s=0.0)
    clock.now += 30  # start-up: no work yet
    bar.update(0, records=0)
    bar.update(100_000, records=10)  # the first work reported: the rate starts here
    clock.now += 0.5
    bar.update(50_000, records=5)
    clock.now += 1.5
    bar.update(150_000, records=15)  # 200 kB in 2 s since the first report: 100 kB/s, 700 kB left
    lines = capsys.readouterr().err.splitlines()
    assert [("ETA" in line) for line in lines] == [False, False, False, True]
    assert lines[-1] == "cook: 30% of 1.0 MB, 30 records (10/s), ETA 7s"  # 20 records in 2 s


def test_status_line_is_never_inside_the_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    bar = Progress(4_000_000)
    bar.update(1_000_000, records=10)
    message = "cook: starting Ray (2 actors)..."
    Progress.status(message)
    bar.update(1_000_000, records=10)
    bar.close()
    text = terminal.getvalue()
    (line,) = [line for line in text.split("\n") if message in line]
    assert line.split("\r")[-1] == message  # the bar was wiped off the line first
    before, after = text.split(message)
    assert "cook:   0%|" in before and after.startswith("\n\rcook:")  # and drawn again below it
    assert "50%" in after
