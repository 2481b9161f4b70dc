"""Stop the processes of cook's embedded Ray once the driver that started them is gone.

    python -I ray_watchdog.py MARK DRIVER_PID     stdin: a pipe whose write end only the driver holds

The driver (``cook.runner.ray_connect.start_ray``) starts this watchdog before ``ray.init`` and puts
``MARK_ENV=MARK``, a value made for that one run, in the environment of the processes ``ray.init``
starts (the GCS, the raylet, Ray's monitors). The processes of that Ray are those marked and their
descendants: Ray's agents and workers are the raylet's children, and their own environment may not
be readable (a process title set over it), so the watchdog records the tree every ``POLL_S`` while it
waits: once the raylet is gone, its orphans are known by pid and start time. It reads its stdin to
the end:

- ``STOP`` then EOF: the driver shut Ray down (``stop_ray``); whatever of that Ray is still there is
  killed, and the watchdog exits without a word.
- EOF alone: the driver died (``kill -9``, a crash). Ray's GCS and raylet die with it, but its agents
  (DashboardAgent, RuntimeEnvAgent) wait a minute for the dead GCS before they exit; the watchdog
  kills them and any other process of that Ray (SIGKILL), and one stderr line (the driver's stderr)
  says ``cook: stopped N Ray processes left by a killed run (pid P)``.

Nothing else is touched: a user's own cluster, a joined ``--ray-address`` and another cook run's Ray
carry no mark or another one, and descend from no process of this Ray. Each process is signalled
through a pidfd opened before its start time is checked, so a reused pid is never hit. Standard
library only: it runs as a script (``-I``, without cook on the path) in its own session, so a Ctrl-C
or hang-up sent to the driver's process group does not reach it. Linux only (``/proc``).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time

MARK_ENV = "COOK_RAY_RUN"
STOP = b"stop"
POLL_S = 0.5  # how often the tree of the Ray's processes is recorded
SETTLE_S = 10.0  # how long to look again for processes of the Ray started while killing

Known = dict[int, int]  # pid -> start time (clock ticks after boot) of a process of the Ray


def _stat(pid: int) -> tuple[int, int] | None:
    """``(parent pid, start time)`` of ``pid``; None once it is gone (or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == b"Z" else (int(fields[1]), int(fields[19]))


def _marked(pid: int, entry: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return entry in handle.read().split(b"\0")
    except OSError:  # gone, or another user's
        return False


def ray_processes(mark: str, known: Known, driver_pid: int = 0, unmarked: set[tuple[int, int]] | None = None) -> Known:
    """The processes of the Ray marked ``mark`` now: those marked, those in ``known`` (the same pid and
    start time), and the descendants of either; pid -> start time. ``unmarked`` remembers the
    processes whose environment was read without the mark, so that each is read once; but for the
    children of ``driver_pid``, which may be read between their fork and the exec that marks them."""
    entry = f"{MARK_ENV}={mark}".encode()
    unmarked = set() if unmarked is None else unmarked
    stats = {pid: stat for pid in map(int, filter(str.isdigit, os.listdir("/proc"))) if (stat := _stat(pid))}
    found: Known = {}
    for pid, (parent, start) in stats.items():
        if known.get(pid) == start or ((pid, start) not in unmarked and _marked(pid, entry)):
            found[pid] = start
        elif parent != driver_pid:
            unmarked.add((pid, start))
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in stats.items():
        children.setdefault(parent, []).append(pid)
    todo = list(found)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found[child] = stats[child][1]
                todo.append(child)
    found.pop(os.getpid(), None)
    return found


def stop_ray_processes(mark: str, known: Known) -> int:
    """SIGKILL every process of the Ray marked ``mark`` (looking again until none is left, or
    ``SETTLE_S``); how many were killed."""
    killed: set[int] = set()
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        known = ray_processes(mark, known)
        if not known:
            break
        killed.update(pid for pid, start in known.items() if _kill(pid, start))
        time.sleep(0.05)
    return len(killed)


def _kill(pid: int, start: int) -> bool:
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:  # gone
        return False
    try:
        stat = _stat(pid)
        if stat is None or stat[1] != start:  # gone, or the pid now names another process
            return False
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        return True
    except ProcessLookupError:  # it ended meanwhile
        return False
    finally:
        os.close(pidfd)


def stopped_line(stopped: int, driver_pid: int) -> str:
    """The line said when the driver died and ``stopped`` processes of its Ray were left.

    >>> stopped_line(2, 4242)
    'cook: stopped 2 Ray processes left by a killed run (pid 4242)'
    """
    return f"cook: stopped {stopped} Ray process{'es' * (stopped != 1)} left by a killed run (pid {driver_pid})"


def watch(mark: str, driver_pid: int) -> tuple[bytes, Known]:
    """Record the Ray's processes every ``POLL_S`` until stdin ends; what was said, and the last record."""
    unmarked: set[tuple[int, int]] = set()
    said, known = b"", ray_processes(mark, {}, driver_pid, unmarked)
    while True:
        if select.select([0], [], [], POLL_S)[0]:
            data = os.read(0, 64)
            if not data:
                return said, known
            said += data
        known = ray_processes(mark, known, driver_pid, unmarked)


def main(argv: list[str]) -> int:
    mark, driver_pid = argv[0], int(argv[1])
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    said, known = watch(mark, driver_pid)
    stopped = stop_ray_processes(mark, known)
    if said != STOP and stopped:
        with contextlib.suppress(OSError):
            print(stopped_line(stopped, driver_pid), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
