"""Ray executor: CookWorker inside actors; jobs to the least busy actor; small results back.

The Ray layer is only this: actors that each load one tokenizer and reuse it and run every kind of
job (count a file's lines, cook a unit, plan a window, write a window's shards, publish the index),
``IN_FLIGHT_PER_ACTOR`` jobs per actor at a time, and crash handling. An actor returns its result as JSON bytes
(``units.encode_result``, never pickle), so the driver counts exactly what crosses to it
(``received_bytes``): unit counts, window pack counts and shard entries, never samples, their
lengths or Energon's index rows, which the actors stage under the output directory
(``cook.runner.staging.DiskStore``, ``cook.writer.index_rows``; shared storage on a cluster).
Starting or joining Ray (bounded connect, token-auth hints) is ``cook.runner.ray_connect``.

Progress of the units cooking takes a side channel, a ``ProgressBoard`` actor: each actor posts its
unit's ``UnitProgress`` there (fire and forget, at most every ``REPORT_INTERVAL_S``), and the driver,
waiting in ``next_done``, takes the board's reports every ``POLL_S``, and before it hands on a cooked
unit unless it took them in the last ``UNIT_POLL_S`` (so a unit's reports come before its summary and
the bar moves within a short run's units too), not per job: a take is a round trip to the board
(after every job, it doubled Ray's per-job cost in the driver; before every cooked unit, +0.16 ms a
job in bench_driver's probe, and hundreds of takes a second with a thousand actors). A report that
comes after its unit's summary is moot (the summary moves the bar by the rest of the unit). The
reports go to ``on_progress``. No cook ever waits on it.

When an actor dies on a unit, Ray restarts the actor and the unit is cooked again with a trace
(``Attempt.trace``, under the output directory, so it must be on storage the driver can read). If
it dies again, the last traced record is the one that kills workers: it is rejected as
``worker_crash`` and the unit is cooked once more without it. A unit that keeps killing workers
with no record to blame fails the job after ``MAX_ATTEMPTS``.
"""

from __future__ import annotations

import heapq
import math
import os
import pickle
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from cook import format as fmt
from cook.config import PipelineConfig
from cook.runner.progress import REPORT_INTERVAL_S, UnitProgress
from cook.runner.ray_connect import start_ray, stop_ray
from cook.runner.staging import DiskStore, SampleStore
from cook.runner.units import (
    Attempt,
    IndexTask,
    Job,
    LineCountTask,
    Result,
    Unit,
    WindowTask,
    WriteDone,
    WriteTask,
    decode_result,
    encode_result,
)
from cook.runner.windows import SHARDS_PER_WRITE
from cook.runner.worker import CookWorker
from cook.tokenize.tokenizer import SINGLE_THREADED

IN_FLIGHT_PER_ACTOR = 2  # jobs running or queued on an actor
LOOKAHEAD_PER_ACTOR = 6  # units cooked ahead of the one whose turn it is (their summaries are small)
MAX_ATTEMPTS = 8
POLL_S = 0.5  # the driver takes the progress board's reports this often while it waits (at most)
UNIT_POLL_S = 0.05  # ... and before it hands on a cooked unit, unless it took them this recently


class ProgressBoard:
    """The ``UnitProgress`` reports the actors post, in the order posted, until the driver takes them."""

    def __init__(self) -> None:
        self._posted: list[UnitProgress] = []

    def post(self, progress: UnitProgress) -> None:
        self._posted.append(progress)

    def take(self) -> list[UnitProgress]:
        taken, self._posted = self._posted, []
        return taken


class RayWorker(CookWorker):
    """The actor: a CookWorker whose results cross to the driver as JSON bytes, and whose progress
    reports go to the progress board, the actor named ``board`` (a name, not a handle: a handle among
    the constructor's arguments goes through the object store, which Ray warns of for restartable actors)."""

    def __init__(self, config: PipelineConfig, board: str, report_interval_s: float) -> None:
        import ray

        super().__init__(config, report=ray.get_actor(board).post.remote, report_interval_s=report_interval_s)

    def run(self, sent: bytes) -> bytes:
        """``sent``: ``pickle.dumps((job, attempt))``, made by the driver (``RayExecutor.submit``) from its
        own job dataclasses, never from dataset bytes: the trust Ray already gives every actor argument,
        which it unpickles too. Dataset bytes reach a worker only through the sources' parsers."""
        job, attempt = pickle.loads(sent)
        done = self.work(job, attempt)
        if isinstance(done, WriteDone):
            import ray

            node = ray.get_runtime_context().get_node_id()
            done = WriteDone(tuple(replace(shard, writer=node) for shard in done.shards))
        return encode_result(done)


