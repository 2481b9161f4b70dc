"""The output lock is an ``fcntl.flock``: one taker wins, a second is refused naming the holder's
pid, and a holder that dies (even by SIGKILL) leaves nothing to take over."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cook import format as fmt
from cook.errors import ConfigError
from cook.runner.output_dir import OutputLock
from tests.conftest import REPO

HOLD = """
import sys, time
from cook.runner.output_dir import OutputLock
from cook.errors import ConfigError
lock = OutputLock(sys.argv[1])
try:
    lock.acquire()
except ConfigError:
    print("lost", flush=True)
    sys.exit(0)
print("won", flush=True)
while not __import__("os").path.exists(sys.argv[2]):
    time.sleep(0.01)
lock.release()
"""


def _taker(out: Path, stop: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out), str(stop)], stdout=subprocess.PIPE, text=True, env=env, cwd=REPO
    )


def test_second_taker_is_refused_until_the_first_releases(tmp_path: Path) -> None:
    first, second = OutputLock(str(tmp_path)), OutputLock(str(tmp_path))
    first.acquire()
    assert (tmp_path / fmt.LOCK_NAME).read_text() == str(os.getpid())
    with pytest.raises(ConfigError, match=f"locked by running cook pid {os.getpid()}"):
        second.acquire()
    first.release()
    assert not (tmp_path / fmt.LOCK_NAME).exists()
    second.acquire()
    second.release()
    second.release()  # releasing twice is harmless


def test_a_pid_file_without_a_holder_is_no_lock(tmp_path: Path) -> None:
    (tmp_path / fmt.LOCK_NAME).write_text(str(os.getppid()))  # a live pid, but nobody holds the flock
    lock = OutputLock(str(tmp_path))
    lock.acquire()
    assert (tmp_path / fmt.LOCK_NAME).read_text() == str(os.getpid())
    lock.release()


def test_a_killed_holder_leaves_the_lock_free(tmp_path: Path) -> None:
    holder = _taker(tmp_path, tmp_path / "never")
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "won"
        with pytest.raises(ConfigError, match=f"pid {holder.pid}"):
            OutputLock(str(tmp_path)).acquire()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert (tmp_path / fmt.LOCK_NAME).read_text() == str(holder.pid)  # the file outlived it; the lock did not
    lock = OutputLock(str(tmp_path))
    lock.acquire()
    lock.release()


def test_concurrent_takers_of_a_stale_lock_file_one_wins(tmp_path: Path) -> None:
    (tmp_path / fmt.LOCK_NAME).write_text("999999999")  # left by a dead run
    stop = tmp_path / "stop"
    takers = [_taker(tmp_path, stop) for _ in range(4)]
    try:
        answers = sorted(t.stdout.readline().strip() for t in takers if t.stdout is not None)
    finally:
        stop.touch()
        for t in takers:
            t.wait(timeout=60)
    assert answers == ["lost", "lost", "lost", "won"]
