"""``cook repack`` against a fresh ``cook run`` of the same raw input, text and images (issue 32 item 5).

    .venv/bin/python -m bench.run_all bench_repack

The raw inputs and jobs are bench_job's: photo-like JPEGs as a LLaVA WebDataset (native patch grids:
decode + patchify, ``pipelines/omni_sft.yaml``, ``ray.direct_io=true``) and copies of the demo chats
(``pipelines/text_sft.yaml``, 4 MiB work units). Each input, big and small, is cooked once at
``packing.seq_len`` ``SOURCE_SEQ_LEN`` (not measured). Then, per repeat and interleaved, with 2 Ray
actors and in-process (``--workers 0``): a fresh ``cook run`` at ``TARGET_SEQ_LEN`` and ``cook repack``
of the cooked source to ``TARGET_SEQ_LEN``, each on the big and the small input. Every figure is **marginal**, (big) - (small)
of the same command, so start-up (imports, Ray, tokenizer, manifest) cancels; the median over
``BENCH_REPEATS`` repeats (default 3). CPU is the whole job's process tree (bench/job_run.py). Each big
repack's shards are checked byte-identical to the fresh cook's. The sources record an ``input.unit_bytes``
(which sizes a repack's units) small enough that the small repack has as many units as the most actors:
cook starts at most one actor per unit, and a small run with fewer actors would leave an actor's
start-up in the marginal.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import shutil
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.bench_job import IMAGE_SETS, SINGLE_THREAD_ENV, SMALL_IMAGES, SMALL_TEXT_COPIES, TEXT_SETS, image_dataset
from bench.common import REPO, WORK, single_threaded_tokenizers, text_corpus
from bench.job_run import become_subreaper, run_job
from cook.runner.repack_index import SPLIT_UNITS

COMMAND = ".venv/bin/python -m bench.run_all bench_repack"
SOURCE_SEQ_LEN = 16384
TARGET_SEQ_LEN = 8192
EXECUTORS = (2, 0)  # --workers: 2 Ray actors, in-process
CPU_RATIO_TARGET = 10.0  # fresh cook CPU / repack CPU, at least
ENV = {**os.environ, "RAY_AUTH_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false"}


STORAGE_SETS = {  # how the image workloads store frames: raw patches, or JPEG frames (q95, 4:4:4)
    storage: ("--set", f"media.image.storage={storage}", "--set", f"media.video.storage={storage}")
    for storage in ("raw", "jpeg")
}


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


@dataclass(frozen=True)
class Workload:
    name: str
    pipeline: str
    sets: tuple[str, ...]
    inputs: dict[str, Path]  # "big", "small"
    unit: str  # what a record is


@dataclass(frozen=True)
class Run:
    wall_s: float
    cpu_s: float
    sequences: int
    shards: dict[str, str]  # name -> sha256


def _job(args: list[str], out: Path) -> Run:
    stats = run_job(args, REPO, ENV, WORK / "repack_scratch")
    if stats.rc != 0:
        raise RuntimeError(f"cook {' '.join(args)} exited {stats.rc}:\n{stats.stderr[-3000:]}")
    counts = json.loads((out / "cook_manifest.json").read_text())["counts"]
    shards = {p.name: _sha256(p) for p in sorted(out.glob("shard-*.tar"))}
    print(f"  {args[0]} {out.name}: wall {stats.wall_s:.1f} s, job CPU {stats.tree_cpu_s:.1f} s", file=sys.stderr)
    return Run(stats.wall_s, stats.tree_cpu_s, counts["sources_packed"], shards)


def _sha256(path: Path) -> str:
    """The file's sha256, hashed from a read-only mapping (each byte is read once, nothing is copied)."""
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        return hashlib.sha256(mapped).hexdigest()


def _cook_args(work: Workload, size: str, out: Path, seq_len: int, workers: int = 2) -> list[str]:
    return [
        "run", work.pipeline, "--input", str(work.inputs[size]), "--output", str(out), "--workers", str(workers),
        *work.sets, "--set", f"packing.seq_len={seq_len}", "--overwrite", "--quiet", "--json",
    ]  # fmt: skip


def source(work: Workload, size: str, unit_bytes: int | None = None) -> Path:
    """The input cooked once at ``SOURCE_SEQ_LEN`` (kept for every repeat); ``unit_bytes``: the
    ``input.unit_bytes`` it records, which sizes the repack's units."""
    out = WORK / f"repack_src_{work.name}_{size}"
    sets = [] if unit_bytes is None else ["--set", f"input.unit_bytes={unit_bytes}"]
    _job([*_cook_args(work, size, out, SOURCE_SEQ_LEN), *sets], out)
    return out