class RayExecutor:
    def __init__(
        self, config: PipelineConfig, address: str | None, num_actors: int, report_interval_s: float = REPORT_INTERVAL_S
    ) -> None:
        import ray

        cpus = max(os.cpu_count() or 1, math.ceil(num_actors * config.ray.cpus_per_actor))
        self._owns_ray = start_ray(address, cpus, config.ray.connect_timeout_s)
        board = f"cook-progress-{uuid.uuid4().hex}"
        self._board: Any = ray.remote(num_cpus=0)(ProgressBoard).options(name=board).remote()
        self.on_progress: Callable[[UnitProgress], None] = lambda progress: None
        actor_class = ray.remote(num_cpus=config.ray.cpus_per_actor, max_restarts=-1, max_task_retries=0)(RayWorker)
        options = actor_class.options(runtime_env={"env_vars": dict(SINGLE_THREADED)})
        self.actors: list[Any] = [options.remote(config, board, report_interval_s) for _ in range(num_actors)]
        self.store: SampleStore = DiskStore(config.output.dir)
        self.slots = IN_FLIGHT_PER_ACTOR * num_actors
        self.lookahead = LOOKAHEAD_PER_ACTOR * num_actors
        self.shards_per_write = SHARDS_PER_WRITE
        self.received_bytes = 0
        self._trace_dir = os.path.join(config.output.dir, fmt.PROGRESS_DIR)
        self._busy = [0] * num_actors
        self._writes = [0] * num_actors
        self._ranks = [(0, 0, actor) for actor in range(num_actors)]  # heap: (busy, writes, actor), stale ones too
        self._running: dict[Any, tuple[Job, Attempt, int, int]] = {}  # ref -> job, attempt, actor, tries
        self._taken_at = time.monotonic()  # when the board's reports were last taken

    def _pick(self) -> int:
        """The actor for the next job: the least busy, then the one with fewer write jobs, then the
        first (so one with fewer than ``IN_FLIGHT_PER_ACTOR`` jobs while there is one). A heap, not a
        scan: with a thousand actors a scan cost the driver ~0.13 ms a job, a quarter of Ray's own
        per-job cost. (Sending cooks away from an actor that is writing a shard was tried: it
        unbalanced text jobs, where writes are short, and gained ~1% on images.)"""
        while True:
            busy, writes, actor = self._ranks[0]
            if busy == self._busy[actor] and writes == self._writes[actor]:
                return actor
            heapq.heappop(self._ranks)  # stale: that actor's load has changed since

    def _load(self, actor: int, jobs: int, writes: int) -> None:
        self._busy[actor] += jobs
        self._writes[actor] += writes
        if len(self._ranks) > 4 * len(self.actors) + 64:  # stale entries buried under live ones
            self._ranks = [(self._busy[a], self._writes[a], a) for a in range(len(self.actors))]
            heapq.heapify(self._ranks)
        else:
            heapq.heappush(self._ranks, (self._busy[actor], self._writes[actor], actor))

    def submit(self, job: Job, attempt: Attempt | None = None, tries: int = 0) -> None:
        """Run ``job`` on the least busy actor (``attempt`` and ``tries``: a job run again after a crash)."""
        attempt = attempt or Attempt()
        actor = self._pick()
        self._load(actor, 1, isinstance(job, WriteTask))
        sent = pickle.dumps((job, attempt), protocol=pickle.HIGHEST_PROTOCOL)  # bytes: Ray's cloudpickle of
        # the dataclasses themselves cost the driver ~0.2 ms a job
        self._running[self.actors[actor].run.remote(sent)] = (job, attempt, actor, tries)

    def outstanding(self) -> int:
        return len(self._running)

    def next_done(self) -> Result:
        """The next job to finish, in completion order; a job whose actor died is run again."""
        import ray
        from ray.exceptions import RayActorError, WorkerCrashedError

        while True:
            ready, _ = ray.wait(list(self._running), num_returns=1, timeout=POLL_S)
            since = time.monotonic() - self._taken_at
            if since >= POLL_S or (ready and since >= UNIT_POLL_S and isinstance(self._running[ready[0]][0], Unit)):
                for progress in ray.get(self._board.take.remote()):
                    self.on_progress(progress)
                self._taken_at = time.monotonic()
            if not ready:
                continue
            (ref,) = ready
            job, attempt, actor, tries = self._running.pop(ref)
            self._load(actor, -1, -isinstance(job, WriteTask))
            try:
                payload = ray.get(ref)
            except (RayActorError, WorkerCrashedError):
                if tries + 1 >= MAX_ATTEMPTS:
                    raise RuntimeError(f"{_describe(job)} kept killing workers after {MAX_ATTEMPTS} attempts") from None
                self.submit(job, self._next_attempt(job, attempt), tries + 1)
                continue
            self.received_bytes += len(payload)
            return decode_result(payload)

    def _next_attempt(self, job: Job, attempt: Attempt) -> Attempt:
        """After a crash, trace the unit's records; after a traced crash, blame the last record."""
        if not isinstance(job, Unit):
            return attempt
        if attempt.trace is None:
            os.makedirs(self._trace_dir, exist_ok=True)
            return Attempt(os.path.join(self._trace_dir, f"trace-{job.index:06d}"), attempt.crashed)
        try:
            with open(attempt.trace) as handle:
                traced = [int(line) for line in handle.read().split()]
        except FileNotFoundError:
            traced = []
        if traced and traced[-1] not in attempt.crashed:
            return Attempt(attempt.trace, attempt.crashed | {traced[-1]})
        return attempt

    def close(self) -> None:
        import ray

        for actor in self.actors:
            ray.kill(actor)
        self.actors = []
        ray.kill(self._board)
        if self._owns_ray:
            stop_ray()


def _describe(job: Job) -> str:
    if isinstance(job, Unit):
        return f"unit {job.index} ({job.path})"
    if isinstance(job, IndexTask):
        return f"the Energon index of {job.shards} shards"
    if isinstance(job, LineCountTask):
        return f"the line count of units {job.first_unit}.. ({job.path})"
    if isinstance(job, WindowTask):
        return f"window {job.index}"
    first, last = job.shards[0].shard_index, job.shards[-1].shard_index
    return f"shard {first}" if first == last else f"shards {first}..{last}"
