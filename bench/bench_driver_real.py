"""The driver's share of real 2-actor ``cook run`` jobs, text and images (issue 31: "from a real 2-actor run").

    .venv/bin/python -m bench.run_all bench_driver_real

bench_driver measures the coordinator alone, fed by a replay. This runs the real thing: bench_job's
text workload (``pipelines/text_sft.yaml``, the demo chats x 1280 against x 16) with 2 Ray actors: bench_job's
4 MiB units at one job a Ray call (the automatic value below 64 actors) and at 16 (the automatic value
from 512 actors), and the shipped unit size (32 MiB) at one job a call and at 16, what a fleet of 1,024
actors gets (its big run the demo chats x 5120, 56 units, so that full calls keep both actors busy); and
images as omni_sft ships them (frames stored JPEG; ``input.format=wds``, ``cooker=llava``,
``packing.seq_len=16384``, as bench_job's) in WebDataset tars of ``PHOTOS_PER_TAR`` photos (a tar is a
unit), 1,536 against 256, at one job a call; the settings and sizes interleaved in every repeat.
Figures are marginal (big minus small) medians over ``BENCH_REPEATS`` repeats (default 3):

- *driver loop CPU*: ``driver_loop_cpu_s`` of ``cook run --json``, the driver process's CPU (every
  thread, Ray's own in it) from the first job handed out to the last result taken;
- *driver process CPU*: the whole driver process from exec to exit (bench/job_run.py), start-up and
  shutdown included, which cancel in the marginal only up to their run-to-run spread;
- *job CPU*: every process of the job (driver, Ray, actors; bench/job_run.py).

Cores one driver can feed = job CPU / driver loop CPU: the driver's cost per unit of work done
elsewhere, read from a run where two actors do the work. Part of the loop's CPU is Ray's own idle
background in the driver process (its threads run whether or not jobs flow), a cost per second of the
job, not per sample: ``idle_rate`` measures it in this run (a fresh process holding a ``RayExecutor``
with 2 actors, its CPU over ``IDLE_S`` idle seconds), and the second figure removes it
(idle rate x the marginal wall), as issue 31's own measurement did.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import statistics
import sys
import time

from bench.bench_job import (
    SHIPPED_IMAGE_SETS,
    SINGLE_THREAD_ENV,
    SMALL_TEXT_COPIES,
    _check_small_starts_every_actor,
    image_dataset,
    text_workload,
)
from bench.common import REPO, WORK, single_threaded_tokenizers, text_corpus
from bench.job_run import become_subreaper, run_job

COMMAND = ".venv/bin/python -m bench.run_all bench_driver_real"
DEFAULT_UNIT_BYTES = 32 * 2**20  # input.unit_bytes as shipped (cook/config.py)
SMALL_COPIES_SHIPPED_UNITS = 200  # the small run at 32 MiB units: 73 MB, 3 units, so it starts both actors too
BIG_COPIES_FLEET_CALLS = 5120  # 1.9 GB, 56 units of 32 MiB: 16 jobs a call fill the 2 actors' 4 calls in flight
# (units, input.unit_bytes, ray.jobs_per_call, the small run's and the big run's demo-chat copies (0: bench_job's
# text workload)): bench_job's 4 MiB units at 1 job a call (the automatic value below 64 actors) and at 16
# (from 512 actors), and the shipped unit size at the automatic 1 (over 11 marginal units, and over 53: a
# 2 ms step a unit is then read over 53 of them) and at 16, what a fleet of 1,024 actors gets
CONFIGS = (
    ("4 MiB", 4 * 2**20, 1, SMALL_TEXT_COPIES, 0),
    ("4 MiB", 4 * 2**20, 16, SMALL_TEXT_COPIES, 0),
    ("32 MiB (default)", DEFAULT_UNIT_BYTES, 1, SMALL_COPIES_SHIPPED_UNITS, 0),
    ("32 MiB (default)", DEFAULT_UNIT_BYTES, 1, SMALL_COPIES_SHIPPED_UNITS, BIG_COPIES_FLEET_CALLS),
    ("32 MiB (default)", DEFAULT_UNIT_BYTES, 16, SMALL_COPIES_SHIPPED_UNITS, BIG_COPIES_FLEET_CALLS),
)
PHOTOS_PER_TAR = 128  # an image unit (a WebDataset tar): ~1.1 s of a worker's CPU
SMALL_PHOTOS, BIG_PHOTOS = 256, 1536  # 2 and 12 units: 10 marginal units, 1,280 photos
TARGET_CORES = 1000
IDLE_S = 10.0


def _run(args: list[str]) -> tuple[float, float, float, float]:
    """(wall s, job CPU s, driver process CPU s, driver loop CPU s) of one ``cook run --json``."""
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false"}
    env |= {name: "1" for name in SINGLE_THREAD_ENV}
    stats = run_job(args, REPO, env, WORK / "job_scratch")
    if stats.rc != 0:
        raise RuntimeError(f"cook {' '.join(args)} exited {stats.rc}:\n{stats.stderr[-3000:]}")
    summary = json.loads(stats.stdout.strip().splitlines()[-1])
    return stats.wall_s, stats.tree_cpu_s, stats.driver_cpu_s, float(summary["driver_loop_cpu_s"])


def _idle_child(queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    os.environ["RAY_AUTH_MODE"] = "disabled"  # as for the cook runs
    from cook.config import load_config
    from cook.runner.ray_executor import RayExecutor

    out = WORK / "driver_real_idle"
    config = load_config("pipelines/text_sft.yaml", [f"output.dir={out}", f"input.path={WORK}"])
    executor = RayExecutor(config, None, 2)
    try:
        time.sleep(2.0)  # the actors start
        cpu0 = time.process_time()
        time.sleep(IDLE_S)
        queue.put((time.process_time() - cpu0) / IDLE_S)
    finally:
        executor.close()


def idle_rate() -> float:
    """The driver process's CPU per second with Ray up, 2 actors and no job (a fresh process)."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=_idle_child, args=(queue,))
    child.start()
    rate = float(queue.get(timeout=300))
    child.join()
    return rate


