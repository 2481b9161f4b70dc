"""The driver on its own: ``run_pipeline``'s real ``Driver`` fed by an executor that cooks nothing (issue 31).

    .venv/bin/python -m bench.run_all bench_driver

``SyntheticExecutor`` implements ``cook.runner.driver.Executor``: each job is answered at once with
the result a worker would send (``UnitDone``: counts, rejects; ``WindowDone``: the window's pack count
and stats, from the real ``plan_window_task`` over the units' lengths, which the synthetic workers
keep; ``WriteDone``: each shard's sha256, size, counts; ``IndexDone``), built from ``(SEED, unit)`` alone, passed through the wire
form (``encode_result`` on the worker's side, ``decode_result`` on the driver's, as the Ray executor
does) and with Ray's slot and lookahead sizes for ``ACTORS`` actors. Everything else is the real
run: the run identity, the tokenizer load and backend self-check, windows, planning, write jobs,
commits, rejects, checkpoints (``state.json``) and the manifest. No shard bytes exist, nor their
Energon index rows, nor ``.nv-meta/``: workers write those (the ``IndexTask`` is answered at once), and
nothing in the driver reads them. Every unit names one real file (the demo
chats): the run identity stats it and the tokenizer backend's self-check reads unit 0's first records.

Each (shape, samples) is first run that way once and recorded (``--record``: every job and its
result payload, in order); the measured runs then answer the jobs from the recording
(``ReplayExecutor``: precomputed results, at once; a job that differs from the recorded one fails the
run). So the measured process does nothing a worker does, and no worker data passes through its
caches (the earlier method, the driver's process minus the synthetic workers' timed CPU, is shown
beside it). The recording is read a line per job, so it is not in the peak RSS. Ray's own per-job cost in
the driver (``.remote``, ``ray.wait``, ``ray.get``) is not in it, nor the unlinks of staged units
(the replay's store holds nothing): it is measured apart (``--ray``: the real ``RayExecutor``, its
actors ``EchoWorker``s that answer every job at once with a write job's result of three shards) and
added per job.

Shapes (``SHAPES``): the shipped pipelines' windows, ``packing.seq_len`` and ``output.shard_size``;
text units of 10,000 records, image units of 1,000 samples, video units of 500 clips. Each measured
run is a fresh process (``python -m bench.bench_driver --child SHAPE SAMPLES RECORDING``), which
reports its CPU and its peak RSS (``VmHWM`` of ``/proc/self/status``: this process image's own;
``ru_maxrss`` also counts the parent's resident memory at the fork, which Linux carries across the
``exec``), and its CPU after start-up (from the executor's creation, once the tokenizer is loaded and checked, to the end,
publishing included): the per-sample fits use that, since start-up's own spread between runs is as
large as the per-sample work at these sizes.
"""

from __future__ import annotations

import cProfile
import functools
import hashlib
import json
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from bench.common import REPO, WORK
from cook import format as fmt
from cook.config import PipelineConfig, VideoConfig, load_config
from cook.errors import RejectReason
from cook.format import Counts
from cook.manifest import ShardInfo
from cook.media.image import choose_grid
from cook.media.video import frame_count
from cook.runner.pipeline import RunSummary, run_pipeline
from cook.runner.progress import UnitProgress
from cook.runner.ray_executor import ACTORS_PER_JOB, IN_FLIGHT_PER_ACTOR, MAX_JOBS_PER_CALL, jobs_per_call, limits
from cook.runner.staging import MemoryStore, SampleStore
from cook.runner.units import (
    IndexDone,
    IndexTask,
    Job,
    Result,
    ShardDone,
    ShardTask,
    Unit,
    UnitSummary,
    WindowTask,
    WriteDone,
    WriteTask,
    decode_jobs,
    decode_result,
    encode_result,
)
from cook.runner.windows import SHARDS_PER_WRITE, plan_window_task
from cook.types import RejectRecord

COMMAND = ".venv/bin/python -m bench.run_all bench_driver"
SEED = 31
ACTORS = 64  # the Ray executor's slots (2 per actor) and lookahead (6 per actor) for this many actors
NAMED_FILE = REPO / "tests" / "assets" / "demo_data" / "chat.jsonl"  # what every unit names
REJECT_RATE = 0.005  # bench_job's text: 1 bad record in 236
BLOCK = 512
NPY_HEADER = 128
TARGET_SAMPLES = 100_000_000
RAW = WORK / "bench_driver.json"  # the last run's measurements, as measured
CORES_TARGET = 1000
RSS_TARGET_GIB = 2.0


@dataclass(frozen=True)
class Shape:
    name: str
    pipeline: str
    unit_records: int
    visual: bool  # samples carry images (patch counts, the pixel members in each pack)
    heavy: bool  # the shards copy raw patches (a write job a shard), not frames stored png/jpeg (``heavy_sample``)
    record_bytes: int  # input bytes per record (progress only)
    video: bool = False  # the visual item is a clip's sampled frames (and its sound), not a photo


SHAPES = {
    "text": Shape("text", "pipelines/text_sft.yaml", 10_000, False, False, 1_550),
    "images": Shape("images", "pipelines/omni_sft.yaml", 1_000, True, False, 330_000),  # jpeg frames, as shipped
    # a tar of 500 clips of ~2 MB (a ~1 GB WebDataset shard: one unit), frames stored jpeg as shipped
    "video": Shape("video", "pipelines/omni_sft.yaml", 500, True, False, 2_000_000, video=True),
}


def shape_config(shape: Shape, out_dir: str) -> PipelineConfig:
    return load_config(REPO / shape.pipeline, [f"output.dir={out_dir}", f"input.path={NAMED_FILE}"])


