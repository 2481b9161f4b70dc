"""The embedded Ray's watchdog (issue 33, item 7): it kills the processes that carry its run's mark,
and only those, once the driver's pipe closes; one stderr line when the driver died, none after a stop.
Stand-in processes (``sleep``) carry the marks here; tests/e2e/test_ray_orphans.py kills a real driver."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from cook.runner import ray_watchdog
from cook.runner.ray_watchdog import MARK_ENV, STOP, marked_pids, stop_marked


def _sleeper(mark: str | None) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != MARK_ENV}
    if mark is not None:
        env[MARK_ENV] = mark
    return subprocess.Popen(["sleep", "600"], env=env)


@pytest.fixture
def sleepers() -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    """Two processes of run ``a``, one of run ``b`` (another cook run), one unmarked (anything else)."""
    procs = {"a1": _sleeper("a-1"), "a2": _sleeper("a-1"), "b": _sleeper("b-2"), "none": _sleeper(None)}
    yield procs
    for proc in procs.values():
        proc.kill()
        proc.wait()


def _watchdog(mark: str) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-I", ray_watchdog.__file__, mark, "4242"]
    return subprocess.Popen(args, stdin=subprocess.PIPE, stderr=subprocess.PIPE)


def test_stop_marked_kills_its_mark_only(sleepers: dict[str, subprocess.Popen[bytes]]) -> None:
    assert marked_pids("a-1") == sorted([sleepers["a1"].pid, sleepers["a2"].pid])
    assert stop_marked("a-1") == 2
    assert sleepers["a1"].wait() == sleepers["a2"].wait() == -9
    assert [proc.poll() for name, proc in sleepers.items() if name in ("b", "none")] == [None, None]
    assert marked_pids("a-1") == [] and marked_pids("b-2") == [sleepers["b"].pid]
    assert stop_marked("a-1") == 0


def test_driver_gone_kills_and_says_so(sleepers: dict[str, subprocess.Popen[bytes]]) -> None:
    watchdog = _watchdog("a-1")
    _, err = watchdog.communicate(b"")  # EOF without STOP: the driver died
    assert watchdog.returncode == 0
    assert err.decode() == "cook: stopped 2 Ray processes left by a killed run (pid 4242)\n"
    assert sleepers["a1"].wait() == sleepers["a2"].wait() == -9
    assert sleepers["b"].poll() is None and sleepers["none"].poll() is None


def test_a_stop_kills_leftovers_quietly(sleepers: dict[str, subprocess.Popen[bytes]]) -> None:
    watchdog = _watchdog("b-2")
    _, err = watchdog.communicate(STOP)
    assert (watchdog.returncode, err) == (0, b"")
    assert sleepers["b"].wait() == -9
    assert [sleepers[name].poll() for name in ("a1", "a2", "none")] == [None, None, None]


def test_nothing_left_says_nothing() -> None:
    watchdog = _watchdog("c-3")
    assert watchdog.communicate(b"") == (None, b"") and watchdog.returncode == 0
