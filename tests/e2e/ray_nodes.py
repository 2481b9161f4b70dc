"""Ray nodes for end-to-end tests: ``ray start --block`` child processes on 127.0.0.1, each in its own
session, found through their descendants and stopped by pid (never ``ray stop``, which would stop
every Ray on the machine); and the process helpers the tests use to watch and signal a ``cook run``."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import REPO

START_WITHIN_S = 300.0  # a generous bound on start-up under load


def env() -> dict[str, str]:
    """The environment of Ray nodes and of the cook runs that join them (Ray 2.60's ``ray start`` turns
    token auth on otherwise)."""
    return {**os.environ, "PYTHONPATH": str(REPO), "RAY_AUTH_MODE": "disabled"}


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A port free now that this process has not handed out before: two binds to port 0 in a row may
    get the same port, and a Ray node given one port for two components refuses to start."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def process_name(process: object) -> str:
    import psutil

    assert isinstance(process, psutil.Process)
    with contextlib.suppress(psutil.NoSuchProcess):
        return str(process.name())
    return ""


def processes(pid: int) -> list:
    """``pid``'s descendants (psutil, which compares start times: a reused pid is not one of them)."""
    import psutil

    with contextlib.suppress(psutil.NoSuchProcess):
        return psutil.Process(pid).children(recursive=True)
    return []


def alive(found: list) -> list:
    """Those still running; a zombie (dead, its exit status not yet collected) is not."""
    import psutil

    running = []
    for process in found:
        with contextlib.suppress(psutil.NoSuchProcess):
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                running.append(process)
    return running


def stop(found: list) -> None:
    for process in found:
        with contextlib.suppress(Exception):
            process.kill()


def actors(roots: list[int]) -> list:
    """The cook actors (``ray::RayWorker``) among the descendants of ``roots``."""
    return [p for root in roots for p in processes(root) if process_name(p).startswith("ray::RayWorker")]


def wait_for_actors(proc: subprocess.Popen[bytes], roots: list[int], log: Path, count: int = 1) -> None:
    """Until ``proc`` runs ``count`` cook actors among ``roots``' descendants."""
    deadline = time.monotonic() + START_WITHIN_S
    while proc.poll() is None and time.monotonic() < deadline:
        if len(actors(roots)) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{len(actors(roots))} of {count} actors started: {log.read_text()[-2000:]}")


def freeze(proc: subprocess.Popen[bytes], log: Path) -> None:
    """SIGSTOP the driver once its actors run: mid-run, however fast the machine, while its Ray runs on
    (a small job would otherwise finish before the test looks; SIGKILL and SIGCONT both reach it)."""
    proc.send_signal(signal.SIGSTOP)
    assert proc.poll() is None, f"finished before it was stopped: {log.read_text()[-2000:]}"


def _agents(pid: int) -> list:
    return [p for p in processes(pid) if process_name(p) in ("ray::DashboardAgent", "ray::RuntimeEnvAgent")]


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    ray_bin = str(Path(sys.executable).with_name("ray"))
    common = [
        "--node-ip-address=127.0.0.1",
        "--num-cpus=1",
        "--disable-usage-stats",
        f"--dashboard-agent-listen-port={free_port()}",
        "--block",
    ]
    with open(log, "wb") as out:
        return subprocess.Popen(
            [ray_bin, "start", *args, *common], env=env(), stdout=out, stderr=out, start_new_session=True
        )


def _wait_for_agents(node: subprocess.Popen[bytes], log: Path, deadline: float) -> None:
    while node.poll() is None and time.monotonic() < deadline and len(_agents(node.pid)) < 2:
        time.sleep(0.2)
    assert node.poll() is None and len(_agents(node.pid)) == 2, log.read_text()[-3000:]


@contextlib.contextmanager
def ray_nodes(
    log_dir: Path, count: int = 1, object_store_bytes: int = 200_000_000
) -> Iterator[tuple[int, list[int], list]]:
    """``count`` Ray nodes of 1 CPU on 127.0.0.1: a head (``ray start --head --block``, in its own temp
    dir) and ``count - 1`` nodes joined to it. Yields the GCS port, the pids of the ``ray start``
    processes and their processes (but idle workers) once every node's agents run; stops them after,
    by pid. Each node's log is ``log_dir/node-<i>.log``."""
    temp_dir = tempfile.mkdtemp(prefix="cookray-", dir="/tmp")  # short: Ray's socket paths must fit
    port = free_port()
    store = f"--object-store-memory={object_store_bytes}"
    nodes: list[subprocess.Popen[bytes]] = []
    found: list = []
    try:
        head = [f"--port={port}", f"--ray-client-server-port={free_port()}", f"--temp-dir={temp_dir}"]
        nodes.append(_start(["--head", "--include-dashboard=false", store, *head], log_dir / "node-0.log"))
        deadline = time.monotonic() + START_WITHIN_S
        while nodes[0].poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            time.sleep(0.2)
        _wait_for_agents(nodes[0], log_dir / "node-0.log", deadline)
        for i in range(1, count):  # one at a time: nodes starting together time out on a small machine
            nodes.append(_start([f"--address=127.0.0.1:{port}", store], log_dir / f"node-{i}.log"))
            _wait_for_agents(nodes[i], log_dir / f"node-{i}.log", deadline)
        found = [
            p for node in nodes for p in processes(node.pid) if "IDLE" not in process_name(p)
        ]  # idle workers come and go
        yield port, [node.pid for node in nodes], found
    finally:
        stop([*found, *(p for node in nodes for p in processes(node.pid))])
        for node in nodes:
            node.kill()
            node.wait()
        shutil.rmtree(temp_dir, ignore_errors=True)
