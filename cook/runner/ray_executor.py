"""Ray executor: CookWorker inside actors; jobs to the least busy actor; small results back.

The Ray layer is only this: actors that each load one tokenizer and reuse it and run every kind of
job (count a file's lines, cook a unit, plan a window, write a window's shards, publish the index),
``IN_FLIGHT_PER_ACTOR`` calls per actor at a time, and crash handling. A call carries its jobs as JSON
bytes (``units.encode_jobs``; the actor builds them back with ``decode_jobs``, never unpickling). An
actor returns its result as JSON bytes
(``units.encode_result``, never pickle), so the driver counts exactly what crosses to it
(``received_bytes``): unit counts, window pack counts and shard entries, never samples, their
lengths or Energon's index rows, which the actors stage under the output directory
(``cook.runner.staging.DiskStore``, ``cook.writer.index_rows``; shared storage on a cluster).
Starting or joining Ray (bounded connect, token-auth hints) is ``cook.runner.ray_connect``.

**Answers.** Each call's future puts the call on a queue when it is answered (Ray runs the callback
on its own thread), and the driver takes the next answer from that queue: its cost stays the same
however many calls are in flight. ``ray.wait`` over the running calls, as before, scans them all at
each answer: beside the 2,048 calls a 1,024-actor fleet keeps in flight a call's job cost the driver
0.93-0.97 ms instead of 0.62 (bench_driver; 0.52 against 0.61 with two actors' calls alone).

**Jobs per call.** Ray's cost in the driver (``.remote``, taking the answer, decoding it: ~0.6 ms here)
is per call, whatever the call carries. With many actors the executor sends ``jobs_per_call`` jobs in one
call (``ray.jobs_per_call``; automatic: ``jobs_per_call()``): ``submit`` holds jobs until a call's worth
are waiting or the driver waits for a result, and an actor answers a call with its jobs' results in
order. Its slots grow with it, so every call can be full, and its lookahead by what fills the calls
(``limits``), so the units staged ahead grow no more than that. A job run again after a crash
goes alone, so a unit's crash trace names its own records only.

**Window jobs ride on cooks.** A window's plan, and the write of a light window's shards (text, or
frames stored png/jpeg), take a few milliseconds of an actor, but a call of their own costs the driver
as much as a cook's: with the shipped 32 MiB units a text run had ~4 window jobs for every unit
(bench_driver_real). So the executor holds them (``rides``) and sends them at the head of its next call
(a cook's, or a heavy write's); they go alone only when the driver would otherwise wait (the input's
end, lookahead full). Their results come back with that call's, so a window is written about a unit's
cook later than on its own. They take no slot (``slots`` grows by the riders outstanding): the calls'
cooks keep every actor busy as before. The writes of a window with raw patches or audio are heavy, so
they keep calls of their own, spread over the actors; frames stored png/jpeg are light
(``heavy_sample``).

Progress of the units cooking takes a side channel, a ``ProgressBoard`` actor: each actor posts its
unit's ``UnitProgress`` there (fire and forget, at most every ``REPORT_INTERVAL_S``; before it answers
the unit it waits for its last post, one round trip a unit, so the reports are on the board by the time
the driver has the answer: posts from an actor and its answers travel apart), and the driver, waiting
in ``next_done``, takes the board's reports every ``POLL_S``, and before it hands on a cooked unit
unless it took them in the last ``UNIT_POLL_S`` (so a unit's reports come before its summary and the
bar moves within a short run's units too), not per job: a take is a round trip to the board (after
every job, it doubled Ray's per-job cost in the driver; before every cooked unit, +0.16 ms a job in
bench_driver's probe, and hundreds of takes a second with a thousand actors). A report that comes after
its unit's summary is moot (the summary moves the bar by the rest of the unit). The reports go to
``on_progress``. A cook waits for its own last post only, never for the driver. When no progress is
shown (``on_progress`` None: ``--quiet``), the driver never takes and the board keeps nothing
(``mute``): in a real 2-actor text run the takes had cost the driver about as much CPU as its jobs
(bench_driver_real).

When an actor dies on a unit, Ray restarts the actor and the unit is cooked again with a trace
(``Attempt.trace``, under the output directory, so it must be on storage the driver can read). If
it dies again, the last traced record is the one that kills workers: it is rejected as
``worker_crash`` and the unit is cooked once more without it. Unless the trace says every record was
cooked (``TRACE_DONE``): a call's reply can be lost when the next call on the same actor kills it, so
that unit is only run again. A unit that keeps killing workers
with no record to blame fails the job after ``MAX_ATTEMPTS``.
"""

