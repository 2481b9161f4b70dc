"""The driver's loop: hand out jobs, cut and number windows, commit shards in order, checkpoint (SPEC §11).

The driver holds no samples and does no work per sample, nor per input byte: before any cook, the
workers count the lines of JSONL files cut into several units (``LineCountTask``; the driver only
finds each cut, ``cook.runner.plan``). It sends ``Unit``s to cook, ``WindowTask``s
to plan and ``WriteTask``s (a window's shards) to write, and gets back ``UnitDone``s (counts, rejects),
``WindowDone``s (pack count, packing stats) and ``WriteDone``s (each shard's sha256, size, counts).
Once every shard is committed, an ``IndexTask`` has a worker publish ``.nv-meta/`` from the index rows
the shards' writers left: the driver never handles a per-pack row.

- Windows are cut from the units' sample counts (``cook.runner.windows.Planner``) and planned on the
  workers; their plans come back in any order and are numbered in window order (packs and shards
  after the windows before), then cut into shard tasks, which go out as write jobs of up to
  ``executor.shards_per_write`` (under Ray 16: its cost in the driver is per job, not per shard; in-process
  1), a shard a job where the window holds media (``WindowPlan.writes``).
- Plans and writes go out before cooks, so a closed window's shards are written while later units cook
  (under Ray they ride in the next cook's call: ``cook.runner.ray_executor``).
- Jobs are bounded (``executor.slots`` outstanding), cooks also by ``executor.lookahead`` (units
  cooking or waiting for their turn), and cooks are held back while many shards wait to be handed
  out (``2 * executor.slots``, counted in shards, not write jobs), so the staged samples stay bounded too.
- Summaries are consumed in unit order (a reorder buffer): rejects are written in input order and
  windows are the same whatever finishes first.
- Shards are committed in index order: their manifest entries kept, their counts summed.
  A window whose shards are all committed is complete: the resume position moves to its end.
- Checkpoints (``state.json``, the rejects before it) are timed, not per window: after
  a commit once ``ray.checkpoint_interval_s`` have passed since the last, at the end, and on an interrupt
  (Ctrl-C): at once while the driver waits on the workers, and at the end of its step when it lands in
  the driver's own work (``cook.errors.SteppedInterrupts``), so an interrupt always saves a whole state. Staged units
  are dropped as their windows complete: a ``kill -9`` before the next save cooks them again (the
  same bytes).
- Progress: the executor passes on the workers' reports of units still cooking (``UnitProgress``);
  the bar moves by what each adds, and by the rest of its unit when the unit's summary is consumed
  (``cook.runner.progress``), so every unit counts its planned bytes once.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Protocol

from cook.config import PipelineConfig
from cook.errors import SteppedInterrupts, interrupts_held
from cook.packing.metrics import PackingStats
from cook.runner.output_dir import OutputDir
from cook.runner.plan import line_count_tasks, with_first_lines
from cook.runner.progress import Progress, UnitProgress
from cook.runner.staging import SampleStore
from cook.runner.units import (
    IndexDone,
    IndexTask,
    Job,
    LineCounts,
    Result,
    ShardDone,
    Unit,
    UnitDone,
    WindowDone,
    WriteDone,
    WriteTask,
)
from cook.runner.windows import Planner, Position, WindowPlan
from cook.writer.dataset import DatasetWriter

Snapshot = tuple[int, int, dict[str, int]]  # rejects bytes, records in, rejects per reason


class Executor(Protocol):
    """Runs jobs somewhere: in this process (``LocalExecutor``) or on Ray actors (``RayExecutor``)."""

    store: SampleStore  # the driver reads staged summaries (resume) and drops finished units
    lookahead: int  # units cooking or cooked but not yet consumed, at most
    shards_per_write: int  # a window's shards per write job, at most (``windows.SHARDS_PER_WRITE`` under Ray)
    received_bytes: int  # what crossed to the driver
    # gets the workers' reports of units cooking (set by the driver); None: no progress is shown, so the
    # executor need not collect the reports at all
    on_progress: Callable[[UnitProgress], None] | None

    @property
    def slots(self) -> int: ...  # jobs it takes outstanding at once (Ray's grow by the window jobs riding)
    def submit(self, job: Job) -> None: ...
    def outstanding(self) -> int: ...
    def next_done(self) -> Result: ...
    def close(self) -> None: ...


class Driver:
    def __init__(
        self, config: PipelineConfig, output: OutputDir, executor: Executor, writer: DatasetWriter, progress: Progress
    ) -> None:
        self.config, self.output, self.executor, self.writer, self.progress = config, output, executor, writer, progress
        self.state = state = output.state
        self.resume = Position(state.next_unit, state.skip)
        self.planner = Planner(
            config.packing, config.output.shard_size, self.resume, state.windows, state.window_shard, state.window_pack
        )
        self.stats = state.packing or PackingStats(config.packing.seq_len, config.packing.pad_multiple)
        self.unmet = state.windows_short_of_pack_count_multiple
        self.packed = replace(state.counts, records_in=0, records_rejected=0)  # what the shards count
        start: Snapshot = (state.rejects_bytes, state.counts.records_in, dict(state.rejects_by_reason))
        self.snapshots: dict[int, Snapshot] = {self.resume.unit - 1: start}
        if self.resume.skip:
            self.snapshots[self.resume.unit] = start
        self.records_in = start[1]
        self.committed = len(state.shards)
        self.done: dict[int, ShardDone] = {}
        self.windows: deque[WindowPlan] = deque()  # open windows, in order
        self.tasks: deque[Job] = deque()  # window plans and write jobs to hand out, in order
        self.queued_shards = 0  # shards in the write jobs of ``tasks``
        self.dropped = self.resume.unit  # staged units below this are gone
        self.unit_bytes: dict[int, int] = {}  # input bytes per unit not yet consumed, for progress
        self.reported: dict[int, UnitProgress] = {}  # the most each unit's reports said, until it is consumed
        executor.on_progress = self._advance if progress.shown else None
        self.at = self.resume  # where the first window not yet complete starts
        self.since_checkpoint = 0  # shards committed since the last checkpoint
        self.checkpointed = time.monotonic()
        self.shards_by_writer: Counter[str] = Counter()

    def run(self, units: Sequence[Unit]) -> None:
        units = self._first_lines(units)
        todo = deque(units[self.resume.unit :])
        self.unit_bytes = {unit.index: unit.size_bytes for unit in todo}
        waiting: dict[int, UnitDone] = {}
        turn, cooking, planned_all = self.resume.unit, 0, False
        executor = self.executor
        with SteppedInterrupts() as interrupts:
            while True:
                while self.tasks and executor.outstanding() < executor.slots:
                    task = self.tasks.popleft()
                    self.queued_shards -= len(task.shards) if isinstance(task, WriteTask) else 0
                    executor.submit(task)
                while (
                    todo
                    and executor.outstanding() < executor.slots
                    and cooking + len(waiting) < executor.lookahead
                    and self.queued_shards < 2 * executor.slots
                ):
                    unit = todo.popleft()
                    staged = executor.store.summary(unit.index)
                    if staged is not None:
                        waiting[unit.index] = staged
                    else:
                        executor.submit(unit)
                        cooking += 1
                while turn in waiting:
                    self._consume(waiting.pop(turn))
                    turn += 1
                if turn == len(units) and not planned_all:
                    planned_all = True
                    for plan in self.planner.finish():
                        self._open(plan)
                    self._commit()
                    continue
                if executor.outstanding() == 0:
                    if planned_all and not self.tasks and not self.windows:
                        break
                    if not self.tasks and not (todo and not waiting):
                        raise RuntimeError(f"driver stalled at unit {turn}: nothing to run and nothing running")
                    continue
                try:
                    interrupts.check()  # one that came during the steps above, now that they are whole
                    interrupts.waiting = True
                    try:
                        result = executor.next_done()
                    finally:
                        interrupts.waiting = False
                except KeyboardInterrupt:  # between whole steps: the state is whole, keep what is done
                    with interrupts_held():
                        self._checkpoint(self.at)
                    raise
                if isinstance(result, UnitDone):
                    cooking -= 1
                    waiting[result.unit] = result
                elif isinstance(result, WindowDone):
                    self._planned(result)
                elif isinstance(result, WriteDone):
                    self.done.update((shard.shard_index, shard) for shard in result.shards)
                    self._commit()
            self._checkpoint(Position(len(units)))
            interrupts.check()  # saved: a rerun publishes the index
        executor.submit(IndexTask(self.committed))  # every shard is committed: its rows are all there
        done = executor.next_done()
        assert isinstance(done, IndexDone), done

    def _first_lines(self, units: Sequence[Unit]) -> list[Unit]:
        """``units`` with every JSONL first line number: the workers count the newlines before each cut
        (``LineCountTask``s, before any cook); the driver reads no input."""
        tasks = deque(line_count_tasks(units))
        newlines: dict[int, int] = {}
        executor = self.executor
        while tasks or executor.outstanding():
            while tasks and executor.outstanding() < executor.slots:
                executor.submit(tasks.popleft())
            done = executor.next_done()
            assert isinstance(done, LineCounts), done
            newlines.update(zip(itertools.count(done.first_unit), done.newlines))
        return with_first_lines(units, newlines)

    def _consume(self, summary: UnitDone) -> None:
        if summary.unit != self.resume.unit or not self.resume.skip:  # else counted before the interrupt
            self.writer.add_rejects(summary.rejects.lines, summary.rejects.by_reason)
            self.records_in += summary.records_in
        rejects_bytes, by_reason = self.writer.rejects_position()
        self.snapshots[summary.unit] = (rejects_bytes, self.records_in, by_reason)
        reported = self.reported.pop(summary.unit, UnitProgress(summary.unit, 0, 0))
        self.progress.update(
            self.unit_bytes.pop(summary.unit, 0) - reported.bytes_read,
            records=summary.records_in - reported.records,
            tokens=summary.tokens,
            rejects=len(summary.rejects),
        )
        for plan in self.planner.add(summary):
            self._open(plan)

    def _advance(self, report: UnitProgress) -> None:
        """Move the bar by what ``report`` adds to its unit's reports (a cook run again after a crash
        reports from 0 again: only what goes beyond counts); a report on a consumed unit is late, and moot."""
        size = self.unit_bytes.get(report.unit)
        if size is None:
            return
        before = self.reported.get(report.unit, UnitProgress(report.unit, 0, 0))
        now = UnitProgress(
            report.unit, min(size, max(before.bytes_read, report.bytes_read)), max(before.records, report.records)
        )
        self.reported[report.unit] = now
        self.progress.update(now.bytes_read - before.bytes_read, records=now.records - before.records)

    def _open(self, window: WindowPlan) -> None:
        self.windows.append(window)
        self.tasks.append(window.task)

    def _planned(self, done: WindowDone) -> None:
        """Number the windows whose plans are back, in window order, and queue their shards."""
        first = self.windows[0].index  # the open windows are consecutive, in order; the numbered ones first
        self.windows[done.index - first].done = done
        while (at := self.planner.to_number - first) < len(self.windows) and self.windows[at].done is not None:
            window = self.windows[at]
            self.planner.number(window)
            writes = window.writes(self.committed, self.executor.shards_per_write)
            self.tasks.extend(writes)
            self.queued_shards += sum(len(write.shards) for write in writes)
        self._commit()

    def _commit(self) -> None:
        while self.committed in self.done:
            shard = self.done.pop(self.committed)
            self.state.shards.append(shard.info)
            self.packed += shard.counts
            self.shards_by_writer[shard.writer] += 1
            self.committed += 1
            self.since_checkpoint += 1
        completed = None
        while self.windows and self.windows[0].numbered and self.windows[0].shards.stop <= self.committed:
            completed = self.windows.popleft()
            self.executor.store.drop_plan(completed.index)
            self.stats = self.stats.merge(completed.planned.stats)
            self.unmet += completed.planned.short_of_multiple
            self.state.windows += 1
            self.state.window_shard = completed.shards.stop
            self.state.window_pack = completed.first_pack + completed.planned.packs
        if completed is not None:
            self.at = completed.end
            for unit in range(self.dropped, self.at.unit):  # no open window holds their samples (a kill -9
                self.executor.store.drop(unit)  # before the next save cooks them again: the same bytes)
            self.dropped = max(self.dropped, self.at.unit)
        if time.monotonic() - self.checkpointed < self.config.ray.checkpoint_interval_s:
            return
        if self.since_checkpoint or self.at != Position(self.state.next_unit, self.state.skip):  # moved
            self._checkpoint(self.at)

    def _checkpoint(self, position: Position) -> None:
        """Save the state: the input resumes at ``position``; every committed shard is kept."""
        state = self.state
        state.next_unit, state.skip = position.unit, position.skip
        rejects_bytes, records_in, by_reason = self.snapshots[position.unit if position.skip else position.unit - 1]
        state.rejects_bytes, state.rejects_by_reason = rejects_bytes, by_reason
        rejected = sum(by_reason.values())
        state.counts = replace(self.packed, records_in=records_in, records_rejected=rejected)
        state.packing, state.windows_short_of_pack_count_multiple = self.stats, self.unmet
        self.writer.sync()  # the rejects before the state that counts them
        self.output.save()
        self.since_checkpoint, self.checkpointed = 0, time.monotonic()
        for unit in [u for u in self.snapshots if u < position.unit - 1]:
            del self.snapshots[unit]
