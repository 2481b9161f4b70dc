"""bench_plan's job runs the driver's current planning flow: a window of all, planned, numbered into shards."""

import json
import subprocess
import sys

from bench.bench_plan import JOB


def test_bench_plan_job_plans_every_length_into_numbered_shards() -> None:
    out = subprocess.run([sys.executable, "-c", JOB, "20000", "5000"], capture_output=True, text=True, check=True)
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    packs, tasks = figures["packs"], figures["tasks"]
    assert tasks == -(-packs // 256)  # shards of output.shard_size=256 packs
    assert 0.9 < figures["efficiency"] <= 1.0