def repack_units(path: Path) -> int:
    """How many units ``cook repack path`` cuts (cook starts at most one actor per unit)."""
    from cook.runner.repack import load_sources, plan_repack, repack_config

    sources = load_sources([str(path)], str(WORK / "repack_units_probe"))
    return len(plan_repack(sources, repack_config(sources[0], [], {}))[0])


def sources_for(work: Workload) -> dict[str, Path]:
    """The small and big sources, both recording an ``input.unit_bytes`` that cuts the small one's repack into
    ``max(EXECUTORS)`` units at least, so that the small repack starts as many actors as the big one and the
    marginal holds no actor's start-up. (A unit of a long window is cut at ``SPLIT_UNITS`` x ``unit_bytes``.)"""
    small = source(work, "small")
    actors = max(EXECUTORS)
    if repack_units(small) < actors:
        shard_bytes = sum(p.stat().st_size for p in small.glob("shard-*.tar"))
        unit_bytes = max(1 << 16, shard_bytes // (SPLIT_UNITS * actors + 2))
        small = source(work, "small", unit_bytes)
        if repack_units(small) < actors:
            raise RuntimeError(f"bench_repack {work.name}: the small repack has fewer units than {actors} actors")
        return {"small": small, "big": source(work, "big", unit_bytes)}
    return {"small": small, "big": source(work, "big")}


@dataclass(frozen=True)
class Figures:
    fresh_wall: list[float]
    fresh_cpu: list[float]
    repack_wall: list[float]
    repack_cpu: list[float]
    sequences: int


def measure(work: Workload, repeats: int) -> dict[int, Figures]:
    """Figures per ``--workers`` in ``EXECUTORS``; every repeat runs each executor's jobs in turn."""
    sources = sources_for(work)
    keys = ("fresh_wall", "fresh_cpu", "repack_wall", "repack_cpu")
    series: dict[int, dict[str, list[float]]] = {w: {k: [] for k in keys} for w in EXECUTORS}
    sequences = 0
    for repeat in range(repeats):
        print(f"bench_repack {work.name}: repeat {repeat + 1}/{repeats}", file=sys.stderr)
        for workers in EXECUTORS:
            runs: dict[tuple[str, str], Run] = {}
            for size in ("small", "big"):
                fresh, repacked = WORK / "repack_fresh", WORK / "repack_out"
                runs["fresh", size] = _job(_cook_args(work, size, fresh, TARGET_SEQ_LEN, workers), fresh)
                args = ["repack", str(sources[size]), "--output", str(repacked), "--workers", str(workers)]
                args += ["--set", f"packing.seq_len={TARGET_SEQ_LEN}", "--overwrite", "--quiet", "--json"]
                runs["repack", size] = _job(args, repacked)
                if runs["repack", size].shards != runs["fresh", size].shards:
                    raise RuntimeError(f"bench_repack {work.name} {size}: repacked shards differ from the fresh cook's")
                shutil.rmtree(fresh)
                shutil.rmtree(repacked)
            for job in ("fresh", "repack"):
                series[workers][f"{job}_wall"].append(runs[job, "big"].wall_s - runs[job, "small"].wall_s)
                series[workers][f"{job}_cpu"].append(runs[job, "big"].cpu_s - runs[job, "small"].cpu_s)
            sequences = runs["repack", "big"].sequences - runs["repack", "small"].sequences
    for path in sources.values():
        shutil.rmtree(path)
    return {workers: Figures(**series[workers], sequences=sequences) for workers in EXECUTORS}


def _rows(work: Workload, workers: int, fig: Figures) -> list[str]:
    med = {
        name: statistics.median(getattr(fig, name)) for name in ("fresh_wall", "fresh_cpu", "repack_wall", "repack_cpu")
    }
    cpu_ratio, wall_ratio = med["fresh_cpu"] / med["repack_cpu"], med["fresh_wall"] / med["repack_wall"]
    ok = "met" if cpu_ratio >= CPU_RATIO_TARGET else "**not met**"
    executor = f"{workers} actors" if workers else "in-process"
    rows = []
    for job, label in (
        ("fresh", f"fresh `cook run` at {TARGET_SEQ_LEN}"),
        ("repack", f"`cook repack` to {TARGET_SEQ_LEN}"),
    ):
        walls, cpus = getattr(fig, f"{job}_wall"), getattr(fig, f"{job}_cpu")
        rows.append(
            f"| {work.name} | {executor} | {label} | {med[f'{job}_wall']:.2f} ({min(walls):.2f} .. {max(walls):.2f}) "
            f"| {med[f'{job}_cpu']:.2f} ({min(cpus):.2f} .. {max(cpus):.2f}) | {med[f'{job}_cpu'] / med[f'{job}_wall']:.2f} "
            f"| {fig.sequences / med[f'{job}_wall']:,.0f} {work.unit}/s |"
        )
    rows.append(
        f"| {work.name} | {executor} | **CPU fresh / repack** | wall {wall_ratio:.1f}x | **{cpu_ratio:.1f}x** (target ≥ {CPU_RATIO_TARGET:.0f}x: {ok}) | | |"
    )
    return rows


def report() -> str:
    become_subreaper()
    single_threaded_tokenizers()
    repeats = _env_int("BENCH_REPEATS", 3)
    n_images, copies = _env_int("BENCH_REPACK_IMAGES", 384), _env_int("BENCH_REPACK_TEXT_COPIES", 640)
    image_inputs = {"big": image_dataset(n_images), "small": image_dataset(SMALL_IMAGES)}
    images = Workload("images", "pipelines/omni_sft.yaml", (*IMAGE_SETS, *STORAGE_SETS["raw"]), image_inputs, "images")
    jpeg = Workload(
        "images-jpeg", "pipelines/omni_sft.yaml", (*IMAGE_SETS, *STORAGE_SETS["jpeg"]), image_inputs, "images"
    )
    text = Workload(
        "text",
        "pipelines/text_sft.yaml",
        tuple(TEXT_SETS),
        {"big": text_corpus(copies), "small": text_corpus(SMALL_TEXT_COPIES)},
        "sequences",
    )
    chosen = os.environ.get("BENCH_REPACK_WORKLOADS", "text,images,jpeg").split(",")
    workloads = {"text": text, "images": images, "jpeg": jpeg}
    results = [(workloads[name], measure(workloads[name], repeats)) for name in chosen]
    rows = [row for work, figs in results for workers, fig in figs.items() for row in _rows(work, workers, fig)]
    table = "\n".join(rows)
    sizes = f"BENCH_REPEATS={repeats} BENCH_REPACK_IMAGES={n_images} BENCH_REPACK_TEXT_COPIES={copies}"
    return f"""## `cook repack` vs a fresh cook of the same raw input (issue 32)

`{sizes} {COMMAND}`

Text: {copies} vs {SMALL_TEXT_COPIES} copies of the demo chats (`pipelines/text_sft.yaml --set input.unit_bytes=4194304`).
Images: {n_images} vs {SMALL_IMAGES} photo-like JPEGs, 640x480 .. 1600x1184, as a LLaVA WebDataset (`pipelines/omni_sft.yaml
--set input.format=wds --set cooker=llava --set ray.direct_io=true`). Each input is cooked once at `packing.seq_len={SOURCE_SEQ_LEN}`
(not measured); then, interleaved per repeat, with `--workers 2` (2 Ray actors) and `--workers 0` (in-process): a fresh `cook run` at
`packing.seq_len={TARGET_SEQ_LEN}`, and `cook repack SRC --set packing.seq_len={TARGET_SEQ_LEN}` of the cooked source. Every figure is
marginal (big - small run of the same command: start-up cancels; each source records an `input.unit_bytes` that cuts
the small repack into as many units as actors, so both runs start the same actors), median of {repeats} repeats (min .. max); job CPU is
the whole process tree's (driver, Ray, actors; bench/job_run.py); cores = job CPU / wall. Every repacked
dataset's shards were byte-identical to the fresh cook's.

Both jobs build and write the same packs (build_pack, meta.json, tar headers, a sha256 of every shard
byte, Energon's index); under Ray both stage each unit's ids and masks in a stage file, and the fresh
cook its patch rows too, where a repack stages only where they lie in the source shard (`PatchSpan`:
the rows move once, source shard -> new shard). The repack skips reading, decoding and tokenizing.
What a repack still does is its floor: per output byte, a sha256 (the manifest's digest of every
shard); per sequence and per pack, the pack building and tar writing both jobs share. At these
sizes a marginal wall is within Ray's start-up variance (about a second a run): read the CPU.

| input | executor | job | marginal wall s | marginal job CPU s | cores | rate |
| --- | --- | --- | ---: | ---: | ---: | ---: |
{table}

Machine: {os.cpu_count()} cores, shared with other work (1-min load average {os.getloadavg()[0]:.1f} at the end).
"""


def run() -> str:
    """The section, measured in a fresh process (it becomes the child subreaper of the jobs)."""
    env = {**os.environ, **{name: "1" for name in SINGLE_THREAD_ENV}}
    done = subprocess.run(
        [sys.executable, "-m", "bench.bench_repack"], env=env, cwd=REPO, check=True, stdout=subprocess.PIPE, text=True
    )
    return done.stdout


if __name__ == "__main__":
    print(report(), end="")
