"""Packing: wall time and fill of every algorithm on 1M lengths, and a comparison with TRL's BFD packer.

    /work/main/.venv/bin/python -m bench.run_all bench_packing

Inputs (fixed seed): ``text`` is log-normal (median 600, sigma 1) clipped to [8, C]; ``multimodal``
is half text, half image samples (1-13 tiles of 256 tokens, i.e. 256-3328, plus a log-normal prompt
of median 150), clipped to [8, C]. The lower bound is ceil(total / C); efficiency is total / (packs * C).
TRL (``trl.data_utils.pack_dataset(ds, C, strategy="bfd")``, one batch over the whole dataset, so it
packs globally like we do) runs on the first 200k lengths: 1M rows of ``input_ids`` need more than 20
GB of memory there. Its time includes writing the packed ``input_ids`` column; ours is the index
partition only (the packer builds arrays later), so the time ratio favours us by that much.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from cook.packing import ALGORITHMS, pack

N = 1_000_000
N_TRL = 200_000
SEED = 0
REPEATS = 3
CAPACITIES = (8192, 16384)
COMMAND = "/work/main/.venv/bin/python -m bench.run_all bench_packing"

T = TypeVar("T")


def raw_lengths(kind: str, n: int) -> np.ndarray:
    """Unclipped lengths (float64 [n]) of one input kind; clipped per capacity by ``lengths_for``."""
    rng = np.random.Generator(np.random.PCG64([SEED, ("text", "multimodal").index(kind)]))
    text = rng.lognormal(np.log(600), 1.0, n)
    if kind == "text":
        return text
    prompt = rng.lognormal(np.log(150), 0.8, n)
    image = 256 * rng.integers(1, 14, n) + prompt
    return np.where(rng.random(n) < 0.5, text, image)


def lengths_for(raw: np.ndarray, capacity: int) -> np.ndarray:
    return np.clip(np.round(raw), 8, capacity).astype(np.int64)  # int64 [n]


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    """Median wall time of REPEATS calls, and the last result."""
    times, result = [], None
    for _ in range(REPEATS):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    assert result is not None
    return statistics.median(times), result


def trl_bfd(lengths: np.ndarray, capacity: int) -> tuple[float, int]:
    """TRL's BFD over a Dataset whose ``input_ids`` have these lengths: (median seconds, packs)."""
    import datasets
    import pyarrow as pa
    from trl.data_utils import pack_dataset

    offsets = pa.array(np.r_[0, np.cumsum(lengths)].astype(np.int64))
    values = pa.array(np.zeros(int(lengths.sum()), dtype=np.int8))
    table = pa.table({"input_ids": pa.LargeListArray.from_arrays(offsets, values)})
    dataset = datasets.Dataset(datasets.table.InMemoryTable(table))
    seconds, packed = timed(lambda: pack_dataset(dataset, capacity, strategy="bfd", map_kwargs={"batch_size": None}))
    return seconds, len(packed)


def _timed_packs(lengths: np.ndarray, capacity: int) -> list[tuple[str, float, int]]:
    """(algorithm, median seconds, packs) for every algorithm on ``lengths``."""
    results = []
    for name in ALGORITHMS:
        seconds, packs = timed(lambda name=name: pack(lengths, capacity, name))
        results.append((name, seconds, len(packs)))
    return results


def main_rows(kind: str, capacity: int, lengths: np.ndarray) -> list[str]:
    total = int(lengths.sum())
    bound = -(-total // capacity)
    return [
        f"| {kind} | {capacity} | {name} | {seconds:.2f} | {packs:,} | {bound:,} | "
        f"{packs / bound:.4f} | {total / (packs * capacity):.4f} |"
        for name, seconds, packs in _timed_packs(lengths, capacity)
    ]


def trl_rows(kind: str, capacity: int, lengths: np.ndarray) -> list[str]:
    trl_seconds, trl_packs = trl_bfd(lengths, capacity)
    rows = [f"| {kind} | {capacity} | TRL bfd | {trl_seconds:.2f} | {trl_packs:,} | 1 | 1 |"]
    rows += [
        f"| {kind} | {capacity} | {name} | {seconds:.2f} | {packs:,} | "
        f"{seconds / trl_seconds:.3f} | {packs / trl_packs:.4f} |"
        for name, seconds, packs in _timed_packs(lengths, capacity)
    ]
    return rows


def run() -> str:
    main = [
        "| inputs | C | algorithm | time s | packs | lower bound | packs / bound | efficiency |",
        "|---|---|---|---|---|---|---|---|",
    ]
    versus = [
        "| inputs | C | packer | time s | packs | time / TRL | packs / TRL |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind in ("text", "multimodal"):
        raw = raw_lengths(kind, N)
        for capacity in CAPACITIES:
            lengths = lengths_for(raw, capacity)
            main += main_rows(kind, capacity, lengths)
            versus += trl_rows(kind, capacity, lengths[:N_TRL])
    import trl

    load = os.getloadavg()[0]
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    machine += f", 1-min load average {load:.1f} at the end: other work on the machine inflates times"
    return "\n".join(
        [
            "## Packing",
            "",
            f"`{COMMAND}`",
            "",
            f"{N:,} lengths per input, seed {SEED}; times are the median of {REPEATS} runs ({machine}).",
            "text: log-normal, median 600, sigma 1, clipped to [8, C]. multimodal: half text, half image",
            "samples (256-3328 image tokens in 256-token tiles, plus a log-normal prompt of median 150).",
            "Lower bound = ceil(total tokens / C); efficiency = total tokens / (packs * C).",
            "",
            *main,
            "",
            f'Against TRL {trl.__version__} `pack_dataset(strategy="bfd")` over the whole dataset in one',
            f"batch, on the first {N_TRL:,} lengths (1M rows of `input_ids` need > 20 GB in TRL). TRL's time",
            "includes writing the packed `input_ids`; ours is the index partition only.",
            "",
            *versus,
            "",
        ]
    )
