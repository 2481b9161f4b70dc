"""No orphaned Ray processes after ``kill -9`` of the driver (issue 33, item 7).

Killed mid-run, a ``cook run`` that started its own Ray leaves nothing behind: its watchdog
(``cook.runner.ray_watchdog``) kills every process of that Ray and says so on the driver's stderr.
Without it, Ray's agents outlived the driver by about a minute, so the bounded wait below (30 s, a
generous bound on the watchdog's work, not a timing assertion) tells the two apart. Nothing else is
touched: another cook run's own Ray, a user's ``ray start`` cluster, and a run joined to it
(``--ray-address``) carry on and finish. The killed run's rerun is byte-identical to a run that was
never interrupted.

Ray runs only in child processes here, each stopped by the test, by pid; all bind to 127.0.0.1."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from cook.cli.main import main
from cook.runner import ray_watchdog
from cook.runner.ray_watchdog import ray_processes
from tests.conftest import REPO, pipeline_dict, write_jsonl
from tests.e2e.test_resume_and_scale import _digest, _records

COOK = [sys.executable, "-m", "cook.cli.main"]
GONE_WITHIN_S = 30.0  # Ray's agents alone outlive a killed driver by ~60 s
START_WITHIN_S = 300.0  # a generous bound on start-up under load


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "RAY_AUTH_MODE": "disabled"}


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("raw")
    for name in ("a", "b", "c"):
        write_jsonl(root / f"{name}.jsonl", _records(1200))
    return root


def _pipeline(tmp: Path, raw: Path, name: str) -> tuple[Path, Path]:
    """A pipeline writing to ``tmp/name/out`` (the same basename for every run: it is in the index)."""
    out = tmp / name / "out"
    out.parent.mkdir(parents=True)
    data = pipeline_dict(
        str(raw),
        str(out),
        packing={"seq_len": 512, "buffer_size": 60},
        output={"shard_size": 2},
        input={"unit_bytes": 40_000},
        ray={"num_actors": 2, "cpus_per_actor": 0.5},
    )
    path = tmp / name / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    return path, out


@pytest.fixture(scope="module")
def reference(raw: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    pipeline, out = _pipeline(tmp_path_factory.mktemp("ref"), raw, "ref")
    assert main(["run", str(pipeline), "--workers", "0", "--quiet"]) == 0
    return _digest(out)


def _cook(pipeline: Path, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    with open(log, "wb") as err:
        return subprocess.Popen(
            [*COOK, "run", str(pipeline), "--quiet", *extra],
            cwd=REPO,
            env=_env(),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )


def _wait_for_actors(proc: subprocess.Popen[bytes], root: int, log: Path) -> None:
    """Until ``proc`` runs: a cook actor (``ray::RayWorker``) among ``root``'s descendants."""
    deadline = time.monotonic() + START_WITHIN_S
    while proc.poll() is None and time.monotonic() < deadline:
        if any(_name(p).startswith("ray::RayWorker") for p in _processes(root)):
            return
        time.sleep(0.05)
    raise AssertionError(f"no actor started: {log.read_text()[-2000:]}")


def _freeze(proc: subprocess.Popen[bytes], log: Path) -> None:
    """SIGSTOP the driver once its actors run: mid-run, however fast the machine, while its Ray runs on
    (a small job would otherwise finish before the test looks; SIGKILL and SIGCONT both reach it)."""
    proc.send_signal(signal.SIGSTOP)
    assert proc.poll() is None, f"finished before it was stopped: {log.read_text()[-2000:]}"


def _name(process: object) -> str:
    import psutil

    assert isinstance(process, psutil.Process)
    with contextlib.suppress(psutil.NoSuchProcess):
        return str(process.name())
    return ""


def _processes(pid: int) -> list:
    """``pid``'s descendants (psutil, which compares start times: a reused pid is not one of them)."""
    import psutil

    with contextlib.suppress(psutil.NoSuchProcess):
        return psutil.Process(pid).children(recursive=True)
    return []


def _mark(processes: list) -> str:
    """The mark of a driver's embedded Ray, read from its watchdog's command line."""
    for process in processes:
        args = process.cmdline()
        if len(args) >= 4 and args[2] == ray_watchdog.__file__:
            return str(args[3])
    raise AssertionError("the run has no Ray watchdog")


def _kill_driver(proc: subprocess.Popen[bytes], log: Path) -> tuple[list, str]:
    """``kill -9`` the driver; wait (bounded) until its Ray is gone; its processes just before, and stderr."""
    processes = _processes(proc.pid)
    mark = _mark(processes)
    assert len(ray_processes(mark, {})) >= 5, [p.cmdline() for p in processes]  # GCS, raylet, agents, actors
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    deadline = time.monotonic() + GONE_WITHIN_S
    while (_alive(processes) or ray_processes(mark, {})) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(processes) and ray_processes(mark, {}) == {}, [p.cmdline() for p in _alive(processes)]
    return processes, log.read_text()


def _alive(processes: list) -> list:
    """Those still running; a zombie (dead, its exit status not yet collected) is not."""
    import psutil

    alive = []
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(process)
    return alive


def _stopped_line(err: str, pid: int, most: int) -> None:
    match = re.search(rf"^cook: stopped (\d+) Ray process(es)? left by a killed run \(pid {pid}\)$", err, re.M)
    assert match is not None and 1 <= int(match[1]) <= most, err[-2000:]
    assert err.splitlines()[-1] == match[0]  # the last line: the driver had nothing more to say


