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

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from cook.cli.main import main
from cook.runner import ray_watchdog
from cook.runner.ray_watchdog import ray_processes
from tests.conftest import REPO, pipeline_dict, write_jsonl
from tests.e2e.ray_nodes import alive, env, freeze, process_name, processes, ray_nodes, stop, wait_for_actors
from tests.e2e.test_resume_and_scale import _digest, _records

COOK = [sys.executable, "-m", "cook.cli.main"]
GONE_WITHIN_S = 30.0  # Ray's agents alone outlive a killed driver by ~60 s


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
            env=env(),
            stdout=subprocess.DEVNULL,
            stderr=err,
        )


def _mark(found: list) -> str:
    """The mark of a driver's embedded Ray, read from its watchdog's command line."""
    for process in found:
        args = process.cmdline()
        if len(args) >= 4 and args[2] == ray_watchdog.__file__:
            return str(args[3])
    raise AssertionError("the run has no Ray watchdog")


def _kill_driver(proc: subprocess.Popen[bytes], log: Path) -> tuple[list, str]:
    """``kill -9`` the driver; wait (bounded) until its Ray is gone; its processes just before, and stderr."""
    found = processes(proc.pid)
    mark = _mark(found)
    assert len(ray_processes(mark, {})) >= 5, [p.cmdline() for p in found]  # GCS, raylet, agents, actors
    proc.send_signal(signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL
    deadline = time.monotonic() + GONE_WITHIN_S
    while (alive(found) or ray_processes(mark, {})) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(found) and ray_processes(mark, {}) == {}, [p.cmdline() for p in alive(found)]
    return found, log.read_text()


def _stopped_line(err: str, pid: int, most: int) -> None:
    match = re.search(rf"^cook: stopped (\d+) Ray process(es)? left by a killed run \(pid {pid}\)$", err, re.M)
    assert match is not None and 1 <= int(match[1]) <= most, err[-2000:]
    assert err.splitlines()[-1] == match[0]  # the last line: the driver had nothing more to say


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
    other = _cook(other_pipeline, other_log, "--workers", "1")
    killed: subprocess.Popen[bytes] | None = None
    others: list = []
    try:
        wait_for_actors(other, [other.pid], other_log)
        freeze(other, other_log)
        # started once the other run is frozen, so it cannot finish while the test waits on the other
        killed = _cook(killed_pipeline, killed_log, "--workers", "2")
        wait_for_actors(killed, [killed.pid], killed_log)
        freeze(killed, killed_log)
        others = [p for p in processes(other.pid) if "IDLE" not in process_name(p)]  # idle workers come and go
        other_mark = _mark(others)
        found, err = _kill_driver(killed, killed_log)
        _stopped_line(err, killed.pid, len(found))
        assert other.poll() is None and alive(others) == others, "the other run was touched"
        assert len(ray_processes(other_mark, {})) >= 5
        other.send_signal(signal.SIGCONT)
        assert "stopped" not in _finish(other, other_log)
    finally:
        other.kill()
        stop([*others, *(processes(killed.pid) if killed is not None else [])])
    assert _digest(other_out) == reference
    assert main(["run", str(killed_pipeline), "--workers", "0", "--quiet"]) == 0
    assert _digest(killed_out) == reference


@pytest.mark.slow
def test_kill_9_leaves_a_users_cluster_and_a_run_joined_to_it(raw: Path, reference: dict, tmp_path: Path) -> None:
    killed_pipeline, _ = _pipeline(tmp_path, raw, "killed")
    joined_pipeline, joined_out = _pipeline(tmp_path, raw, "joined")
    killed_log, joined_log = tmp_path / "killed.err", tmp_path / "joined.err"
    with ray_nodes(tmp_path) as (port, (head,), cluster):
        killed = _cook(killed_pipeline, killed_log, "--workers", "2")
        joined: subprocess.Popen[bytes] | None = None
        try:
            wait_for_actors(killed, [killed.pid], killed_log)
            freeze(killed, killed_log)
            joined = _cook(joined_pipeline, joined_log, "--ray-address", f"127.0.0.1:{port}", "--workers", "1")
            wait_for_actors(joined, [head], joined_log)  # its actor runs on the user's cluster
            freeze(joined, joined_log)
            found, err = _kill_driver(killed, killed_log)
            _stopped_line(err, killed.pid, len(found))
            assert alive(cluster) == cluster, "the user's cluster was touched"
            joined.send_signal(signal.SIGCONT)
            assert "stopped" not in _finish(joined, joined_log)
            assert alive(cluster) == cluster, "the user's cluster was touched"
        finally:
            if joined is not None:
                joined.kill()
            stop(processes(killed.pid))
    assert _digest(joined_out) == reference
