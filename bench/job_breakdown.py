"""One ``cook`` job's CPU (user, system) and minor page faults by kind of process: the driver, the Ray
actors, Ray's own processes (raylet, gcs_server, dashboard, log monitor, ...).

    python -m bench.job_breakdown run PIPELINE --input ... --output ... [--workers N ...]

The arguments are ``cook``'s. Run a big and a small input and subtract, as the benches do, to get
marginal figures. Every process under this one is polled every ``POLL_S`` (last value kept, so a
process's last interval before it exits is lost; Ray's processes are idle by then); the driver is read
from ``/proc`` after it exited and before it is reaped. Used for the breakdown under bench_ceiling.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter

from bench.common import REPO
from bench.job_run import become_subreaper, proc_stat, reap_descendants

POLL_S = 0.2
KINDS = ("gcs_server", "raylet", "dashboard", "log_monitor", "runtime_env", "monitor.py")


def _kind(cmdline: str) -> str:
    if "ray::" in cmdline or "default_worker" in cmdline:
        return "actor"
    return next((kind for kind in KINDS if kind in cmdline), "other")


def breakdown(args: list[str]) -> dict[str, dict[str, float]]:
    """``cook ARGS`` -> {kind: {"user": s, "system": s, "minflt": n}}, plus {"wall": {"s": ...}}."""
    import psutil

    become_subreaper()
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false"}
    start = time.perf_counter()
    driver = subprocess.Popen(
        [sys.executable, "-m", "cook.cli.main", *args], cwd=REPO, env=env, stdout=subprocess.DEVNULL
    )
    seen: dict[tuple[int, float], tuple[str, tuple[float, float, int]]] = {}
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            for proc in psutil.Process().children(recursive=True):
                if proc.pid == driver.pid:
                    continue
                try:
                    key = (proc.pid, proc.create_time())
                    kind = seen[key][0] if key in seen and seen[key][0] != "other" else _kind(" ".join(proc.cmdline()))
                    seen[key] = (kind, proc_stat(proc.pid))
                except (psutil.Error, OSError):
                    pass
            stop.wait(POLL_S)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    os.waitid(os.P_PID, driver.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: /proc still has it
    wall = time.perf_counter() - start
    own = proc_stat(driver.pid)
    driver.wait()
    reap_descendants()
    stop.set()
    poller.join()
    totals: dict[str, Counter[str]] = {"driver": Counter(user=own[0], system=own[1], minflt=own[2])}
    for kind, (user, system, minflt) in seen.values():
        totals.setdefault(kind, Counter()).update(user=user, system=system, minflt=minflt)
    return {"wall": {"s": wall}, **{kind: dict(counts) for kind, counts in totals.items()}}


if __name__ == "__main__":
    print(json.dumps(breakdown(sys.argv[1:]), indent=1, sort_keys=True))
