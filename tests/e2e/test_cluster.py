"""A real two-node Ray cluster on this machine (issue 12, item 5): a head and a worker node, each
its own ``ray start`` process with 1 CPU, bound to 127.0.0.1. Cooking the multimodal demo against
it: both nodes write shards, the driver receives no patch bytes, and the output equals the
in-process run byte for byte."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cook import format as fmt
from cook.cli.main import main
from tests.conftest import REPO
from tests.e2e.test_resume_and_scale import _digest, _stop_head

PORT = "6393"
# several windows and shards; raw patches, so that the driver's bytes are bounded against megabytes of media
SMALL = ["output.shard_size=2", "packing.buffer_size=120", "media.image.storage=raw", "media.video.storage=raw"]
DRIVER = """
import json, sys
from dataclasses import asdict
from cook.config import load_config
from cook.runner.pipeline import run_pipeline
from cook.runner.ray_executor import RayExecutor
config = load_config("pipelines/demo.yaml", [f"output.dir={sys.argv[1]}", "ray.cpus_per_actor=1", *sys.argv[3:]])
summary = run_pipeline(config, lambda c: RayExecutor(c, sys.argv[2], 2), progress=False)
print(json.dumps(asdict(summary)))
"""


def _ray(*args: str, env: dict) -> None:
    ray_bin = Path(sys.executable).with_name("ray")
    common = ["--node-ip-address=127.0.0.1", "--num-cpus=1", "--object-store-memory=200000000", "--disable-usage-stats"]
    subprocess.run([str(ray_bin), "start", *args, *common], check=True, env=env, capture_output=True, timeout=120)


def _patch_bytes(out: Path) -> int:
    import tarfile

    total = 0
    for shard in out.glob("shard-*.tar"):
        with tarfile.open(shard) as tar:
            total += sum(m.size for m in tar.getmembers() if m.name.endswith(fmt.PIXEL_PATCHES))
    return total


@pytest.mark.slow
def test_two_nodes_write_shards_and_match_in_process(tmp_path: Path) -> None:
    reference = tmp_path / "local"
    sets = [arg for item in SMALL for arg in ("--set", item)]
    assert main(["run", "pipelines/demo.yaml", "--output", str(reference), "--workers", "0", "--quiet", *sets]) == 0
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    try:
        _ray("--head", f"--port={PORT}", "--include-dashboard=false", env=env)
        _ray(f"--address=127.0.0.1:{PORT}", env=env)
        out = tmp_path / "cluster"
        proc = subprocess.run(
            [sys.executable, "-c", DRIVER, str(out), f"127.0.0.1:{PORT}", *SMALL],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
    finally:
        _stop_head(PORT)
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(summary["shards_by_writer"]) == 2, summary["shards_by_writer"]  # both nodes wrote shards
    assert sum(summary["shards_by_writer"].values()) == summary["shards"]
    patches = _patch_bytes(out)
    assert patches > 2_000_000
    # what crossed to the driver: summaries and shard entries, about 1 KiB a pack, never patches
    assert summary["driver_received_bytes"] < min(patches / 20, 4096 * summary["counts"]["packs"] + 65536)
    assert _digest(out) == _digest(reference)