def run() -> str:
    from cook.runner.plan import jsonl_cuts

    become_subreaper()
    single_threaded_tokenizers()
    repeats = int(os.environ.get("BENCH_REPEATS", 3))
    work = text_workload(int(os.environ.get("BENCH_TEXT_COPIES", 1280)))
    out = WORK / "driver_real_out"
    smalls = {copies: text_corpus(copies) for *_, copies, _ in CONFIGS}
    bigs = {big: text_corpus(big) if big else work.inputs["big"] for *_, big in CONFIGS}
    for _, unit_bytes, _, copies, _ in CONFIGS:
        _check_small_starts_every_actor("text", len(jsonl_cuts(str(smalls[copies]), unit_bytes)))
    cases = [  # (units, jobs a call, the pipeline and its settings, the small run's input, the big run's)
        (units, k, [work.pipeline, "--set", f"input.unit_bytes={unit_bytes}"], smalls[copies], bigs[big])
        for units, unit_bytes, k, copies, big in CONFIGS
    ]
    _check_small_starts_every_actor("image", SMALL_PHOTOS // PHOTOS_PER_TAR)
    photos = [image_dataset(n, PHOTOS_PER_TAR) for n in (SMALL_PHOTOS, BIG_PHOTOS)]
    cases.append((f"tars of {PHOTOS_PER_TAR} photos", 1, ["pipelines/omni_sft.yaml", *SHIPPED_IMAGE_SETS], *photos))
    marginal: dict[int, list[tuple[float, float, float, float]]] = {c: [] for c in range(len(cases))}
    for repeat in range(repeats):
        for c, (units, k, pipeline, small_input, big_input) in enumerate(cases):
            runs = {}
            for size, path in (("small", small_input), ("big", big_input)):
                args = ["run", pipeline[0], "--input", str(path), "--output", str(out), "--workers", "2",
                        *pipeline[1:], "--set", f"ray.jobs_per_call={k}", "--overwrite", "--quiet", "--json"]  # fmt: skip
                runs[size] = _run(args)
                print(f"  repeat {repeat} units {units} jobs/call {k} {size}: {runs[size]}", file=sys.stderr)
            big, small = runs["big"], runs["small"]
            marginal[c].append(tuple(b - s for b, s in zip(big, small, strict=True)))  # type: ignore[arg-type]
    idle = idle_rate()
    rows = []
    for c, (units, k, _, _, big_input) in enumerate(cases):
        wall, tree, process, loop = (statistics.median(m[i] for m in marginal[c]) for i in range(4))
        each = ", ".join(f"{m[3]:.3f}" for m in marginal[c])
        own = loop - idle * wall
        cores, cores_own = (tree / v if v > 0 else float("inf") for v in (loop, own))
        met = "met" if cores_own >= TARGET_CORES else "**not met**"
        rows.append(
            f"| {units} | {k} | {big_input.name} | {wall:.1f} | {tree:.2f} | {process:.2f} | **{loop:.3f}** ({each}) | {cores:,.0f} "
            f"| {own:.3f} | **{cores_own:,.0f}** ({met}) |"
        )
    table = "\n".join(rows)
    return f"""## The driver's share of a real 2-actor run (issue 31)

`{COMMAND}`

bench_job's text workload ({work.inputs["big"].name}, `pipelines/text_sft.yaml`), `cook run --workers 2`:
bench_job's 4 MiB units at 1 and 16 jobs a Ray call (against {smalls[SMALL_TEXT_COPIES].name}), and the shipped
unit size (`input.unit_bytes` 32 MiB) at 1, the automatic value for 2 actors, and at 16, the automatic value
for 1,024 actors (against {smalls[SMALL_COPIES_SHIPPED_UNITS].name}, 3 units: every small run starts both actors;
at 16 jobs a call the big run is {bigs[BIG_COPIES_FLEET_CALLS].name}, 56 units, so that full calls of 16 keep
both actors busy; at one job a call over both big inputs, 11 and 53 marginal units); and bench_job's
photos as omni_sft ships them (frames stored JPEG; `{" ".join(SHIPPED_IMAGE_SETS)}`) in WebDataset tars of
{PHOTOS_PER_TAR} (a tar is a unit), {BIG_PHOTOS:,} against {SMALL_PHOTOS}, at one job a call; marginal (big minus small),
median of {repeats} repeats, interleaved. *Driver loop CPU*: `driver_loop_cpu_s` of `cook run --json` (the
driver process, every thread, from the first job handed out to the last result). *Driver process CPU*: the
whole process, start-up and shutdown included. Cores one driver can feed = job CPU / driver loop CPU.
Ray's idle background in a driver process (2 actors, no job, {IDLE_S:.0f} s): **{100 * idle:.2f}%** of a
core; *without it*: the loop's CPU less that rate x the marginal wall (target ≥ {TARGET_CORES:,} cores, judged
on this, as issue 31 measured).

| units | jobs a call | big run | wall s | job CPU s | driver process CPU s | driver loop CPU s (each repeat) | cores fed | loop CPU without Ray's idle background s | cores fed |
| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
{table}
"""
