"""The driver's global plan (issue 12, item 2): ``buffer_size: all`` over 10 M lengths, from the
lengths alone: the driver cuts the one window (``Planner``: unit counts of 10,000 samples each, then
``finish``), a worker plans it from the staged lengths (``plan_window_task``), the driver numbers its shards.

Each size runs in its own process, so its peak RSS is its own; the figures are CPU seconds and the
peak RSS above the process's RSS after imports. Baseline, in the same process: ``np.argsort`` of the
same lengths (what any decreasing-order packing must at least do). Marginal: 10 M minus 1 M.
"""

from __future__ import annotations

import json
import subprocess
import sys

from bench.common import REPO

COMMAND = ".venv/bin/python -m bench.run_all bench_plan"
SIZES = (1_000_000, 10_000_000)
PER_UNIT = 10_000
TARGET_S, TARGET_MB = 10.0, 1024.0

JOB = """
import json, sys, time
import numpy as np
from cook.config import PackingConfig
from cook.runner.units import Rejects, UnitDone
from cook.runner.windows import Planner, Position, plan_window_task
n, per = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
lengths = np.clip(rng.lognormal(6.5, 1.0, n), 16, 16384).astype(np.int32)
zeros = np.zeros(per, np.int32)
def hwm_mb():  # VmHWM: this process image's own peak (ru_maxrss starts from the forking parent's)
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024
start_mb = hwm_mb()
t = time.process_time(); np.argsort(-lengths, kind="stable"); sort_s = time.process_time() - t
packing = PackingConfig(seq_len=16384, pad_multiple=64, buffer_size="all", algorithm="best_fit_decreasing")
t = time.process_time()
planner = Planner(packing, 256, Position(0), 0, 0, 0)
for u in range(n // per):
    planner.add(UnitDone(u, per, Rejects(), per, int(lengths[u * per:(u + 1) * per].sum())))
(window,) = planner.finish()
_, window.done = plan_window_task(window.task, lambda u: (lengths[u * per:(u + 1) * per], zeros, False), packing)
planner.number(window)
plan_s = time.process_time() - t
peak_mb = hwm_mb()
print(json.dumps({"sort_s": sort_s, "plan_s": plan_s, "peak_mb": peak_mb, "start_mb": start_mb,
                  "packs": window.done.packs, "tasks": len(window.tasks), "efficiency": window.done.stats.efficiency}))
"""


def _run(n: int) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", JOB, str(n), str(PER_UNIT)], cwd=REPO, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def run() -> str:
    small, big = (_run(n) for n in SIZES)
    marginal_s = big["plan_s"] - small["plan_s"]
    big_mb = big["peak_mb"] - big["start_mb"]
    ok_s = "met" if big["plan_s"] <= TARGET_S else "**not met**"
    ok_mb = "met" if big["peak_mb"] <= TARGET_MB else "**not met**"
    return f"""## Global pack plan: 10 M lengths (issue 12)

`{COMMAND}`

`buffer_size: all`: the driver cuts the one window from unit counts (`cook.runner.windows.Planner`),
a worker plans it from the lengths alone (`plan_window_task`), the driver numbers its shards; units of
{PER_UNIT:,} samples, best_fit_decreasing, seq_len 16384, pad_multiple 64, lognormal lengths with
median ~660 tokens). One process per size; CPU seconds; peak RSS of the planning process.

| figure | 1 M lengths | 10 M lengths | target (10 M) | met |
| --- | ---: | ---: | ---: | --- |
| plan CPU s (unit counts in, the window planned, every shard task out) | {small["plan_s"]:.2f} | {big["plan_s"]:.2f} | ≤ {TARGET_S:.0f} s | {ok_s} |
| baseline: `np.argsort` of the lengths, CPU s | {small["sort_s"]:.2f} | {big["sort_s"]:.2f} | | |
| plan / argsort | {small["plan_s"] / small["sort_s"]:.1f}x | {big["plan_s"] / big["sort_s"]:.1f}x | | |
| peak RSS of the process, MB | {small["peak_mb"]:.0f} | {big["peak_mb"]:.0f} | ≤ {TARGET_MB:.0f} MB | {ok_mb} |
| peak RSS above the imports, MB | {small["peak_mb"] - small["start_mb"]:.0f} | {big_mb:.0f} | | |
| packs / shard tasks | {small["packs"]:,} / {small["tasks"]:,} | {big["packs"]:,} / {big["tasks"]:,} | | |
| packing efficiency | {small["efficiency"]:.4f} | {big["efficiency"]:.4f} | | |

Marginal (10 M - 1 M): {marginal_s:.2f} CPU s for 9 M lengths, {marginal_s / 9:.2f} s per million.
"""