from __future__ import annotations

import heapq
import math
import os
import queue
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from cook import format as fmt
from cook.config import PipelineConfig
from cook.runner.progress import REPORT_INTERVAL_S, UnitProgress
from cook.runner.ray_connect import start_ray, stop_ray
from cook.runner.staging import DiskStore, SampleStore
from cook.runner.units import (
    TRACE_DONE,
    Attempt,
    IndexTask,
    Job,
    LineCountTask,
    Result,
    Unit,
    WindowTask,
    WriteDone,
    WriteTask,
    decode_jobs,
    decode_result,
    encode_jobs,
    encode_result,
)
from cook.runner.windows import SHARDS_PER_WRITE
from cook.runner.worker import CookWorker
from cook.tokenize.tokenizer import SINGLE_THREADED

IN_FLIGHT_PER_ACTOR = 2  # calls running or queued on an actor
LOOKAHEAD_PER_ACTOR = 6  # units cooked ahead of the one whose turn it is (their summaries are small): see limits()
MAX_JOBS_PER_CALL = 16  # automatic jobs_per_call, at most
ACTORS_PER_JOB = 32  # ... one job more a call for every this many actors
MAX_ATTEMPTS = 8
POLL_S = 0.5  # the driver takes the progress board's reports this often while it waits (at most)
UNIT_POLL_S = 0.05  # ... and before it hands on a cooked unit, unless it took them this recently


class ProgressBoard:
    """The ``UnitProgress`` reports the actors post, in the order posted, until the driver takes them."""

    def __init__(self) -> None:
        self._posted: list[UnitProgress] = []
        self._muted = False

    def post(self, progress: UnitProgress) -> None:
        if not self._muted:
            self._posted.append(progress)

    def mute(self) -> None:
        """Keep no more reports: nobody takes them (no progress is shown)."""
        self._muted = True
        self._posted = []

    def take(self) -> list[UnitProgress]:
        taken, self._posted = self._posted, []
        return taken


class RayWorker(CookWorker):
    """The actor: a CookWorker whose results cross to the driver as JSON bytes, and whose progress
    reports go to the progress board, the actor named ``board`` (a name, not a handle: a handle among
    the constructor's arguments goes through the object store, which Ray warns of for restartable actors)."""

    def __init__(self, config: PipelineConfig, board: str, report_interval_s: float) -> None:
        import ray

        self._post: Any = ray.get_actor(board).post.remote
        self._last_post: Any = None  # the ref of this unit's last report, awaited before the unit's answer
        super().__init__(config, report=self._post_report, report_interval_s=report_interval_s)

    def _post_report(self, progress: UnitProgress) -> None:
        self._last_post = self._post(progress)

    def run(self, sent: bytes) -> list[bytes]:
        """``sent``: ``units.encode_jobs`` of the call's jobs (JSON, never pickle), made by the driver
        (``RayExecutor._send``). Returns each job's result, in order."""
        return [self._one(job, attempt) for job, attempt in decode_jobs(sent)]

    def _one(self, job: Job, attempt: Attempt) -> bytes:
        done = self.work(job, attempt)
        if self._last_post is not None:  # the unit's reports reach the board before its answer reaches the driver
            import ray

            ray.get(self._last_post)
            self._last_post = None
        if isinstance(done, WriteDone):
            import ray

            node = ray.get_runtime_context().get_node_id()
            done = WriteDone(tuple(replace(shard, writer=node) for shard in done.shards))
        return encode_result(done)


