"""Issue 14: the per-unit record budget (SIGALRM handler installed once per unit) still stops a runaway record as a
``timeout`` reject, lets the records around it through, and restores the previous handler."""

from __future__ import annotations

import signal
import time

import pytest

from cook.errors import Rejected, RejectReason
from cook.runner.worker import RecordBudget
from cook.types import RawRecord

RAW = RawRecord(source="a.jsonl#1", fields={}, origin="a.jsonl")


def _spin(raw: RawRecord) -> str:
    give_up = time.monotonic() + 30  # a broken budget fails the test instead of hanging it
    while time.monotonic() < give_up:
        pass
    return "not stopped"


def test_runaway_record_becomes_timeout_and_others_pass() -> None:
    before = signal.getsignal(signal.SIGALRM)
    budget = RecordBudget(0.02)
    with budget.armed():
        assert budget.run(lambda raw: ("ok", raw.source), RAW) == ("ok", "a.jsonl#1")
        with pytest.raises(Rejected) as caught:
            budget.run(_spin, RAW)
        assert caught.value.reason == RejectReason.TIMEOUT
        assert budget.run(lambda raw: "next", RAW) == "next"
        time.sleep(0.1)  # ticks between records raise nothing
    assert signal.getsignal(signal.SIGALRM) == before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_unarmed_budget_sets_no_timer_and_stops_nothing() -> None:
    """Outside ``armed()`` (a worker thread, or no budget in force) a record longer than the budget runs
    to its end: no timer is set and the process's SIGALRM handler is left alone."""
    before = signal.getsignal(signal.SIGALRM)
    budget = RecordBudget(0.01)

    def slow(raw: RawRecord) -> tuple[int, tuple[float, float]]:
        time.sleep(0.05)  # five budgets
        return 7, signal.getitimer(signal.ITIMER_REAL)

    assert budget.run(slow, RAW) == (7, (0.0, 0.0))
    assert signal.getsignal(signal.SIGALRM) == before
