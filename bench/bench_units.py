"""The driver's unit plan of JSONL input (issue 31): what the driver reads and spends to cut a file into
work units, now that the workers count the lines (``LineCountTask``).

Generated JSONL of varied line lengths (lognormal: median ~1.1 KB, 1% over 13 KB, the longest ~80 KB;
CJK and emoji text), at two sizes; the figure is the larger minus the smaller (marginal), median of 5,
runs interleaved, page cache warm. In the same run, the baseline is what planning cost before: the file
read through in 4 MiB blocks with its newlines counted (``bytes.count``), in the driver. Measured:

- the driver: ``plan_units`` (a seek and a short read at each cut), CPU seconds and bytes read
  (``/proc/self/io`` ``rchar``);
- the workers: ``count_lines`` over every ``LineCountTask`` of the plan, CPU seconds (the same bytes as
  the baseline, now spread over the workers).
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import WORK

COMMAND = ".venv/bin/python -m bench.run_all bench_units"
SIZES_MB = (64, 512)
UNIT_BYTES = 32 * 2**20  # input.unit_bytes' default
REPEATS = 5
READ_BLOCK = 4 * 2**20
TEXTS = ("why is the sky blue? ", "空はなぜ青いのか。", "🙂 ok ", "explain step by step: ")


def corpus(megabytes: int) -> Path:
    """``megabytes`` of JSONL chats of varied line lengths (deterministic; cached in bench/_work)."""
    path = WORK / f"units_{megabytes}mb.jsonl"
    if path.exists():
        return path
    WORK.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(megabytes)
    written, target = 0, megabytes * 10**6
    with open(path, "w", encoding="utf-8") as out:
        while written < target:
            lengths = np.clip(rng.lognormal(6.5, 1.0, 4096), 1, 40_000).astype(int)
            rows = []
            for i, n in enumerate(lengths.tolist()):
                text = TEXTS[i % len(TEXTS)] * max(1, n // 20)
                chat = [{"role": "user", "content": text}, {"role": "assistant", "content": text[: n // 2 + 1]}]
                rows.append(json.dumps({"messages": chat}, ensure_ascii=False))
            block = "".join(row + "\n" for row in rows)
            out.write(block)
            written += len(block.encode("utf-8"))
    return path


def _rchar() -> int:
    with open("/proc/self/io") as handle:
        return int(next(line for line in handle if line.startswith("rchar:")).split()[1])


def _read_through(path: Path) -> int:
    """The former planner's cost: every byte read, its newlines counted."""
    newlines = 0
    with open(path, "rb") as handle:
        while block := handle.read(READ_BLOCK):
            newlines += block.count(b"\n")
    return newlines


def _measure(path: Path) -> dict[str, float]:
    from cook.config import InputConfig
    from cook.runner.plan import count_lines, line_count_tasks, plan_units

    config = InputConfig(path=str(path), unit_bytes=UNIT_BYTES)
    tasks = line_count_tasks(plan_units(config))
    runs: dict[str, Callable[[], Any]] = {
        "baseline": lambda: _read_through(path),
        "driver": lambda: plan_units(config),
        "workers": lambda: [count_lines(task.path, task.spans) for task in tasks],
    }
    for run in runs.values():
        run()  # warm: the page cache, imports
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    read: dict[str, list[int]] = {name: [] for name in runs}
    for _ in range(REPEATS):
        for name, run in runs.items():
            before, start = _rchar(), time.process_time()
            run()
            seconds[name].append(time.process_time() - start)
            read[name].append(_rchar() - before)
    figures = {f"{name}_s": statistics.median(values) for name, values in seconds.items()}
    figures |= {f"{name}_bytes": statistics.median(values) for name, values in read.items()}
    figures["units"] = len(plan_units(config))
    figures["mb"] = os.path.getsize(path) / 1e6
    return figures


def run() -> str:
    from cook.runner.plan import SEEK_BLOCK

    small, big = (_measure(corpus(size)) for size in SIZES_MB)
    mb, units = big["mb"] - small["mb"], big["units"] - small["units"]

    def marginal(key: str) -> float:
        return big[key] - small[key]

    rows = []
    for name, what in (
        ("baseline", "baseline: the file read through, newlines counted (the driver's former planning)"),
        ("driver", "**the driver**: `plan_units` (a seek and a short read at each cut)"),
        ("workers", "the workers: `count_lines` of every `LineCountTask`"),
    ):
        seconds, read = marginal(f"{name}_s"), marginal(f"{name}_bytes")
        rows.append(
            f"| {what} | {seconds * 1000:,.1f} | {seconds / mb * 1000:.3f} | {read / 1e6:,.2f} | "
            f"{seconds / marginal('baseline_s'):.3f} |"
        )
    table = "\n".join(rows)
    per_unit_kb = marginal("driver_bytes") / units / 1e3
    return f"""## The driver's unit plan of JSONL input (issue 31)

`{COMMAND}`

Generated JSONL chats of varied line lengths (lognormal, CJK and emoji text), {SIZES_MB[1]} MB minus
{SIZES_MB[0]} MB ({mb:,.0f} MB and {units} units of `input.unit_bytes` {UNIT_BYTES >> 20} MiB marginal),
median of {REPEATS}, runs interleaved, page cache warm (on a network file system the read-through is
slower still, while the driver's reads stay one block per cut).

| who | CPU ms | CPU ms per MB | MB read | / baseline CPU |
| --- | ---: | ---: | ---: | ---: |
{table}

The driver reads {per_unit_kb:,.1f} KB per unit: one `SEEK_BLOCK` ({SEEK_BLOCK >> 10} KiB) read from each cut's
mark, more only where that line is longer. Its planning no longer grows with the input's bytes; the
newline count is the workers', before any unit cooks ({marginal("workers_s") / marginal("baseline_s"):.2f}x the baseline's CPU, in
tasks of about 256 MiB of one file).
"""
