"""One ``cook`` job for bench_job, and how its processes' CPU, memory and wall time are counted.

    python -m bench.job_run HWM.json run PIPELINE --input ... --output ...   (the ``cook`` arguments)

Run as a script, this process IS the job's driver: it calls ``cook.cli.main.main`` as the ``cook``
entry point does (one BLAS/OpenMP thread per process unless the environment says otherwise; cook's
stdout is this process's stdout), then writes its peak resident memory (``VmHWM`` of
``/proc/self/status``, counted from this process's exec, so a forking parent's peak is not carried
in as it is in ``ru_maxrss``) to HWM.json.

``run_job`` (called by bench_job, whose process must first ``become_subreaper()``) starts that script
and counts:

- **driver CPU**: once the driver has exited, and before it is reaped (``waitid(WNOWAIT)``), its own
  user + system time from ``/proc/PID/stat`` (every thread, to the last instruction; its children are
  in other fields, not added);
- **job CPU**: the driver's, plus every other process under this one (Ray's gcs_server, raylet, agents,
  the actors; orphans come here, as this process is the child subreaper), polled every
  ``POLL_S`` with the last value kept. Not the kernel's ``RUSAGE_CHILDREN``, even with this process as
  the subreaper: the actors' CPU does not reach it (in a 2-actor run it counted 5.5 of 12.4 CPU s;
  Ray's workers are not reaped through ``wait`` by a process that is itself waited for). A process's
  CPU in its last poll interval before it exits is lost; Ray's processes are idle by then;
- **wall**: from starting the driver to its exit.

Anything left under this process ``LEFTOVER_WAIT_S`` after the driver exits is killed by pid and counted.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

POLL_S = 0.2
RESCAN_EVERY = 5  # polls between two scans for new processes (a scan reads every process's /proc entry)
LEFTOVER_WAIT_S = 60.0
PR_SET_CHILD_SUBREAPER = 36


@dataclass(frozen=True)
class JobStats:
    rc: int
    wall_s: float
    tree_cpu_s: float
    driver_cpu_s: float
    driver_hwm_mib: float
    stdout: str
    stderr: str
    left_behind: int


def become_subreaper() -> None:
    """Orphaned descendants (a Ray process whose parent exited) are re-parented to this process."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


class TreePoller:
    """Polls the own CPU (user + system) of every process under this one but ``skip``; last value kept."""

    def __init__(self, skip: int) -> None:
        self.skip = skip
        self.cpu_s: dict[tuple[int, float], float] = {}  # (pid, create time) -> CPU s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        import psutil

        known: list[psutil.Process] = []
        polls = 0
        while not self._stop.is_set():
            if polls % RESCAN_EVERY == 0:
                with contextlib.suppress(psutil.Error):
                    known = [p for p in psutil.Process().children(recursive=True) if p.pid != self.skip]
            for proc in known:
                try:
                    times = proc.cpu_times()
                    self.cpu_s[(proc.pid, proc.create_time())] = times.user + times.system
                except psutil.Error:
                    pass
            polls += 1
            self._stop.wait(POLL_S)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return sum(self.cpu_s.values())


def proc_stat(pid: int) -> tuple[float, float, int]:
    """(user s, system s, minor faults) of a process (a zombie too), from ``/proc/PID/stat`` fields 14,
    15 and 10."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rpartition(")")[2].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick, int(fields[7])


def _own_cpu_s(pid: int) -> float:
    """utime + stime of a process (a zombie too)."""
    user, system, _ = proc_stat(pid)
    return user + system


def reap_descendants() -> int:
    """Wait for every process still under this one; kill (by pid) those alive after LEFTOVER_WAIT_S.
    Returns how many had to be killed."""
    import psutil

    deadline, killed = time.monotonic() + LEFTOVER_WAIT_S, 0
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return killed
        if pid:
            continue
        if time.monotonic() > deadline:
            for child in psutil.Process().children():
                print(f"bench_job: left behind, killing pid {child.pid}: {child.cmdline()[:3]}", file=sys.stderr)
                child.kill()
                killed += 1
            deadline = float("inf")
        time.sleep(0.05)


def run_job(args: Sequence[str], cwd: Path, env: dict[str, str], scratch: Path) -> JobStats:
    """``cook ARGS`` as ``python -m bench.job_run`` (module docstring); stdout/stderr kept in ``scratch``."""
    scratch.mkdir(parents=True, exist_ok=True)
    hwm_path, out_path, err_path = (scratch / name for name in ("hwm.json", "stdout.txt", "stderr.txt"))
    hwm_path.unlink(missing_ok=True)
    with open(out_path, "w") as out, open(err_path, "w") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "bench.job_run", str(hwm_path), *args], cwd=cwd, env=env, stdout=out, stderr=err
        )
        poller = TreePoller(skip=proc.pid)
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # exited, not yet reaped: /proc still has it
        wall_s = time.perf_counter() - start
        driver_cpu_s = _own_cpu_s(proc.pid)
        rc = proc.wait()
        left_behind = reap_descendants()
        others_cpu_s = poller.stop()
    hwm_kib = json.loads(hwm_path.read_text())["driver_hwm_kib"] if hwm_path.exists() else 0
    return JobStats(
        rc=rc,
        wall_s=wall_s,
        tree_cpu_s=driver_cpu_s + others_cpu_s,
        driver_cpu_s=driver_cpu_s,
        driver_hwm_mib=hwm_kib / 1024,
        stdout=out_path.read_text(),
        stderr=err_path.read_text(),
        left_behind=left_behind,
    )


def _peak_rss_kib() -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def main(hwm_path: str, argv: list[str]) -> int:
    from cook.cli.main import THREAD_ENV
    from cook.cli.main import main as cook_main

    for name in THREAD_ENV:  # what cook.cli.main.entrypoint does before running
        os.environ.setdefault(name, "1")
    rc = cook_main(argv)
    sys.stdout.flush()
    with open(hwm_path, "w") as handle:
        json.dump({"driver_hwm_kib": _peak_rss_kib()}, handle)
    return rc


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1], sys.argv[2:]))
