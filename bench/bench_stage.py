"""What staging through files costs a text job (issue 31, item 5): the whole in-process ``cook run``
with its samples staged as a Ray actor stages them (``DiskStore``: a stage file per unit, mapped and
parsed again by the shard writer) against as an in-process run keeps them (``MemoryStore``).

A Ray job stages every cooked unit in files because the writer of a window's shards may be another
actor, on another node, or a resumed run; an in-process job keeps them in its memory. The 2-actor
speed-up of item 5 is judged against the in-process job, so this is part of what a Ray text job pays
that the in-process one does not, measured without Ray: the same process, the same code, only the store.

bench_job's text workload (the demo chats x1280 minus x200, ``pipelines/text_sft.yaml``, 4 MiB units),
``--workers 0``, each run in a fresh process, the two stores interleaved, median of ``REPEATS``; CPU is
the process's user + system time around the job (every thread). The stages' own times come from the
same runs (the worker's and the store's methods timed around each call: per unit and per shard, not
per sample).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from typing import Any

from bench.common import REPO, WORK, text_corpus

COMMAND = ".venv/bin/python -m bench.run_all bench_stage"
COPIES = (200, 1280)
UNIT_BYTES = 4 * 2**20  # bench_job's text units
REPEATS = int(os.environ.get("BENCH_REPEATS", 3))
STORES = ("memory", "disk")
TIMED = {"CookWorker": ("cook_unit", "write_shard"), "DiskStore": ("put", "take"), "MemoryStore": ("take",)}


def child(store: str, copies: int) -> dict[str, Any]:
    """One in-process job with ``store``; its CPU, wall and the timed stages."""
    from cook.cli.main import main
    from cook.runner import local, staging, worker

    spent: Counter[str] = Counter()

    def timer(method: Any, name: str) -> Any:
        def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
            start = time.process_time()
            try:
                return method(self, *args, **kwargs)
            finally:
                spent[name] += time.process_time() - start

        return timed

    for owner, names in TIMED.items():
        cls = getattr(worker if owner == "CookWorker" else staging, owner)
        for name in names:
            setattr(cls, name, timer(getattr(cls, name), name))
    if store == "disk":
        made = local.LocalExecutor.__init__

        def on_disk(self: Any, config: Any, *args: Any, **kwargs: Any) -> None:
            made(self, config, *args, **kwargs)
            self.store = self.worker.store = staging.DiskStore(config.output.dir)

        local.LocalExecutor.__init__ = on_disk  # type: ignore[method-assign]
    out = WORK / f"stage_{store}_{copies}"
    shutil.rmtree(out, ignore_errors=True)
    args = ["run", "pipelines/text_sft.yaml", "--input", str(text_corpus(copies)), "--output", str(out)]
    args += ["--workers", "0", "--quiet", "--set", f"input.unit_bytes={UNIT_BYTES}"]
    cpu, wall = time.process_time(), time.perf_counter()
    rc = main(args)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    shards = sorted(out.glob("shard-*.tar"))
    digest = subprocess.run(["sha256sum", *map(str, shards)], capture_output=True, text=True, check=True).stdout
    shutil.rmtree(out, ignore_errors=True)
    return {"rc": rc, "cpu_s": cpu, "wall_s": wall, "spent": dict(spent), "shards": digest.split()[::2]}


def _run(store: str, copies: int) -> dict[str, Any]:
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    done = subprocess.run(
        [sys.executable, "-m", "bench.bench_stage", "--child", store, str(copies)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    assert result["rc"] == 0, done.stderr[-2000:]
    return result


def run() -> str:
    for copies in COPIES:
        text_corpus(copies)
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for repeat in range(REPEATS):
        for store in STORES if repeat % 2 == 0 else STORES[::-1]:
            for copies in COPIES:
                print(f"bench_stage: {store} x{copies} ({repeat + 1}/{REPEATS})", file=sys.stderr)
                runs.setdefault((store, copies), []).append(_run(store, copies))
    for copies in COPIES:  # the same shards, whichever store
        assert runs[("memory", copies)][0]["shards"] == runs[("disk", copies)][0]["shards"], "stores differ"

    def marginal(store: str, key: str, stage: str | None = None) -> list[float]:
        small, big = runs[(store, COPIES[0])], runs[(store, COPIES[1])]
        pick = (lambda r: r["spent"].get(stage, 0.0)) if stage else (lambda r: r[key])
        return [pick(b) - pick(s) for b, s in zip(big, small, strict=True)]

    cpu = {store: marginal(store, "cpu_s") for store in STORES}
    base = statistics.median(cpu["memory"])
    rows = []
    for store, what in (
        ("memory", "`MemoryStore`: samples kept in the process (in-process runs, as shipped)"),
        ("disk", "`DiskStore`: a stage file per unit, read back by the writer (Ray actors)"),
    ):
        each = ", ".join(f"{v:.2f}" for v in cpu[store])
        wall = statistics.median(marginal(store, "wall_s"))
        med = statistics.median(cpu[store])
        rows.append(f"| {what} | **{med:.2f}** ({each}) | {wall:.2f} | {med / base:.3f} |")
    stage_rows = []
    for stage, what in (
        ("cook_unit", "cook a unit (read, cook, tokenize, fit), its samples staged"),
        ("put", "... of which staging the unit (`put`)"),
        ("write_shard", "write a shard (plan read, samples taken, packs built, tar and index rows)"),
        ("take", "... of which taking its samples (`take`)"),
    ):
        cells = " | ".join(f"{statistics.median(marginal(store, '', stage)):.2f}" for store in STORES)
        stage_rows.append(f"| {what} | {cells} |")
    extra = statistics.median(cpu["disk"]) - base
    return "\n".join(
        [
            "## What staging through files costs a text job (issue 31, item 5)",
            "",
            f"`{COMMAND}`",
            "",
            f"bench_job's text workload (the demo chats x{COPIES[1]} minus x{COPIES[0]}, `pipelines/text_sft.yaml`,",
            f"{UNIT_BYTES >> 20} MiB units), the whole `cook run --workers 0` in a fresh process, only its staging",
            "store switched: as an in-process run keeps its samples, and as a Ray actor stages them. Marginal",
            f"(big minus small), median of {REPEATS}, the stores interleaved; CPU is the process's user + system",
            "time around the job. The shards are byte-identical either way (checked).",
            "",
            "| store | job CPU s (each) | wall s | / in memory |",
            "| --- | ---: | ---: | ---: |",
            *rows,
            "",
            "Where it goes (CPU s, marginal, median; each stage timed around its calls in the same runs):",
            "",
            "| stage | in memory | in files |",
            "| --- | ---: | ---: |",
            *stage_rows,
            "",
            f"Staging through files adds **{extra:.2f} s** ({extra / base:.1%}) to the in-process job's CPU. A Ray",
            "job pays it on top of Ray's own costs; the 2-actor speed-up of item 5 is judged against the",
            "in-process job, which does not. Machine: 2 cores; CPU seconds.",
        ]
    )


if __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    print(json.dumps(child(sys.argv[2], int(sys.argv[3]))))