def jobs_per_call(setting: int, actors: int) -> int:
    """``ray.jobs_per_call``, or (0) one job a call for fewer than ``2 * ACTORS_PER_JOB`` actors, then
    ``actors // ACTORS_PER_JOB`` up to ``MAX_JOBS_PER_CALL``: a driver feeding a few dozen actors has
    CPU to spare, one feeding a thousand spends it on Ray's per-call cost.

    >>> [jobs_per_call(0, n) for n in (2, 63, 64, 256, 1024)], jobs_per_call(4, 2)
    ([1, 1, 2, 8, 16], 4)
    """
    return setting or max(1, min(MAX_JOBS_PER_CALL, actors // ACTORS_PER_JOB))


def limits(actors: int, per_call: int) -> tuple[int, int]:
    """``(slots, lookahead)``: the jobs outstanding at once (``IN_FLIGHT_PER_ACTOR`` calls an actor, each
    full), and the units cooking or cooked ahead: ``LOOKAHEAD_PER_ACTOR`` an actor plus the further jobs
    its full calls carry (``IN_FLIGHT_PER_ACTOR * (per_call - 1)``), so more jobs a call stage only the
    units those calls carry.

    >>> limits(2, 1), limits(1024, 16)
    ((4, 12), (32768, 36864))
    """
    slots = IN_FLIGHT_PER_ACTOR * actors * per_call
    return slots, (LOOKAHEAD_PER_ACTOR + IN_FLIGHT_PER_ACTOR * (per_call - 1)) * actors


Queued = tuple[Job, Attempt, int]  # a job, its attempt, the tries before this one


def rides(job: Job) -> bool:
    """Whether ``job`` rides at the head of the next call: a window's plan, or a light window's write."""
    return isinstance(job, WindowTask) or (isinstance(job, WriteTask) and not job.heavy)


class RayExecutor:
    def __init__(
        self, config: PipelineConfig, address: str | None, num_actors: int, report_interval_s: float = REPORT_INTERVAL_S
    ) -> None:
        import ray

        cpus = max(os.cpu_count() or 1, math.ceil(num_actors * config.ray.cpus_per_actor))
        self._owns_ray = start_ray(address, cpus, config.ray.connect_timeout_s)
        board = f"cook-progress-{uuid.uuid4().hex}"
        self._board: Any = ray.remote(num_cpus=0)(ProgressBoard).options(name=board).remote()
        self.on_progress: Callable[[UnitProgress], None] | None = None  # None: no progress shown, no takes
        self._muted = False  # the board was told to keep no reports
        actor_class = ray.remote(num_cpus=config.ray.cpus_per_actor, max_restarts=-1, max_task_retries=0)(RayWorker)
        options = actor_class.options(runtime_env={"env_vars": dict(SINGLE_THREADED)})
        self.actors: list[Any] = [options.remote(config, board, report_interval_s) for _ in range(num_actors)]
        self.store: SampleStore = DiskStore(config.output.dir)
        self.jobs_per_call = jobs_per_call(config.ray.jobs_per_call, num_actors)
        self._slots, self.lookahead = limits(num_actors, self.jobs_per_call)
        self.shards_per_write = SHARDS_PER_WRITE
        self.received_bytes = 0
        self._trace_dir = os.path.join(config.output.dir, fmt.PROGRESS_DIR)
        self._busy = [0] * num_actors
        self._writes = [0] * num_actors
        self._ranks = [(0, 0, actor) for actor in range(num_actors)]  # heap: (busy, writes, actor), stale ones too
        self._running: dict[Any, tuple[list[Queued], int]] = {}  # ref -> the call's jobs, actor
        self._answered: queue.SimpleQueue[tuple[Any, Any]] = queue.SimpleQueue()  # (ref, its future) as calls end
        self._waiting: list[Queued] = []  # submitted, not yet sent: less than a call's worth
        self._riders: list[Queued] = []  # window jobs submitted, waiting for a cook's call (``rides``)
        self._results: deque[tuple[Result, bool]] = deque()  # a call's results not yet handed over (and: rode)
        self._outstanding = 0  # jobs submitted whose result the driver has not taken
        self._riding = 0  # ... of them, those that ride (they take no slot)
        self._taken_at = time.monotonic()  # when the board's reports were last taken

    @property
    def slots(self) -> int:
        """Jobs it takes at once: ``limits``' slots (full calls, ``IN_FLIGHT_PER_ACTOR`` an actor), and the
        riders outstanding beside them."""
        return self._slots + self._riding

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
        """Run ``job`` on the least busy actor, in a call of ``jobs_per_call`` (``attempt`` and ``tries``: a
        job run again after a crash, which goes alone)."""
        attempt = attempt or Attempt()
        self._outstanding += 1
        rider = rides(job)
        self._riding += rider
        if tries:
            self._send([(job, attempt, tries)])
        elif rider:
            self._riders.append((job, attempt, tries))
        else:
            self._waiting.append((job, attempt, tries))
            if len(self._waiting) >= self.jobs_per_call:
                self._flush()

    def _flush(self) -> None:
        """Send the jobs waiting, the riders first, in one call."""
        self._send(self._riders + self._waiting)
        self._riders, self._waiting = [], []

    def _send(self, jobs: list[Queued]) -> None:
        actor = self._pick()
        self._load(actor, 1, sum(isinstance(job, WriteTask) for job, _, _ in jobs))
        sent = encode_jobs([(job, attempt) for job, attempt, _ in jobs])  # bytes: Ray's cloudpickle of the
        # dataclasses themselves cost the driver ~0.2 ms a job
        ref = self.actors[actor].run.remote(sent)
        self._running[ref] = (jobs, actor)
        ref.future().add_done_callback(lambda future: self._answered.put((ref, future)))  # on a Ray thread

    def outstanding(self) -> int:
        return self._outstanding

    def next_done(self) -> Result:
        """The next job to finish, in completion order (a call's jobs in their order); a job whose actor
        died is run again."""
        import ray
        from ray.exceptions import RayActorError, WorkerCrashedError

        if (self._waiting or self._riders) and not self._results:  # the driver would wait: send what it has
            self._flush()
        if self.on_progress is None and not self._muted:
            self._board.mute.remote()  # fire and forget: what was posted before it is dropped there
            self._muted = True
        while not self._results:
            try:
                ref, future = self._answered.get(timeout=POLL_S)
            except queue.Empty:
                ref = future = None
            since = time.monotonic() - self._taken_at
            if self.on_progress is not None and (
                since >= POLL_S
                or (
                    ref is not None
                    and since >= UNIT_POLL_S
                    and any(isinstance(job, Unit) for job, *_ in self._running[ref][0])
                )
            ):
                for progress in ray.get(self._board.take.remote()):
                    self.on_progress(progress)
                self._taken_at = time.monotonic()
            if ref is None:
                continue
            jobs, actor = self._running.pop(ref)
            self._load(actor, -1, -sum(isinstance(job, WriteTask) for job, _, _ in jobs))
            try:
                payloads = future.result()
            except (RayActorError, WorkerCrashedError):
                self._outstanding -= len(jobs)
                self._riding -= sum(rides(job) for job, _, _ in jobs)
                for job, attempt, tries in jobs:
                    if tries + 1 >= MAX_ATTEMPTS:
                        raise RuntimeError(
                            f"{_describe(job)} kept killing workers after {MAX_ATTEMPTS} attempts"
                        ) from None
                    self.submit(job, self._next_attempt(job, attempt), tries + 1)
                continue
            self.received_bytes += sum(len(payload) for payload in payloads)
            self._results.extend((decode_result(p), rides(job)) for p, (job, _, _) in zip(payloads, jobs, strict=True))
        result, rode = self._results.popleft()
        self._outstanding -= 1
        self._riding -= rode
        return result

    def _next_attempt(self, job: Job, attempt: Attempt) -> Attempt:
        """After a crash, trace the unit's records; after a traced crash, blame the last record."""
        if not isinstance(job, Unit):
            return attempt
        if attempt.trace is None:
            os.makedirs(self._trace_dir, exist_ok=True)
            return Attempt(os.path.join(self._trace_dir, f"trace-{job.index:06d}"), attempt.crashed)
        try:
            with open(attempt.trace) as handle:
                traced = handle.read().split()
        except FileNotFoundError:
            traced = []
        # every record cooked (TRACE_DONE): the worker was lost after them, its reply in flight (the next
        # call on that actor killed it), so no record of this unit is to blame: run it again as it was
        if traced and traced[-1] != TRACE_DONE and int(traced[-1]) not in attempt.crashed:
            return Attempt(attempt.trace, attempt.crashed | {int(traced[-1])})
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