def _stop(processes: list) -> None:
    for process in processes:
        with contextlib.suppress(Exception):
            process.kill()


def _finish(proc: subprocess.Popen[bytes], log: Path) -> str:
    proc.wait(timeout=600)
    err = log.read_text()
    assert proc.returncode == 0, err[-3000:]
    return err


@pytest.mark.slow
def test_kill_9_stops_that_runs_ray_and_not_another_runs(raw: Path, reference: dict, tmp_path: Path) -> None:
    killed_pipeline, killed_out = _pipeline(tmp_path, raw, "killed")
    other_pipeline, other_out = _pipeline(tmp_path, raw, "other")
    killed_log, other_log = tmp_path / "killed.err", tmp_path / "other.err"
    killed = _cook(killed_pipeline, killed_log, "--workers", "2")
    other = _cook(other_pipeline, other_log, "--workers", "1")
    others: list = []
    try:
        _wait_for_actors(other, other.pid, other_log)
        _freeze(other, other_log)
        _wait_for_actors(killed, killed.pid, killed_log)
        _freeze(killed, killed_log)
        others = [p for p in _processes(other.pid) if "IDLE" not in _name(p)]  # idle workers come and go
        other_mark = _mark(others)
        processes, err = _kill_driver(killed, killed_log)
        _stopped_line(err, killed.pid, len(processes))
        assert other.poll() is None and _alive(others) == others, "the other run was touched"
        assert len(ray_processes(other_mark, {})) >= 5
        other.send_signal(signal.SIGCONT)
        assert "stopped" not in _finish(other, other_log)
    finally:
        other.kill()
        _stop([*others, *_processes(killed.pid)])
    assert _digest(other_out) == reference
    assert main(["run", str(killed_pipeline), "--workers", "0", "--quiet"]) == 0
    assert _digest(killed_out) == reference


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _agents(pid: int) -> list:
    return [p for p in _processes(pid) if _name(p) in ("ray::DashboardAgent", "ray::RuntimeEnvAgent")]


@contextlib.contextmanager
def users_cluster(log: Path) -> Iterator[tuple[int, int, list]]:
    """A user's ``ray start --head --block`` on 127.0.0.1, in its own session and temp dir; yields the GCS
    port, the pid of ``ray start`` and its processes (but idle workers) once its agents run; stops them
    after, by pid."""
    temp_dir = tempfile.mkdtemp(prefix="cookray-", dir="/tmp")  # short: Ray's socket paths must fit
    port = _free_port()
    start = [
        str(Path(sys.executable).with_name("ray")),
        "start",
        "--head",
        f"--port={port}",
        "--node-ip-address=127.0.0.1",
        "--num-cpus=1",
        "--include-dashboard=false",
        "--disable-usage-stats",
        "--object-store-memory=200000000",
        f"--ray-client-server-port={_free_port()}",
        f"--dashboard-agent-listen-port={_free_port()}",
        f"--temp-dir={temp_dir}",
        "--block",
    ]
    with open(log, "wb") as out:
        head = subprocess.Popen(start, env=_env(), stdout=out, stderr=out, start_new_session=True)
    processes: list = []
    try:
        deadline = time.monotonic() + START_WITHIN_S
        while head.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            time.sleep(0.2)
        while head.poll() is None and time.monotonic() < deadline and len(_agents(head.pid)) < 2:
            time.sleep(0.2)
        assert head.poll() is None and len(_agents(head.pid)) == 2, log.read_text()[-3000:]
        processes = [p for p in _processes(head.pid) if "IDLE" not in _name(p)]  # idle workers come and go
        yield port, head.pid, processes
    finally:
        _stop([*processes, *_processes(head.pid)])
        head.kill()
        head.wait()
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.mark.slow
def test_kill_9_leaves_a_users_cluster_and_a_run_joined_to_it(raw: Path, reference: dict, tmp_path: Path) -> None:
    killed_pipeline, _ = _pipeline(tmp_path, raw, "killed")
    joined_pipeline, joined_out = _pipeline(tmp_path, raw, "joined")
    killed_log, joined_log = tmp_path / "killed.err", tmp_path / "joined.err"
    with users_cluster(tmp_path / "head.log") as (port, head, cluster):
        killed = _cook(killed_pipeline, killed_log, "--workers", "2")
        joined: subprocess.Popen[bytes] | None = None
        try:
            _wait_for_actors(killed, killed.pid, killed_log)
            _freeze(killed, killed_log)
            joined = _cook(joined_pipeline, joined_log, "--ray-address", f"127.0.0.1:{port}", "--workers", "1")
            _wait_for_actors(joined, head, joined_log)  # its actor runs on the user's cluster
            _freeze(joined, joined_log)
            processes, err = _kill_driver(killed, killed_log)
            _stopped_line(err, killed.pid, len(processes))
            assert _alive(cluster) == cluster, "the user's cluster was touched"
            joined.send_signal(signal.SIGCONT)
            assert "stopped" not in _finish(joined, joined_log)
            assert _alive(cluster) == cluster, "the user's cluster was touched"
        finally:
            if joined is not None:
                joined.kill()
            _stop(_processes(killed.pid))
    assert _digest(joined_out) == reference