def shape_units(shape: Shape, samples: int) -> list[Unit]:
    """``samples`` records in units of ``shape.unit_records``, each naming the one demo file."""
    size = os.path.getsize(NAMED_FILE)
    count = -(-samples // shape.unit_records)
    unit_bytes = shape.unit_records * shape.record_bytes
    return [Unit(i, str(NAMED_FILE), "jsonl", (0, size), size_bytes=unit_bytes) for i in range(count)]


# ---------------------------------------------------------------- what the workers would send


@functools.cache
def _video_rules(pipeline: str) -> tuple[VideoConfig, tuple[int, int]]:
    """The pipeline's video settings and its patch grid for a 16:9 frame (720p: any 16:9 size gives it)."""
    video = load_config(REPO / pipeline).media.video
    return video, choose_grid(720, 1280, video.target_patches, video.target_patches)


def unit_summary(shape: Shape, unit: int, records: int, seq_len: int) -> UnitSummary:
    """A cooked unit: ``records`` in, ~0.5% rejected, the rest as samples with realistic lengths.

    Text: log-normal tokens per chat (median 700, long tail), 32 .. seq_len. Images: one image per
    sample at the native 16 px grid of a photo 640x480 .. 1600x1184 (sides multiples of 32, as in
    bench_job): 1,200 .. 7,400 patches, 4 patches per token, plus a log-normal text part (median 250).
    Video: one clip per sample, log-normal seconds (median 20, 2 .. 600) sampled by cook's own rules
    with the pipeline's settings (``frame_count``: omni_sft's 2 frames a second, 8 .. 32, an even count;
    ``choose_grid`` of a 16:9 frame: 24 x 42 = 1,008 patches; ``video_embeddings``), a "Frame i sampled at
    X.XX seconds: " prefix (~12 tokens) per pair of frames, the sound on 3 clips in 4 (~12.5 tokens a
    second), plus a log-normal text part (median 60).
    """
    rng = np.random.default_rng((SEED, unit))
    rejected = np.flatnonzero(rng.random(records) < REJECT_RATE)
    n = records - len(rejected)
    if shape.video:
        video, (grid_h, grid_w) = _video_rules(shape.pipeline)
        seconds = np.clip(rng.lognormal(np.log(20), 0.8, n), 2, 600)  # float64 [N]
        frames = np.array([frame_count(s, video) for s in seconds.tolist()], np.int32)  # int32 [N]
        n_patches = frames * (grid_h * grid_w)  # int32 [N]
        sound = np.where(rng.random(n) < 0.75, np.ceil(seconds * 12.5), 0)
        text = rng.lognormal(np.log(60), 0.8, n)
        embeddings = fmt.video_embeddings(frames, grid_h * fmt.PATCH_SIZE, grid_w * fmt.PATCH_SIZE)
        tokens = embeddings + 12 * (frames // fmt.TEMPORAL_PATCH) + sound + text
        lengths = np.clip(tokens, 32, seq_len).astype(np.int32)  # int32 [N]
    elif shape.visual:
        width, height = 32 * rng.integers(20, 51, n), 32 * rng.integers(15, 38, n)
        n_patches = ((width // 16) * (height // 16)).astype(np.int32)  # int32 [N]
        text = rng.lognormal(np.log(250), 0.8, n)
        lengths = np.clip(n_patches // 4 + text, 32, seq_len).astype(np.int32)  # int32 [N]
    else:
        n_patches = np.zeros(n, np.int32)
        lengths = np.clip(rng.lognormal(np.log(700), 1.0, n), 32, seq_len).astype(np.int32)
    reasons = (RejectReason.BAD_ROLE, RejectReason.NO_TARGET, RejectReason.TOO_LONG, RejectReason.MEDIA_DECODE)
    rejects = tuple(
        RejectRecord(f"part-{unit:05d}.jsonl#{i + 1}", reasons[i % len(reasons)], "synthetic reject for bench_driver")
        for i in rejected.tolist()
    )
    return UnitSummary(unit, records, rejects, lengths, n_patches, shape.heavy)


def shard_done(
    task: ShardTask, pack_bounds: np.ndarray, lengths: np.ndarray, n_patches: np.ndarray, seq_len: int
) -> ShardDone:
    """A written shard of ``task``'s packs: its size with the members as the writer lays them out
    (``.npy`` with a 128-byte header, ``meta.json``, tar headers and block padding), sha256, counts.
    ``pack_bounds``: int64 [packs + 1] into ``lengths``/``n_patches`` (int32 [S] of the task's samples,
    in pack order)."""
    bounds = pack_bounds.tolist()
    offset = 0
    for i in range(task.packs):
        a, b = bounds[i], bounds[i + 1]
        sizes = [NPY_HEADER + 4 * seq_len, NPY_HEADER + seq_len, NPY_HEADER + 4 * (b - a + 1)]
        sizes.append(sizes[-1])  # cu_seqlens_padded
        patches = int(n_patches[a:b].sum())
        if patches:
            sizes += [NPY_HEADER + 768 * patches, NPY_HEADER + 12 * (b - a)]  # pixel_patches, media_sizes
        sizes.append(40 + 90 * (b - a))  # meta.json
        offset += sum(BLOCK + size + (-size % BLOCK) for size in sizes)
    size = offset + 2 * BLOCK + (-(offset + 2 * BLOCK) % 10240)
    tokens = int(lengths.sum())
    counts = Counts(
        packs=task.packs,
        sources_packed=len(lengths),
        tokens=tokens,
        target_tokens=tokens * 3 // 5,
        padding_tokens=task.packs * seq_len - tokens,
    )
    sha256 = hashlib.sha256(f"bench_driver shard {task.shard_index}".encode()).hexdigest()
    info = ShardInfo(fmt.shard_name(task.shard_index), task.packs, task.first_pack, size, sha256)
    return ShardDone(task.shard_index, info, counts, "node-0")


class SyntheticStore(MemoryStore):
    """The workers' staging store (no unit staged before the run) holding what the synthetic workers
    keep: each unit's lengths and patch counts (no samples) and each window's plan; the driver drops them."""

    def held(self) -> tuple[int, int]:
        """Units and window plans still held."""
        return len(self._lengths), len(self._plans)


class _AnsweredAtOnce:
    """The queue both bench executors share: jobs answered one at a time, in the order submitted, with
    the Ray executor's slots and lookahead for ``actors``."""

    def __init__(self, store: SampleStore, actors: int) -> None:
        self.store = store
        self.slots, self.lookahead = limits(actors, jobs_per_call(0, actors))
        self.shards_per_write = SHARDS_PER_WRITE
        self.received_bytes = 0
        self.on_progress: Callable[[UnitProgress], None] | None = None
        self._jobs: deque[Job] = deque()

    def submit(self, job: Job) -> None:
        self._jobs.append(job)

    def outstanding(self) -> int:
        return len(self._jobs)

    def close(self) -> None:
        pass


class SyntheticExecutor(_AnsweredAtOnce):
    """``Executor`` whose jobs are answered at once, in the order submitted, through the wire form."""

    def __init__(
        self,
        shape: Shape,
        config: PipelineConfig,
        actors: int = ACTORS,
        profiler: cProfile.Profile | None = None,
        record: list[tuple[str, bytes]] | None = None,
    ) -> None:
        super().__init__(SyntheticStore(), actors)
        self.shape = shape
        self.record = record  # (job, result payload) in the order answered, for a ReplayExecutor
        self.profiler = profiler  # paused while the workers' side runs, so it profiles the driver alone
        self.seq_len = config.packing.seq_len
        self.packing = config.packing
        self.worker_cpu_s = 0.0  # making and encoding results, planning windows: the workers' side

    def next_done(self) -> Result:
        if self.profiler is not None:
            self.profiler.disable()
        start = time.process_time()
        job = self._jobs.popleft()
        payload = encode_result(self._work(job))
        if self.record is not None:
            self.record.append((job_key(job), payload))
        self.worker_cpu_s += time.process_time() - start
        if self.profiler is not None:
            self.profiler.enable()
        self.received_bytes += len(payload)
        return decode_result(payload)

    def _work(self, job: Job) -> Result:
        store = self.store
        if isinstance(job, Unit):
            summary = unit_summary(self.shape, job.index, self.shape.unit_records, self.seq_len)
            store.put(summary, [])
            return summary.done()
        if isinstance(job, WindowTask):
            plan, done = plan_window_task(job, store.lengths, self.packing)  # the real planning, as a worker runs it
            store.put_plan(job, plan)
            return done
        if isinstance(job, IndexTask):
            return IndexDone(job.shards)  # a worker's job: .nv-meta from the shards' rows, which do not exist here
        return WriteDone(tuple(self._shard(task) for task in job.shards))

    def _shard(self, task: ShardTask) -> ShardDone:
        store = self.store
        kept = store.plan(task.window)
        assert kept is not None, "a window is planned before its shards are handed out"
        refs, bounds = kept.packs_in(task.start, task.stop)
        units, positions = refs[:, 0], refs[:, 1]
        lengths = np.empty(len(units), np.int32)  # int32 [S]
        n_patches = np.empty(len(units), np.int32)
        for unit in np.unique(units).tolist():
            where = units == unit
            unit_lengths, unit_patches, _ = store.lengths(unit)
            lengths[where] = unit_lengths[positions[where]]
            n_patches[where] = unit_patches[positions[where]]
        return shard_done(task, bounds, lengths, n_patches, self.seq_len)


def job_key(job: Job) -> str:
    """What a job is, to check that a replay hands out the jobs the recording answered."""
    if isinstance(job, Unit):
        return f"unit {job.index}"
    if isinstance(job, WindowTask):
        return f"window {job.index}"
    if isinstance(job, IndexTask):
        return f"index {job.shards}"
    media = " media" if job.heavy else ""  # a heavy window's write: a call of its own, not a rider
    return f"shards {job.shards[0].shard_index}..{job.shards[-1].shard_index}{media}"


class ReplayStore(MemoryStore):
    """The driver's view of the workers' store in a replay: nothing staged before the run; what it
    drops was never held here."""

    def summary(self, unit: int) -> None:
        return None

    def drop(self, unit: int) -> None:
        pass

    def drop_plan(self, window: int) -> None:
        pass


class ReplayExecutor(_AnsweredAtOnce):
    """``Executor`` that answers each job, at once, with the result payload a ``SyntheticExecutor`` run
    recorded for it (the driver is deterministic: the same results make it hand out the same jobs,
    which is checked). Nothing a worker does runs in the driver's process: its CPU is the driver's
    own, and no worker data passes through its caches."""

    def __init__(self, recording: Iterable[tuple[str, bytes]], actors: int = ACTORS) -> None:
        super().__init__(ReplayStore(), actors)
        self.started_cpu_s = time.process_time()  # made once the tokenizer is loaded and checked: start-up is over
        self._recording = iter(recording)  # read as the jobs come: held whole, it would be in the peak RSS

    def next_done(self) -> Result:
        job = self._jobs.popleft()
        key, payload = next(self._recording)
        assert key == job_key(job), f"the replay hands out {job_key(job)} where the recording answered {key}"
        self.received_bytes += len(payload)
        return decode_result(payload)


def drive(
    shape: Shape,
    samples: int,
    out_dir: str,
    actors: int = ACTORS,
    profiler: cProfile.Profile | None = None,
    record: list[tuple[str, bytes]] | None = None,
) -> tuple[RunSummary, SyntheticExecutor]:
    """Run the real pipeline over ``samples`` synthetic records of ``shape`` into ``out_dir``
    (``record``: gets every job and its result payload, for ``replay``)."""
    config = shape_config(shape, out_dir)
    made: list[SyntheticExecutor] = []

    def factory(resolved: PipelineConfig) -> SyntheticExecutor:
        made.append(SyntheticExecutor(shape, resolved, actors, profiler, record))
        return made[0]

    summary = run_pipeline(config, factory, overwrite=True, progress=False, units=shape_units(shape, samples))
    return summary, made[0]


def replay(
    shape: Shape,
    samples: int,
    out_dir: str,
    recording: Iterable[tuple[str, bytes]],
    actors: int = ACTORS,
    made: list[ReplayExecutor] | None = None,
) -> RunSummary:
    """Run the real pipeline as ``drive`` did, its jobs answered from ``recording`` (``made``: gets
    the executor)."""
    config = shape_config(shape, out_dir)
    units = shape_units(shape, samples)
    executors = made if made is not None else []

    def factory(_: PipelineConfig) -> ReplayExecutor:
        executors.append(ReplayExecutor(recording, actors))
        return executors[-1]

    return run_pipeline(config, factory, overwrite=True, progress=False, units=units)


# ---------------------------------------------------------------- Ray's per-job cost in the driver

RAY_ACTORS = 2
RAY_JOBS = (300, 3000)  # jobs per measured round: the small one is subtracted
BIG_CALL = MAX_JOBS_PER_CALL  # jobs a call at a thousand actors (ray_executor.jobs_per_call)
FLEET = 1024  # the actors whose calls in flight Ray's cost is measured beside (the cores-fed columns' scale)


ECHO_SHARDS = 3  # a text window's shards (bench_driver text: 2,986 shards of 1,000 windows)


class EchoWorker:
    """Stands in for ``RayWorker`` in the actors: answers every job at once with ``PAYLOAD``, a write
    job's result of ``ECHO_SHARDS`` shards."""

    PAYLOAD = encode_result(
        WriteDone(
            tuple(
                ShardDone(
                    k, ShardInfo(fmt.shard_name(k), 256, 256 * k, 250_000_000, "ab" * 32), Counts(packs=256), "0" * 56
                )
                for k in range(7, 7 + ECHO_SHARDS)
            )
        )
    )

    def __init__(self, config: PipelineConfig, board: str, report_interval_s: float) -> None:
        pass

    def run(self, sent: bytes) -> list[bytes]:
        return [self.PAYLOAD] * len(decode_jobs(sent))  # the jobs as the executor sends them


class Sleeper:
    """Holds calls that stay unanswered for the whole measurement: the calls a fleet keeps in flight."""

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def _cpu_s() -> float:
    times = os.times()
    return times.user + times.system  # the whole process: every thread, Ray's own included


def ray_child(
    repeats: int, actors: int = RAY_ACTORS, per_call: int = 1, riders: int = 1, in_flight: int = 0
) -> dict[str, Any]:
    """The driver's CPU per job through the real ``RayExecutor`` (``actors`` echo actors, ``per_call``
    jobs a call, its slots kept full: ``.remote``, waiting for a call's answer, the progress board,
    ``decode_result``), marginal between ``RAY_JOBS`` rounds; and the driver process's CPU per idle second
    with Ray up. ``riders`` 1: a text window's jobs in turn, a unit, a window plan and a write (the two
    ride on the unit's call); 0: units alone (a call's own jobs, as a media write is). ``in_flight``:
    calls beside them, unanswered throughout, among the executor's running calls (a fleet's: a thousand
    actors keep ``IN_FLIGHT_PER_ACTOR`` calls each in flight)."""
    import ray

    from cook.runner import ray_executor

    ray_executor.RayWorker = EchoWorker  # type: ignore[misc]
    out_dir = str(WORK / "driver" / "ray")
    config = shape_config(SHAPES["text"], out_dir)
    config = replace(config, ray=replace(config.ray, jobs_per_call=per_call))
    executor = ray_executor.RayExecutor(config, None, actors)
    sleeper = ray.remote(num_cpus=0)(Sleeper).remote()
    for _ in range(in_flight):
        executor._running[sleeper.sleep.remote(3600.0)] = ([], 0)  # never answered while measured
    window = WindowTask(0, ((0, 0, 10_000),))
    write = WriteTask(
        tuple(ShardTask(k, 256 * k, window, 256 * (k - 7), 256 * (k - 6)) for k in range(7, 7 + ECHO_SHARDS))
    )
    unit = Unit(0, str(NAMED_FILE), "jsonl")
    mix = (unit, window, write) if riders else (unit,)  # a text window's jobs: cook, plan, write; or cooks
    try:

        def jobs(n: int) -> float:
            cpu0 = _cpu_s()
            submitted = 0
            for _ in range(n):
                while submitted < n and executor.outstanding() < executor.slots:
                    executor.submit(mix[submitted % len(mix)])
                    submitted += 1
                executor.next_done()
            return _cpu_s() - cpu0

        jobs(RAY_JOBS[0])  # warm
        rounds: dict[int, list[float]] = {n: [] for n in RAY_JOBS}
        for _ in range(repeats):
            for n in RAY_JOBS:
                rounds[n].append(jobs(n))
        cpu0 = _cpu_s()
        time.sleep(5.0)
        idle = (_cpu_s() - cpu0) / 5.0
    finally:
        ray.kill(sleeper)
        executor.close()
        shutil.rmtree(out_dir, ignore_errors=True)
    small, big = (statistics.median(rounds[n]) for n in RAY_JOBS)
    return {
        "per_job_s": (big - small) / (RAY_JOBS[1] - RAY_JOBS[0]),
        "rounds": {str(n): v for n, v in rounds.items()},
        "idle_cpu_per_s": idle,
        "payload_bytes": len(EchoWorker.PAYLOAD),
    }


# ---------------------------------------------------------------- one measurement, in a fresh process


def record(shape_name: str, samples: int, path: str) -> dict[str, Any]:
    """Drive the pipeline with the synthetic workers, write every job's result payload to ``path``;
    returns the workers' CPU."""
    out_dir = str(WORK / "driver" / f"{shape_name}-{samples}-record")
    recording: list[tuple[str, bytes]] = []
    cpu0 = time.process_time()
    _, executor = drive(SHAPES[shape_name], samples, out_dir, record=recording)
    cpu = time.process_time() - cpu0
    with open(path, "wb") as handle:  # one "job<TAB>payload" per line (a payload is JSON: no raw tab or newline)
        handle.writelines(key.encode() + b"\t" + payload + b"\n" for key, payload in recording)
    shutil.rmtree(out_dir, ignore_errors=True)
    return {"worker_cpu_s": executor.worker_cpu_s, "driver_cpu_s": cpu - executor.worker_cpu_s}


def peak_rss_kib() -> int:
    """This process image's peak resident memory, KiB: ``VmHWM`` (Linux). Not ``ru_maxrss``: a process
    started by ``subprocess`` reports at least its parent's resident memory at the fork there."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # not Linux


def child(shape_name: str, samples: int, recording_path: str, profile: bool) -> dict[str, Any]:
    """One measurement: the pipeline over ``samples`` records, its jobs answered from a recording."""
    shape = SHAPES[shape_name]
    out_dir = str(WORK / "driver" / f"{shape_name}-{samples}")
    rss_before_kib = peak_rss_kib()
    profiler = cProfile.Profile() if profile else None
    with open(
        recording_path, "rb"
    ) as handle:  # each line split once: no decoding of the bench's own in the driver's CPU
        recording = ((key.decode(), payload) for key, payload in (line[:-1].split(b"\t", 1) for line in handle))
        cpu0, wall0 = time.process_time(), time.perf_counter()
        if profiler is not None:
            profiler.enable()
        made: list[ReplayExecutor] = []
        summary = replay(shape, samples, out_dir, recording, made=made)
        if profiler is not None:
            profiler.disable()
        end = time.process_time()
        cpu, wall = end - cpu0, time.perf_counter() - wall0
    result = {
        "shape": shape_name,
        "samples": samples,
        "records_in": summary.counts["records_in"],
        "sources_packed": summary.counts["sources_packed"],
        "records_rejected": summary.counts["records_rejected"],
        "packs": summary.counts["packs"],
        "shards": summary.shards,
        "units": -(-samples // shape.unit_records),
        "driver_cpu_s": cpu,
        "after_startup_cpu_s": end - made[0].started_cpu_s,
        "wall_s": wall,
        "received_bytes": summary.driver_received_bytes,
        "peak_rss_kib": peak_rss_kib(),
        "rss_before_kib": rss_before_kib,
    }
    if profiler is not None:
        result["profile"] = profile_table(profiler)
    shutil.rmtree(out_dir, ignore_errors=True)
    return result


def profile_table(profiler: cProfile.Profile) -> str:
    """Markdown: the cumulative time of each of ``PROFILE_COSTS``, then the top own-time functions."""
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total = sum(tt for _, _, tt, _, _ in stats.values())
    lines = ["| cost | cumulative s (profiled) | share |", "| --- | ---: | ---: |"]
    for suffix, name, what in PROFILE_COSTS:
        cum = sum(ct for (f, _, n), (_, _, _, ct, _) in stats.items() if f.endswith(suffix) and n == name)
        lines.append(f"| {what} (`{name}`) | {cum:.2f} | {cum / total:.0%} |")
    lines += ["", "Top own-time functions:", "", "| function | calls | own s |", "| --- | --- | ---: |"]
    for (f, line, n), (_, calls, tt, _, _) in sorted(stats.items(), key=lambda kv: -kv[1][2])[:12]:
        where = f.split("site-packages/")[-1].removeprefix(str(REPO) + "/")
        lines.append(f"| `{where}:{line}({n})` | {calls:,} | {tt:.2f} |")
    return "\n".join(lines)


def _run_module(*args: str) -> dict[str, Any]:
    argv = [sys.executable, "-m", "bench.bench_driver", *args]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.splitlines()[-1]))


def recording(shape: str, samples: int) -> tuple[str, dict[str, Any]]:
    """The recording of ``shape`` at ``samples`` (made once, in a fresh process), and that run's
    workers' CPU s and driver CPU s (its process's minus the workers')."""
    path = WORK / "driver" / f"{shape}-{samples}.recording.tsv"
    path.parent.mkdir(parents=True, exist_ok=True)
    return str(path), _run_module("--record", shape, str(samples), str(path))


def measure(shape: str, samples: int, path: str, profile: bool = False) -> dict[str, Any]:
    return _run_module("--child", shape, str(samples), path, *(["--profile"] if profile else []))


# ---------------------------------------------------------------- the section


VIDEO_CLIPS = 64  # the video job's big run: bench_job.clip_spec's varied clips, against its 16


def worker_cpu(shape: str, repeats: int) -> tuple[float, int, str]:
    """The worker CPU per sample in this run: bench_job's in-process job (text: 1280 copies of the demo
    chats against 16; images: the windowed 768-photo job against its small one; video: ``VIDEO_CLIPS``
    varied clips against 16, omni_sft as shipped), marginal CPU of the process tree (the driver's in it,
    so a little high for the workers alone, which gives fewer cores fed, not more), median of
    ``repeats``: ``(CPU s, samples, how it was measured)``."""
    from bench import bench_job

    if shape == "text":
        work = bench_job.text_workload(1280)
    elif shape == "images":
        work = bench_job.image_workload(768, bench_job.WINDOW)
    else:
        work = bench_job.video_workload(VIDEO_CLIPS)
    runs = []
    for _ in range(repeats):
        small, big = bench_job.cook_job(work, "small", 0, False), bench_job.cook_job(work, "big", 0, False)
        runs.append((big.tree_cpu_s - small.tree_cpu_s, big.records - small.records))
    cpu, samples = sorted(runs, key=lambda r: r[0] / r[1])[len(runs) // 2]
    return cpu, samples, f"bench_job {work.name}, in-process, in this run: {cpu:.2f} s / {samples:,} records"


SIZES = {  # samples per measured run; images stop at 2M (their growth is superlinear: see the fit)
    "text": (1_000_000, 2_000_000, 4_000_000, 10_000_000),
    "images": (250_000, 500_000, 1_000_000, 2_000_000),
    "video": (100_000, 200_000, 400_000, 800_000),  # ~40 clips a shard: as many shards as images' sizes
}
PROFILED = ("text", 1_000_000)
PROFILE_COSTS = (  # (file suffix, function): the driver's costs, by cumulative time; none spans a paused
    # profiler (``run_pipeline`` and ``Driver.run`` do: cProfile under-counts them, so they are not listed)
    ("cook/runner/driver.py", "_consume", "consume unit counts (rejects, progress, cut windows)"),
    ("cook/runner/driver.py", "_planned", "number planned windows (shard tasks; commits)"),
    ("cook/runner/units.py", "decode_result", "decode results (JSON)"),
    ("cook/runner/driver.py", "_checkpoint", "checkpoints"),
    ("cook/writer/dataset.py", "sync", "  of which rejects fsync"),
    ("cook/runner/output_dir.py", "save", "  of which state.json + the shard log"),
    ("cook/writer/dataset.py", "add_rejects", "rejects.jsonl lines"),
    ("cook/writer/dataset.py", "publish", "publish (rejects renamed, manifest)"),
    ("cook/tokenize/tokenizer.py", "__init__", "tokenizer load + backend check (once)"),
)


def _median_runs(shape: str, samples: int, repeats: int) -> dict[str, Any]:
    path, recorded = recording(shape, samples)
    runs = [measure(shape, samples, path) for _ in range(repeats)]
    out = dict(runs[0])
    for key in ("driver_cpu_s", "after_startup_cpu_s", "wall_s", "peak_rss_kib"):
        out[key] = statistics.median(r[key] for r in runs)
    out["driver_cpu_all"] = [r["driver_cpu_s"] for r in runs]
    out["after_startup_all"] = [r["after_startup_cpu_s"] for r in runs]
    out["worker_cpu_s"] = recorded["worker_cpu_s"]
    out["driver_cpu_with_workers_s"] = recorded["driver_cpu_s"]
    with open(path, encoding="utf-8") as handle:  # a line per job answered
        keys = [line.split("\t", 1)[0] for line in handle]
    out["jobs"] = len(keys)
    # the jobs that ride on the Ray executor's calls (ray_executor.rides): window plans, text windows' writes
    out["riders"] = sum(
        key.startswith("window ") or (key.startswith("shards ") and not key.endswith(" media")) for key in keys
    )
    os.unlink(path)
    return out


def _profile_table(shape: str, samples: int) -> str:
    path, _ = recording(shape, samples)
    table = str(measure(shape, samples, path, profile=True)["profile"])  # the profiled run's other figures: not used
    os.unlink(path)
    return table


def _fit(xs: list[int], ys: list[float], degree: int) -> np.ndarray:
    return np.polyfit(np.array(xs, float), np.array(ys, float), degree)


def _shape_section(
    shape: str, rows: list[dict[str, Any]], worker: tuple[float, int, str]
) -> tuple[str, dict[str, float]]:
    xs = [r["samples"] for r in rows]
    cpu = [r["after_startup_cpu_s"] for r in rows]  # the fits: start-up's own spread (±0.15 s) is as large
    # as the per-sample part at these sizes
    startup = statistics.median(r["driver_cpu_s"] - r["after_startup_cpu_s"] for r in rows)
    rss = [r["peak_rss_kib"] / 2**20 for r in rows]  # GiB
    quad, cpu_lin, lin = _fit(xs, cpu, 2), _fit(xs, cpu, 1), _fit(xs, rss, 1)
    big, prev = rows[-1], rows[-2]
    marginal = (big["after_startup_cpu_s"] - prev["after_startup_cpu_s"]) / (big["samples"] - prev["samples"])
    slope = float(cpu_lin[0])  # driver CPU s per sample, over every measured size
    cpu_100m = startup + float(np.polyval(cpu_lin, TARGET_SAMPLES))
    rss_100m = float(np.polyval(lin, TARGET_SAMPLES))
    worker_s, worker_n, worker_src = worker
    worker_per = worker_s / worker_n
    lines = [
        "| samples | units | shards | packs | driver CPU s (each run) | after start-up (each run) | per sample "
        "| per unit | per shard | synthetic workers CPU s | driver CPU s, workers in its process | wall s | peak RSS |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        each = ", ".join(f"{c:.2f}" for c in r["driver_cpu_all"])
        after, each_after = r["after_startup_cpu_s"], ", ".join(f"{c:.3f}" for c in r["after_startup_all"])
        lines.append(
            f"| {r['samples']:,} | {r['units']:,} | {r['shards']:,} | {r['packs']:,} | "
            f"{r['driver_cpu_s']:.2f} ({each}) | **{after:.3f}** ({each_after}) | {after / r['samples'] * 1e6:.3f} µs | "
            f"{after / r['units'] * 1e3:.2f} ms | {after / r['shards'] * 1e3:.3f} ms | "
            f"{r['worker_cpu_s']:.2f} | {r['driver_cpu_with_workers_s']:.2f} | {r['wall_s']:.1f} | "
            f"{r['peak_rss_kib'] / 2**10:,.0f} MiB |"
        )
    a = float(quad[0])
    k, m = (float(v) for v in lin)
    fed = worker_per / slope
    lines += [
        "",
        f"- Fit, driver CPU s after start-up = {cpu_lin[1]:.3g} + {slope:.3g}·N (least squares over the {len(rows)} "
        f"sizes): **{slope * 1e6:.3f} µs** per sample; at 100M samples with start-up ({startup:.2f} s, the median) "
        f"**{cpu_100m:,.0f} s** ({cpu_100m / TARGET_SAMPLES * 1e6:.3f} µs per sample). Growth check: a quadratic fit's "
        f"N² term adds {a * big['samples'] ** 2:+.2f} s at {big['samples']:,} samples (near 0: the cost per "
        "sample does not grow with the job).",
        f"- Marginal driver CPU per sample, {prev['samples']:,} -> {big['samples']:,}: {marginal * 1e6:.3f} µs.",
        f"- Fit, peak RSS GiB = {m:.3g} + {k:.3g}·N: at 100M samples **{rss_100m:.2f} GiB** "
        f"(target ≤ {RSS_TARGET_GIB:g} GiB: {'met' if rss_100m <= RSS_TARGET_GIB else '**not met**'}).",
        f"- Worker CPU per sample: {worker_per * 1e6:,.1f} µs ({worker_src}). **Cores one driver can feed** = "
        f"worker CPU / driver CPU per sample (the fit's slope): **{fed:,.0f}**; "
        f"{worker_per / (cpu_100m / TARGET_SAMPLES):,.0f} over a whole 100M-sample job, start-up included; "
        f"{worker_per / marginal:,.0f} at the largest run's marginal rate "
        f"(target ≥ {CORES_TARGET:,}: {'met' if fed >= CORES_TARGET else '**not met**'}).",
    ]
    return "\n".join(lines), {"marginal": marginal, "slope": slope, "cpu_100m": cpu_100m, "rss_100m": rss_100m}


def run() -> str:
    repeats = int(os.environ.get("BENCH_REPEATS", 3))
    sections, measured = [], {}
    workers = {}
    for shape in SIZES:
        print(f"bench_driver: worker CPU per sample, {shape}", file=sys.stderr)
        workers[shape] = worker_cpu(shape, repeats)
    for shape, sizes in SIZES.items():
        rows = []
        for samples in sizes:
            print(f"bench_driver: {shape} {samples:,}", file=sys.stderr)
            rows.append(_median_runs(shape, samples, repeats))
        measured[shape] = rows
        sections.append((shape, *_shape_section(shape, rows, workers[shape])))
    profile = _profile_table(*PROFILED)
    print("bench_driver: Ray's per-job cost", file=sys.stderr)
    fleet = str(IN_FLIGHT_PER_ACTOR * FLEET)  # the calls a 1,024-actor fleet keeps in flight
    ray_cost = _run_module("--ray", str(repeats), str(RAY_ACTORS), "1", "1", fleet)
    ray_batched = _run_module("--ray", str(repeats), str(RAY_ACTORS), str(BIG_CALL), "1", fleet)
    ray_calls = _run_module("--ray", str(repeats), str(RAY_ACTORS), "1", "0", fleet)
    ray_calls_batched = _run_module("--ray", str(repeats), str(RAY_ACTORS), str(BIG_CALL), "0", fleet)
    ray_calls_alone = _run_module("--ray", str(repeats), str(RAY_ACTORS), "1", "0", "0")
    ray_calls_batched_alone = _run_module("--ray", str(repeats), str(RAY_ACTORS), str(BIG_CALL), "0", "0")
    raw = {
        "measured": measured,
        "profile": profile,
        "ray": ray_cost,
        "ray_batched": ray_batched,
        "ray_calls": ray_calls,
        "ray_calls_batched": ray_calls_batched,
        "ray_calls_alone": ray_calls_alone,
        "ray_calls_batched_alone": ray_calls_batched_alone,
        "workers": workers,
    }
    RAW.write_text(json.dumps(raw, indent=1))
    load = os.getloadavg()[0]
    text = [
        "## The driver on its own: CPU and memory per sample, unit and shard (issue 31, item 1)",
        "",
        f"`{COMMAND}`",
        "",
        "The real `run_pipeline` and `Driver` (run identity, tokenizer load, windows cut from unit counts,",
        "numbering, shard tasks, commits, rejects, checkpoints, manifest) fed by",
        "`ReplayExecutor`, which answers every job at once with the result a `SyntheticExecutor` run",
        "recorded for it (that run made what a worker would send: a window's",
        "plan: the real `plan_window_task`, counted as worker CPU), through the",
        "wire form (`encode_result` on the worker side, `decode_result` in the driver) and with the Ray",
        f"executor's slots and lookahead for {ACTORS} actors. Text: log-normal lengths (median 700 tokens);",
        "images: one photo-sized image per sample at its native patch grid (1,200 .. 7,400 patches) plus",
        "text; video: one clip per sample (median 20 s: 8 .. 32 frames of ~1,008 patches, the sound on 3 in 4)",
        f"plus text; {REJECT_RATE:.1%} of records rejected (a unit's reject lines cross as its worker made them).",
        "Shard results carry a sha256 string, the size and counts; no shard bytes exist, nor their Energon",
        "index rows or `.nv-meta/` (the workers write those: the final `IndexTask` is answered at once), and",
        "nothing in the driver reads them. Every unit names the demo chat file (stat'ed for the run identity;",
        "the backend self-check reads unit 0's first records).",
        "",
        "*Driver CPU*: `time.process_time` of a fresh process around `run_pipeline`, its jobs answered from",
        "the recording. Start-up (tokenizer load, backend self-check) is in it; *after start-up* counts from",
        "the executor's creation (the tokenizer loaded and checked) to the end, publishing included, and the",
        "fits, the per-sample, per-unit and per-shard columns and the cores fed are taken from it: start-up's",
        "own spread between runs (±0.15 s) is as large as the per-sample work at these sizes (until stop 54",
        "the fits took the whole; one run then fitted 0.001 µs a text sample). Ray's own per-job driver cost",
        "(`.remote`, `ray.wait`, `ray.get`) is not, nor the unlinks of staged units. *Driver CPU, workers in",
        "its process*: the recording run's, the earlier method: its process's CPU minus the synthetic workers'",
        "(timed inside the executor), for comparison.",
        "*Peak RSS*: `VmHWM` of that process (imports included: ~40 MiB before the run starts; the",
        "driver no longer imports Energon or torch, which the index rows used to bring in: ~300 MiB).",
        f"Median of {repeats} runs at each size (each run's figure is shown); 100M by extrapolating the",
        "linear fits (least squares over the measured sizes).",
        "",
    ]
    for shape, body, _ in sections:
        config = load_config(REPO / SHAPES[shape].pipeline)
        text += [
            f"**{shape}** (`{SHAPES[shape].pipeline}`: `buffer_size` {config.packing.buffer_size}, "
            f"`shard_size` {config.output.shard_size}, `seq_len` {config.packing.seq_len}; units of "
            f"{SHAPES[shape].unit_records:,} samples):",
            "",
            body,
            "",
        ]
    # a call's own job (a unit alone: as a media write, a line count, the index) and a rider (a window's plan
    # or a text window's write, riding on a call): the mix of a unit, a plan and a write costs a call's job
    # and two riders, so a rider costs (3 x mix - call) / 2 a job (at least 0: within the noise of nothing)
    costs = {}
    for per_call, mix, calls in ((1, ray_cost, ray_calls), (BIG_CALL, ray_batched, ray_calls_batched)):
        call = calls["per_job_s"]
        costs[per_call] = (call, max(0.0, (3 * mix["per_job_s"] - call) / 2))
    (call_1, rider_1), (call_16, rider_16) = costs[1], costs[BIG_CALL]
    text += [
        "**With Ray's cost.** The driver's CPU per job through the real `RayExecutor` (submit to the",
        "least busy actor, `.remote`, the call's answer taken as it comes (its future), the progress board,",
        f"`decode_result`), its {RAY_ACTORS} actors `EchoWorker`s that answer every job at once with a write",
        f"job's result of {ECHO_SHARDS} shards "
        f"({ray_cost['payload_bytes']} bytes), its slots kept full, {RAY_JOBS[1]:,} jobs minus {RAY_JOBS[0]:,},",
        f"median of {repeats} rounds each, beside the {IN_FLIGHT_PER_ACTOR * FLEET:,} calls a {FLEET:,}-actor fleet",
        f"keeps in flight ({IN_FLIGHT_PER_ACTOR} an actor: calls to a `Sleeper` actor, unanswered while",
        "measured, among the executor's running calls): the scale the cores-fed columns claim. Without them,",
        f"a call's job costs {ray_calls_alone['per_job_s'] * 1e3:.2f} ms at one job a call and",
        f"{ray_calls_batched_alone['per_job_s'] * 1e3:.3f} ms at {BIG_CALL} (a call's answer is taken from a queue",
        "its future's callback fills, so its cost does not grow with the calls in flight; `ray.wait` over them",
        "all did: see the SCALING note). A window's plan and a text window's write ride on the next call",
        "(`ray_executor.rides`), so Ray's cost is measured twice: units alone (a call's own job, as a media",
        "window's write, a line count or the index job are) and a text window's jobs in turn (a unit, a plan,",
        "a write: one call's job and two riders), which gives a rider's cost = (3 x the mix's per job - a",
        f"call's job) / 2. At one job a call (`ray.jobs_per_call` 1, the automatic value below 64 actors): "
        f"**{call_1 * 1e3:.2f} ms** a call's job ({ray_calls['per_job_s'] * 1e3:.2f} ms), "
        f"**{rider_1 * 1e3:.2f} ms** a rider (the mix: {ray_cost['per_job_s'] * 1e3:.2f} ms a job); at "
        f"{BIG_CALL} jobs a call (the automatic value from {BIG_CALL * ACTORS_PER_JOB:,} actors): "
        f"**{call_16 * 1e3:.3f} ms** and **{rider_16 * 1e3:.3f} ms** (the mix: {ray_batched['per_job_s'] * 1e3:.3f} ms).",
        f"With Ray up and no job, the driver's process used {ray_cost['idle_cpu_per_s'] * 100:.1f}% of a core.",
        "Jobs per sample are the largest run's: a call's own jobs (units, media writes, a shard each, the index",
        "job) and riders (window plans, text windows' writes).",
        "",
        f"| shape | call's jobs + riders per 10k samples | driver µs per sample: own (fit) + Ray's, 1 job a call | cores one driver can feed | own + Ray's, {BIG_CALL} jobs a call | cores fed ({BIG_CALL * ACTORS_PER_JOB:,}+ actors) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for shape, _, fit in sections:
        big = measured[shape][-1]
        riders_per = big["riders"] / big["samples"]
        calls_per = big["jobs"] / big["samples"] - riders_per
        worker_s, worker_n, _ = workers[shape]
        cells = []
        for call, rider in ((call_1, rider_1), (call_16, rider_16)):
            ray = call * calls_per + rider * riders_per
            total = fit["slope"] + ray
            fed = worker_s / worker_n / total
            cells.append(
                f"{fit['slope'] * 1e6:.3f} + {ray * 1e6:.3f} = **{total * 1e6:.3f}** | "
                f"**{fed:,.0f}** ({'met' if fed >= CORES_TARGET else '**not met**'})"
            )
        text.append(f"| {shape} | {calls_per * 1e4:.1f} + {riders_per * 1e4:.1f} | {' | '.join(cells)} |")
    text += [
        "",
        f"Video's worker CPU is a whole in-process job over bench_job's varied clips ({VIDEO_CLIPS} against 16: 4-24 s,",
        "24-30 fps, 640x360 to 1280x720 h264, a sound track on 3 in 4), omni_sft as shipped (frames stored JPEG,",
        "the sound heard); the video shape's lengths follow omni_sft's sampling of log-normal clips (median 20 s).",
        "",
        f"Where the driver's CPU goes: cProfile of a replay of the {PROFILED[0]} shape at {PROFILED[1]:,} samples",
        "(profiling inflates the times; shares are what counts):",
        "",
        profile.rstrip(),
        "",
        f"Machine: 2 cores, shared with other work (1-min load average {load:.1f} at the end): CPU seconds.",
    ]
    return "\n".join(text) + "\n"


if __name__ == "__main__" and sys.argv[1:2] == ["--ray"]:
    print(json.dumps(ray_child(*map(int, sys.argv[2:7]))))
elif __name__ == "__main__" and sys.argv[1:2] == ["--record"]:
    print(json.dumps(record(sys.argv[2], int(sys.argv[3]), sys.argv[4])))
elif __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    print(json.dumps(child(sys.argv[2], int(sys.argv[3]), sys.argv[4], "--profile" in sys.argv[5:])))
