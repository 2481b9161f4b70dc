"""Sixteen actors over four Ray nodes, same bytes (issue 31, item 3).

Four ``ray start`` nodes of 1 CPU each on 127.0.0.1 (Ray's ``--num-cpus`` takes whole CPUs), and a
``cook run --ray-address`` of 16 actors at ``ray.cpus_per_actor: 0.25``, so four actors a node. The
input is a generated image chat set in about 40 units (the first 16 go one to each actor), packed in
several windows. Three runs against the same nodes, each equal to ``--workers 0`` byte for byte
(shards, rejects, counts, Energon's index rows):
- a run that goes through; the driver received summaries and index rows, no token or patch bytes;
- a run one of whose busy actors is ``kill -9``-ed mid-run: Ray restarts it, its job runs again, the
  run goes through, and its stdout is still the ``--json`` summary alone (Ray's driver prints the
  actor's death to stdout: cook sends it to stderr);
- a run whose driver is ``kill -9``-ed mid-run, then the same command again, which resumes.

Mid-run is sure: the driver is SIGSTOPped once its actors run, then its actor or itself is killed
(SIGKILL and SIGCONT both reach a stopped process). Ray runs only in child processes, stopped by pid."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from cook import format as fmt
from cook.cli.main import main
from tests.conftest import REPO, pipeline_dict, write_jsonl
from tests.e2e.ray_nodes import START_WITHIN_S, actors, env, freeze, ray_nodes, wait_for_actors
from tests.e2e.test_resume_and_scale import COOK, _digest, _state_windows
from tests.unit.media.media_data import rgb_bytes

NODES = 4
ACTORS = 16
RECORDS = 320
IMAGES = 8


def _rows() -> list:
    """Chats of one image and varied text; one broken line and one missing image, for the rejects."""
    rows: list = []
    for i in range(RECORDS):
        user = [
            {"type": "text", "text": f"q{i} " + "what " * (40 + i % 60)},
            {"type": "image", "image": f"img-{i % IMAGES}.png"},
        ]
        rows.append(
            {
                "messages": [
                    {"role": "user", "content": user},
                    {"role": "assistant", "content": f"a{i} " + "so " * (60 + i * 7 % 200)},
                ]
            }
        )
    rows[101] = b"{broken json"
    rows[202]["messages"][0]["content"][1]["image"] = "absent.png"
    return rows


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("raw")
    media = root / "media"
    media.mkdir()
    rng = np.random.default_rng(31)
    for k in range(IMAGES):
        (media / f"img-{k}.png").write_bytes(
            rgb_bytes(rng.integers(0, 256, (48 + 8 * k, 96 - 4 * k, 3), dtype=np.uint8))
        )
    write_jsonl(root / "chats.jsonl", _rows())
    return root


def _pipeline(tmp: Path, raw: Path, name: str) -> tuple[Path, Path]:
    """A pipeline writing to ``tmp/name/out`` (the same basename for every run: it is in the index)."""
    out = tmp / name / "out"
    out.parent.mkdir(parents=True)
    data = pipeline_dict(
        str(raw / "chats.jsonl"),
        str(out),
        input={"media_root": str(raw / "media"), "unit_bytes": 8_000},  # about 40 units
        media={"image": {"mode": "dynamic", "min_patches": 64, "max_patches": 256}},
        packing={"seq_len": 2048, "buffer_size": 40},  # several windows
        output={"shard_size": 2},
        ray={"num_actors": ACTORS, "cpus_per_actor": 0.25, "checkpoint_interval_s": 0},  # kills wait on windows
    )
    path = tmp / name / "p.yaml"
    path.write_text(yaml.safe_dump(data))
    return path, out


def _member_bytes(out: Path, member: str) -> int:
    total = 0
    for shard in out.glob("shard-*.tar"):
        with tarfile.open(shard) as tar:
            total += sum(m.size for m in tar.getmembers() if m.name.endswith(member))
    return total


@pytest.fixture(scope="module")
def reference(raw: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    pipeline, out = _pipeline(tmp_path_factory.mktemp("ref"), raw, "ref")
    assert main(["run", str(pipeline), "--workers", "0", "--quiet"]) == 0
    return _digest(out)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, list[int]]]:
    with ray_nodes(tmp_path_factory.mktemp("nodes"), NODES, object_store_bytes=100_000_000) as (port, nodes, _):
        yield port, nodes


def _cook(pipeline: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    argv = [*COOK, "run", str(pipeline), "--ray-address", f"127.0.0.1:{port}", "--workers", str(ACTORS), "--json"]
    with open(log, "wb") as err:
        return subprocess.Popen(argv, cwd=REPO, env=env(), stdout=subprocess.PIPE, stderr=err)


def _finish(proc: subprocess.Popen[bytes], log: Path) -> dict:
    stdout, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, log.read_text()[-3000:]
    return dict(json.loads(stdout))


def _stop_mid_run(proc: subprocess.Popen[bytes], nodes: list[int], out: Path, log: Path) -> None:
    """SIGSTOP the driver once all its actors run and a window is checkpointed, before it finishes."""
    wait_for_actors(proc, nodes, log, ACTORS)
    while proc.poll() is None and _state_windows(out) < 1:
        time.sleep(0.01)
    freeze(proc, log)
    assert not (out / fmt.MANIFEST_NAME).exists()


def _busy_actor(nodes: list[int]) -> Any:
    """An actor that is running (or ready to run): one cooking or writing, not one waiting for a job."""
    import psutil

    deadline = time.monotonic() + START_WITHIN_S
    while time.monotonic() < deadline:
        for actor in actors(nodes):
            with contextlib.suppress(psutil.NoSuchProcess):
                if actor.status() == psutil.STATUS_RUNNING:
                    return actor
        time.sleep(0.01)
    raise AssertionError("no actor is running")


@pytest.mark.slow
def test_sixteen_actors_four_nodes_match_in_process(
    raw: Path, reference: dict, cluster: tuple[int, list[int]], tmp_path: Path
) -> None:
    port, _ = cluster
    pipeline, out = _pipeline(tmp_path, raw, "clean")
    summary = _finish(_cook(pipeline, port, tmp_path / "clean.err"), tmp_path / "clean.err")
    assert _digest(out) == reference
    counts = summary["counts"]
    assert counts["records_in"] == RECORDS and counts["records_rejected"] == 2
    assert sum(summary["shards_by_writer"].values()) == summary["shards"] > ACTORS
    assert len(summary["shards_by_writer"]) > 1, summary["shards_by_writer"]
    # what crossed to the driver: unit summaries (a length and a source a sample) and index rows (a few
    # per pack), never ids or patches: well under the ids, and under a bound per record and per pack
    ids, patches = _member_bytes(out, fmt.INPUT_IDS), _member_bytes(out, fmt.PIXEL_PATCHES)
    assert patches > 10 * ids > 0
    received = summary["driver_received_bytes"]
    assert received < ids / 4 and received < 256 * counts["records_in"] + 1024 * counts["packs"], (received, ids)


@pytest.mark.slow
def test_kill_9_of_an_actor_mid_run_matches(
    raw: Path, reference: dict, cluster: tuple[int, list[int]], tmp_path: Path
) -> None:
    port, nodes = cluster
    pipeline, out = _pipeline(tmp_path, raw, "actor")
    log = tmp_path / "actor.err"
    proc = _cook(pipeline, port, log)
    try:
        _stop_mid_run(proc, nodes, out, log)
        _busy_actor(nodes).send_signal(signal.SIGKILL)
        proc.send_signal(signal.SIGCONT)
        _finish(proc, log)  # stdout is the summary alone
    finally:
        proc.kill()
    assert "A worker died or was killed while executing a task" in log.read_text()  # Ray's line, on stderr
    assert _digest(out) == reference


@pytest.mark.slow
def test_kill_9_of_the_driver_mid_run_then_resume_matches(
    raw: Path, reference: dict, cluster: tuple[int, list[int]], tmp_path: Path
) -> None:
    port, nodes = cluster
    pipeline, out = _pipeline(tmp_path, raw, "driver")
    log = tmp_path / "driver.err"
    proc = _cook(pipeline, port, log)
    try:
        _stop_mid_run(proc, nodes, out, log)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait() == -signal.SIGKILL
    finally:
        proc.kill()
    summary = _finish(_cook(pipeline, port, tmp_path / "resume.err"), tmp_path / "resume.err")
    assert summary["resumed"]
    assert _digest(out) == reference
