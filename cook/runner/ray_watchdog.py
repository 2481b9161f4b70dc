"""Stop the processes of cook's embedded Ray once the driver that started them is gone.

    python -I ray_watchdog.py MARK DRIVER_PID     stdin: a pipe whose write end only the driver holds

The driver (``cook.runner.ray_connect.start_ray``) starts this watchdog before ``ray.init`` and
gives every process of its embedded Ray ``MARK_ENV=MARK`` in the environment, a value made for that
one run: the GCS, the raylet, Ray's agents and workers, and whatever they start. The watchdog reads
its stdin to the end:

- ``STOP`` then EOF: the driver shut Ray down (``stop_ray``); any marked process still there is killed,
  and the watchdog exits without a word.
- EOF alone: the driver died (``kill -9``, a crash). Ray's GCS and raylet die with it, but its agents
  (DashboardAgent, RuntimeEnvAgent) wait a minute for the dead GCS before they exit, and workers may
  linger; every marked process is killed (SIGKILL) and one stderr line (on the driver's stderr) says
  ``cook: stopped N Ray processes left by a killed run (pid P)``.

Processes are found by the mark in ``/proc/PID/environ``, so only this run's Ray is touched: a user's
own cluster, a joined ``--ray-address`` and another cook run carry no mark or another one. Each is
signalled through a pidfd opened before its environment is read, so a reused pid is never hit.
Standard library only: it runs as a script (``-I``, without cook on the path) in its own session,
so a Ctrl-C or hang-up sent to the driver's process group does not reach it. Linux only (``/proc``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

MARK_ENV = "COOK_RAY_RUN"
STOP = b"stop"
SETTLE_S = 10.0  # how long to look again for marked processes started while killing


def marked_pids(mark: str) -> list[int]:
    """The pids whose environment holds ``MARK_ENV=mark`` (of those this user may read), ascending."""
    entry = f"{MARK_ENV}={mark}".encode()
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit() and _holds(int(name), entry):
            pids.append(int(name))
    return sorted(pids)


def _holds(pid: int, entry: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return entry in handle.read().split(b"\0")
    except OSError:  # gone, or another user's
        return False


def stop_marked(mark: str) -> int:
    """SIGKILL every process marked ``mark`` (looking again until none is left, or ``SETTLE_S``); how many."""
    entry = f"{MARK_ENV}={mark}".encode()
    killed: set[int] = set()
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        found = [pid for pid in marked_pids(mark) if pid != os.getpid()]
        if not found:
            break
        for pid in found:
            if _kill_if_marked(pid, entry):
                killed.add(pid)
        time.sleep(0.05)
    return len(killed)


def _kill_if_marked(pid: int, entry: bytes) -> bool:
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:  # gone
        return False
    try:
        if not _holds(pid, entry):  # the pid now names another process
            return False
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        return True
    except ProcessLookupError:  # it ended meanwhile
        return False
    finally:
        os.close(pidfd)


def stopped_line(stopped: int, driver_pid: int) -> str:
    """The line said when the driver died and ``stopped`` processes were left.

    >>> stopped_line(2, 4242)
    'cook: stopped 2 Ray processes left by a killed run (pid 4242)'
    """
    return f"cook: stopped {stopped} Ray process{'es' * (stopped != 1)} left by a killed run (pid {driver_pid})"


def main(argv: list[str]) -> int:
    mark, driver_pid = argv[0], int(argv[1])
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    said = sys.stdin.buffer.read()
    stopped = stop_marked(mark)
    if said != STOP and stopped:
        with contextlib.suppress(OSError):
            print(stopped_line(stopped, driver_pid), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
