"""The embedded Ray's watchdog (issue 33, item 7): once the driver's pipe closes it kills the processes
of its run's Ray (those marked, and their descendants, even orphaned since), and only those; one
stderr line when the driver died, none after a stop. Stand-in processes (``sleep``) carry the marks
here; tests/e2e/test_ray_orphans.py kills a real driver."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cook.runner import ray_watchdog
from cook.runner.ray_watchdog import MARK_ENV, STOP, ray_processes, stop_ray_processes

# a marked shell whose child runs with an empty environment (as a process title can leave it)
PARENT_OF_UNMARKED = "env -i sleep 600 & wait"


def _start(mark: str | None, *command: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != MARK_ENV}
    if mark is not None:
        env[MARK_ENV] = mark
    return subprocess.Popen(list(command or ("sleep", "600")), env=env)


@pytest.fixture
def sleepers() -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    """Two processes of run ``a``, one of run ``b`` (another cook run), one unmarked (anything else)."""
    procs = {"a1": _start("a-1"), "a2": _start("a-1"), "b": _start("b-2"), "none": _start(None)}
    yield procs
    for proc in procs.values():
        proc.kill()
        proc.wait()


def _watchdog(mark: str) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-I", ray_watchdog.__file__, mark, "4242"]
    return subprocess.Popen(args, stdin=subprocess.PIPE, stderr=subprocess.PIPE)


def test_stop_kills_its_ray_only(sleepers: dict[str, subprocess.Popen[bytes]]) -> None:
    assert sorted(ray_processes("a-1", {})) == sorted([sleepers["a1"].pid, sleepers["a2"].pid])
    assert stop_ray_processes("a-1", {}) == 2
    assert sleepers["a1"].wait() == sleepers["a2"].wait() == -9
    assert [proc.poll() for name, proc in sleepers.items() if name in ("b", "none")] == [None, None]
    assert ray_processes("a-1", {}) == {} and list(ray_processes("b-2", {})) == [sleepers["b"].pid]
    assert stop_ray_processes("a-1", {}) == 0


def _sleeping_child(proc: subprocess.Popen[bytes]) -> int:
    """The pid of ``proc``'s one child once it runs ``sleep 600`` (``env -i`` applied)."""
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    while (
        not children.read_text().split()
        or Path(f"/proc/{children.read_text().split()[0]}/cmdline").read_bytes() != b"sleep\x00600\x00"
    ):
        assert proc.poll() is None
        time.sleep(0.01)
    return int(children.read_text().split()[0])


def test_descendants_count_even_unmarked_and_orphaned() -> None:
    shell = _start("c-3", "sh", "-c", PARENT_OF_UNMARKED)
    try:
        child = _sleeping_child(shell)
        assert MARK_ENV.encode() not in Path(f"/proc/{child}/environ").read_bytes()
        known = ray_processes("c-3", {})
        assert sorted(known) == sorted([shell.pid, child])
        shell.kill()  # the child is orphaned: no marked ancestor any more
        shell.wait()
        assert ray_processes("c-3", {}) == {}
        assert ray_processes("c-3", known) == {child: known[child]}
        assert stop_ray_processes("c-3", known) == 1
        assert ray_processes("c-3", known) == {}
    finally:
        shell.kill()
        shell.wait()


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
    watchdog = _watchdog("d-4")
    assert watchdog.communicate(b"") == (None, b"") and watchdog.returncode == 0
