"""Scale-out guarantees (issue 5): identical output for any actor count, byte-identical output after a
SIGKILL of the driver at any point, crash isolation, the output lock, and cluster mode."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from cook import format as fmt
from cook.cli.main import main
from cook.runner.output_dir import STATE_NAME
from cook.writer.index_rows import ROWS_DIR
from tests.conftest import REPO, pipeline_dict, write_jsonl
from tests.e2e.faults import MARKER, KillingWorker

COOK = [sys.executable, "-m", "cook.cli.main"]


def _records(n: int, tag: str = "q") -> list:
    """``n`` chats of varied lengths (``tag`` starts each question), a broken JSON line every 97."""
    rows: list = []
    for i in range(n):
        rows.append(
            {
                "messages": [
                    {"role": "user", "content": f"{tag}{i} " + "why " * (i % 50)},
                    {"role": "assistant", "content": f"a{i} " + "so " * (i * 7 % 120)},
                ]
            }
        )
        if i % 97 == 5:
            rows.append(b"{broken json")
    return rows


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("raw")
    write_jsonl(root / "a.jsonl", _records(1500))
    write_jsonl(root / "b.jsonl", _records(700))
    return root


def _pipeline(tmp: Path, raw: Path, out: Path, **packing: object) -> Path:
    data = pipeline_dict(
        str(raw),
        str(out),
        packing={"seq_len": 512, "buffer_size": 60, **packing},
        output={"shard_size": 3},
        input={"unit_bytes": 40_000},
    )
    path = tmp / f"{out.name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _digest(out: Path) -> dict[str, str]:
    names = [*sorted(p.name for p in out.glob("shard-*.tar")), fmt.REJECTS_NAME]
    digests = {n: hashlib.sha256((out / n).read_bytes()).hexdigest() for n in names}
    manifest = json.loads((out / fmt.MANIFEST_NAME).read_text())
    digests["counts"] = json.dumps(manifest["counts"], sort_keys=True)
    meta = out / fmt.NV_META_DIR
    for name in (fmt.INFO_JSON, fmt.SPLIT_YAML, fmt.INDEX_UUID):
        digests[name] = (meta / name).read_text()
    with sqlite3.connect(meta / fmt.INDEX_SQLITE) as db:  # Energon's index: the same rows, resumed or not
        rows = [sorted(db.execute(f"SELECT * FROM {table}")) for table in ("samples", "sample_parts")]
    digests[fmt.INDEX_SQLITE] = hashlib.sha256(repr(rows).encode()).hexdigest()
    return digests


@pytest.fixture(scope="module")
def reference(raw: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("ref")
    assert main(["run", str(_pipeline(tmp, raw, tmp / "ref")), "--workers", "0", "--quiet"]) == 0
    digest = _digest(tmp / "ref")
    counts = json.loads(digest["counts"])
    assert counts["records_in"] == 2200 + 16 + 8 and counts["packs"] > 30
    return digest


def _state_windows(out: Path) -> int:
    try:
        return json.loads((out / fmt.PROGRESS_DIR / STATE_NAME).read_text())["windows"]
    except (FileNotFoundError, json.JSONDecodeError):
        return 0


def _run_and_kill(pipeline: Path, out: Path, after_windows: int, *extra: str) -> bool:
    """Start cook in a subprocess, SIGKILL it once ``after_windows`` windows are checkpointed (it saves
    its state after every commit: ``ray.checkpoint_interval_s=0``, which leaves the output as it is)."""
    argv = [*COOK, "run", str(pipeline), "--quiet", "--set", "ray.checkpoint_interval_s=0", *extra]
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while proc.poll() is None and _state_windows(out) < after_windows:
        time.sleep(0.002)
    killed = proc.poll() is None
    if killed:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    return killed


@pytest.mark.parametrize(
    "after_windows", [0, 1, pytest.param(7, marks=pytest.mark.slow), pytest.param(23, marks=pytest.mark.slow)]
)
def test_sigkill_driver_then_resume_is_byte_identical(
    raw: Path, reference: dict, tmp_path: Path, after_windows: int
) -> None:
    out = tmp_path / "ref"
    pipeline = _pipeline(tmp_path, raw, out)
    _run_and_kill(pipeline, out, after_windows, "--workers", "0")
    assert not (out / fmt.MANIFEST_NAME).exists() or after_windows > 1000
    assert main(["run", str(pipeline), "--workers", "0", "--quiet"]) == 0
    assert _digest(out) == reference


@pytest.mark.slow  # two kills and a resume: ~4 s; one kill is in make test
def test_two_kills_in_a_row(raw: Path, reference: dict, tmp_path: Path) -> None:
    out = tmp_path / "ref"
    pipeline = _pipeline(tmp_path, raw, out)
    _run_and_kill(pipeline, out, 3, "--workers", "0")
    _run_and_kill(pipeline, out, 12, "--workers", "0")
    assert main(["run", str(pipeline), "--workers", "0", "--quiet"]) == 0
    assert _digest(out) == reference


@pytest.mark.slow  # an interrupted run first: ~4 s
def test_resume_without_its_index_rows_is_refused(raw: Path, tmp_path: Path) -> None:
    out = tmp_path / "ref"
    pipeline = _pipeline(tmp_path, raw, out)
    _run_and_kill(pipeline, out, 2, "--workers", "0")
    shutil.rmtree(out / fmt.PROGRESS_DIR / ROWS_DIR)
    assert main(["run", str(pipeline), "--workers", "0", "--quiet"]) == 2
    assert main(["run", str(pipeline), "--workers", "0", "--quiet", "--overwrite"]) == 0


@pytest.mark.slow  # an interrupted run first: ~4 s
def test_different_pipeline_refused_on_interrupted_dir(raw: Path, tmp_path: Path) -> None:
    out = tmp_path / "ref"
    _run_and_kill(_pipeline(tmp_path, raw, out), out, 2, "--workers", "0")
    other = _pipeline(tmp_path, raw, out, pad_multiple=16)
    assert main(["run", str(other), "--workers", "0", "--quiet"]) == 2
    assert main(["run", str(other), "--workers", "0", "--quiet", "--overwrite"]) == 0


@pytest.mark.parametrize(
    ("workers", "per_call"),
    # 2 actors at 5 jobs a Ray call in make test (~10 s a Ray run); one actor, and one job a call, in test-slow
    [pytest.param("1", "0", marks=pytest.mark.slow), pytest.param("2", "0", marks=pytest.mark.slow), ("2", "5")],
)
def test_one_and_two_actors_give_identical_output(
    raw: Path, reference: dict, tmp_path: Path, ray_session, workers: str, per_call: str
) -> None:
    out = tmp_path / "ref"
    argv = ["run", str(_pipeline(tmp_path, raw, out)), "--workers", workers, "--quiet", "--overwrite"]
    assert main([*argv, "--set", f"ray.jobs_per_call={per_call}"]) == 0
    assert _digest(out) == reference, (workers, per_call)


@pytest.mark.slow  # actors killed and restarted: ~8 s
@pytest.mark.parametrize("per_call", ["1", "4"])  # 4: the crash takes a call of several units with it
def test_record_that_kills_actors_is_rejected_as_worker_crash(
    raw: Path,
    tmp_path: Path,
    ray_session,
    monkeypatch: pytest.MonkeyPatch,
    per_call: str,
) -> None:
    data = tmp_path / "in"
    data.mkdir()
    rows = _records(300)
    rows[150] = {"messages": [{"role": "user", "content": MARKER}, {"role": "assistant", "content": "x"}]}
    write_jsonl(data / "a.jsonl", rows)
    monkeypatch.setattr("cook.runner.ray_executor.RayWorker", KillingWorker)
    out = tmp_path / "out"
    argv = ["run", str(_pipeline(tmp_path, data, out)), "--workers", "2", "--quiet"]
    assert main([*argv, "--set", f"ray.jobs_per_call={per_call}", "--set", "input.unit_bytes=8000"]) == 0
    rejects = [json.loads(line) for line in (out / fmt.REJECTS_NAME).read_text().splitlines()]
    crashed = [r for r in rejects if r["reason"] == "worker_crash"]
    assert [r["source"].rsplit("#", 1)[1] for r in crashed] == ["151"]  # rows[150] is line 151
    counts = json.loads((out / fmt.MANIFEST_NAME).read_text())["counts"]
    assert counts["records_in"] == len(rows) == counts["sources_packed"] + counts["records_rejected"]
    assert counts["records_rejected"] == len(rejects) == 1 + sum(1 for r in rows if isinstance(r, bytes))


def test_concurrent_run_refused_by_the_lock(raw: Path, tmp_path: Path) -> None:
    out = tmp_path / "locked"
    out.mkdir()
    hold = "import sys, time; from cook.runner.output_dir import OutputLock; OutputLock(sys.argv[1]).acquire(); "
    hold += "print('held', flush=True); time.sleep(60)"
    holder = subprocess.Popen([sys.executable, "-c", hold, str(out)], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert main(["run", str(_pipeline(tmp_path, raw, out)), "--workers", "0", "--quiet"]) == 2
    finally:
        holder.kill()
        holder.wait()
    assert main(["run", str(_pipeline(tmp_path, raw, out)), "--workers", "0", "--quiet"]) == 0  # died: lock free


@pytest.mark.slow
def test_cluster_mode_against_a_local_head(raw: Path, reference: dict, tmp_path: Path) -> None:
    ray_bin = Path(sys.executable).with_name("ray")
    port = "6391"
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    start = [
        str(ray_bin),
        "start",
        "--head",
        f"--port={port}",
        "--node-ip-address=127.0.0.1",
        "--num-cpus=2",
        "--include-dashboard=false",
        "--object-store-memory=300000000",
        "--disable-usage-stats",
    ]
    subprocess.run(start, check=True, env=env, capture_output=True, timeout=120)
    try:
        out = tmp_path / "ref"
        cmd = [
            *COOK,
            "run",
            str(_pipeline(tmp_path, raw, out)),
            "--ray-address",
            f"127.0.0.1:{port}",
            "--quiet",
            "--set",
            "ray.cpus_per_actor=0.5",
        ]
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert _digest(out) == reference
    finally:
        _stop_head(port)


def _stop_head(port: str) -> None:
    """Kill the processes of the head started above, and only those: ``ray stop`` would also kill the
    embedded Ray that other tests in this pytest process share (``ray_session``)."""
    marks = (f":{port}".encode(), f"--port={port}".encode(), f"--gcs_server_port={port}".encode())
    pids = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                args = handle.read().split(b"\0")
        except (OSError, ValueError):
            continue
        if entry.isdigit() and int(entry) != os.getpid() and any(m in a for a in args for m in marks):
            pids.append(int(entry))
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
