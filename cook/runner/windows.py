"""Windows: the driver cuts them from sample counts, a worker plans each, the driver numbers them (SPEC §7, §11).

A window is ``packing.buffer_size`` consecutive samples in input order (``all``: every sample, one
window). The driver sees only how many samples each unit holds: when a window fills, ``Planner``
closes it as a ``WindowTask`` (which samples of which units) and the driver hands it to a worker.
The worker packs it from the samples' staged lengths and patch counts alone (``plan_window_task``:
a pure function of them, so any worker, any number of times, makes the same plan) and stages the
plan; the driver gets its pack count and stats (``WindowDone``). ``Planner.number`` then numbers
the window's packs and shards after the windows before it, in window order, and cuts it into
``ShardTask``s of ``output.shard_size`` packs (a window's last shard may be short), handed out
up to ``SHARDS_PER_WRITE`` at a time as ``WriteTask``s (``WindowPlan.writes``). Nothing here sees a token,
a patch or a per-sample length.

Worked example, ``buffer_size=3``, units 0 and 1 holding 2 and 4 samples::

    window 0 = unit 0 [0, 2) + unit 1 [0, 1)   ends at (unit 1, skip 1)
    window 1 = unit 1 [1, 4)                   ends at (unit 2, skip 0)

The end of a window is where a resumed run starts once the window's shards are all written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from cook.config import PackingConfig
from cook.packing.metrics import stats_for_flat
from cook.packing.packer import plan_window
from cook.runner.units import PackPlan, ShardTask, Slice, StagedLengths, UnitDone, WindowDone, WindowTask, WriteTask

# Under Ray a text window's shards go to one worker together, this many at most: the driver's cost is
# per job, not per shard; the cap keeps a large window (``buffer_size: all``) spread over the workers.
# A window whose samples hold patches or audio (``heavy_sample``: raw image and video patches, audio
# features) goes a shard per job: its shards are heavy, so Ray's cost is small beside them and one job
# for them all would leave the other actors idle. Frames stored png/jpeg were encoded by the cooking
# worker (``encode_item_frames``): such a window's shards only copy them, and go as text's do. In-process a job
# costs nothing to hand out: a shard per job, so a Ctrl-C keeps every shard written. Figures:
# docs/SCALING.md.
SHARDS_PER_WRITE = 16


@dataclass(frozen=True)
class Position:
    """A place in the input: sample ``skip`` of unit ``unit`` (``skip == 0``: the unit's start)."""

    unit: int
    skip: int = 0


@dataclass
class WindowPlan:
    """An open window as the driver follows it: cut, then planned (``done``), then numbered."""

    task: WindowTask
    start: Position
    end: Position
    done: WindowDone | None = None
    first_shard: int = 0
    first_pack: int = 0
    tasks: list[ShardTask] = field(default_factory=list)
    numbered: bool = False

    @property
    def index(self) -> int:
        return self.task.index

    @property
    def planned(self) -> WindowDone:
        assert self.done is not None, "a planned window"
        return self.done

    @property
    def shards(self) -> range:
        return range(self.first_shard, self.first_shard + len(self.tasks))

    def writes(self, committed: int, per_job: int) -> list[WriteTask]:
        """The window's shards not yet committed (below ``committed`` they are, after a resume), in write
        jobs of ``per_job`` shards (the last may hold fewer; a shard each where the shards are heavy)."""
        heavy = self.planned.heavy
        per_job = 1 if heavy else per_job
        tasks = [task for task in self.tasks if task.shard_index >= committed]
        return [WriteTask(tuple(tasks[i : i + per_job]), heavy) for i in range(0, len(tasks), per_job)]


@dataclass
class _Held:
    unit: int
    start: int  # first sample of the unit not yet in a window
    stop: int  # the unit's sample count


class Planner:
    """Feed it unit counts in unit order (``add``), then ``finish``; each returns the windows closed.
    ``number`` each window, in window order, once its plan is back."""

    def __init__(
        self, packing: PackingConfig, shard_size: int, start: Position, window: int, shard: int, pack: int
    ) -> None:
        self.shard_size = shard_size
        self.size: int | None = None if packing.buffer_size == "all" else int(packing.buffer_size)
        self._held: list[_Held] = []
        self._count = 0  # samples in the open window
        self._start = start
        self._resume = start  # the first unit may be partly packed already
        self._window, self._shard, self._pack = window, shard, pack
        self.to_number = window  # the next window to number

    def add(self, done: UnitDone) -> list[WindowPlan]:
        skip = self._resume.skip if done.unit == self._resume.unit else 0
        if skip < done.samples:
            self._held.append(_Held(done.unit, skip, done.samples))
            self._count += done.samples - skip
        closed = []
        while self.size is not None and self._count >= self.size:
            closed.append(self._close(self.size))
        return closed

    def finish(self) -> list[WindowPlan]:
        return [self._close(self._count)] if self._count else []

    def _close(self, count: int) -> WindowPlan:
        self._count -= count
        slices: list[Slice] = []
        while count:
            head = self._held[0]
            k = min(count, head.stop - head.start)
            slices.append((head.unit, head.start, head.start + k))
            head.start += k
            count -= k
            if head.start == head.stop:
                self._held.pop(0)
        unit, _, stop = slices[-1]
        last = self._held[0] if self._held else None
        end = Position(unit, stop) if last is not None and last.unit == unit else Position(unit + 1)
        plan = WindowPlan(WindowTask(self._window, tuple(slices)), self._start, end)
        self._window += 1
        self._start = end
        return plan

    def number(self, window: WindowPlan) -> None:
        """Number ``window``'s packs and shards after the windows before it and cut its shard tasks
        (its plan is back: ``window.done``)."""
        assert window.index == self.to_number, "windows are numbered in order"
        packs = window.planned.packs
        window.first_shard, window.first_pack = self._shard, self._pack
        window.numbered = True
        for first in range(0, packs, self.shard_size):
            last = min(first + self.shard_size, packs)
            window.tasks.append(ShardTask(self._shard, self._pack + first, window.task, first, last))
            self._shard += 1
        self._pack += packs
        self.to_number += 1


def plan_window_task(
    task: WindowTask, lengths_of: Callable[[int], StagedLengths], packing: PackingConfig
) -> tuple[PackPlan, WindowDone]:
    """Plan ``task``'s packs (``plan_window``) from its units' staged lengths and patch counts
    (``lengths_of(unit)``: int32 [N] each, and the unit's heavy flag): the plan, and what the driver
    needs of it."""
    columns = [(unit, start, stop, *lengths_of(unit)) for unit, start, stop in task.slices]
    lengths = np.concatenate([length[start:stop] for _, start, stop, length, _, _ in columns])  # int32 [N]
    n_patches = np.concatenate([patches[start:stop] for _, start, stop, _, patches, _ in columns])
    refs = np.concatenate(
        [np.stack([np.full(stop - start, unit), np.arange(start, stop)], axis=1) for unit, start, stop, *_ in columns]
    ).astype(np.int64)  # int64 [N, 2]
    order, bounds = plan_window(lengths, n_patches, packing)
    packs = len(bounds) - 1
    done = WindowDone(
        task.index,
        packs,
        stats_for_flat(lengths, order, bounds, packing.seq_len, packing.pad_multiple),
        bool(packing.pack_count_multiple and packs % packing.pack_count_multiple),
        any(heavy for *_, heavy in columns),
    )
    return PackPlan(refs[order], np.asarray(bounds, dtype=np.int64)), done
