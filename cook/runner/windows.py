"""The driver's pack plan: unit summaries in unit order -> windows -> shard tasks (SPEC §7, §11).

A window is ``packing.buffer_size`` consecutive samples in input order (``all``: every sample, one
window). When it fills, the plan packs it from the samples' lengths and patch counts alone
(``plan_window``), numbers its packs and shards after the windows before it, and cuts it into
``ShardTask``s of ``output.shard_size`` packs (a window's last shard may be short). Nothing here
sees a token or a patch, so planning costs the same however heavy the media.

Worked example, ``buffer_size=3``, units 0 and 1 holding 2 and 4 samples::

    window 0 = unit 0 [0, 2) + unit 1 [0, 1)   ends at (unit 1, skip 1)
    window 1 = unit 1 [1, 4)                   ends at (unit 2, skip 0)

The end of a window is where a resumed run starts once the window's shards are all written.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cook.config import PackingConfig
from cook.packing.metrics import PackingStats, stats_for_flat
from cook.packing.packer import plan_window
from cook.runner.units import ShardTask, UnitSummary


@dataclass(frozen=True)
class Position:
    """A place in the input: sample ``skip`` of unit ``unit`` (``skip == 0``: the unit's start)."""

    unit: int
    skip: int = 0


@dataclass
class WindowPlan:
    index: int
    start: Position
    end: Position
    first_shard: int
    first_pack: int
    packs: int
    stats: PackingStats
    short_of_multiple: bool
    tasks: list[ShardTask] = field(default_factory=list)

    @property
    def shards(self) -> range:
        return range(self.first_shard, self.first_shard + len(self.tasks))


@dataclass
class _Slice:
    unit: int
    start: int  # first sample of the unit in the window
    stop: int
    unit_samples: int
    lengths: np.ndarray  # int32 [stop - start]
    n_patches: np.ndarray  # int32 [stop - start]


def _cut(piece: _Slice, a: int, b: int) -> _Slice:
    """Samples ``[a, b)`` of ``piece`` (counted from its start)."""
    return _Slice(
        piece.unit, piece.start + a, piece.start + b, piece.unit_samples, piece.lengths[a:b], piece.n_patches[a:b]
    )


class Planner:
    """Feed it summaries in unit order (``add``), then ``finish``; each returns the windows closed."""

    def __init__(
        self, packing: PackingConfig, shard_size: int, start: Position, window: int, shard: int, pack: int
    ) -> None:
        self.packing = packing
        self.shard_size = shard_size
        self.size: int | None = None if packing.buffer_size == "all" else int(packing.buffer_size)
        self._slices: list[_Slice] = []
        self._held = 0  # samples in the open window
        self._start = start
        self._resume = start  # the first unit may be partly packed already
        self._window, self._shard, self._pack = window, shard, pack

    def add(self, summary: UnitSummary) -> list[WindowPlan]:
        skip = self._resume.skip if summary.unit == self._resume.unit else 0
        n = summary.samples
        if skip < n:
            self._slices.append(_Slice(summary.unit, skip, n, n, summary.lengths[skip:], summary.n_patches[skip:]))
            self._held += n - skip
        closed = []
        while self.size is not None and self._held >= self.size:
            closed.append(self._close(self.size))
        return closed

    def finish(self) -> list[WindowPlan]:
        return [self._close(self._held)] if self._held else []

    def _take(self, count: int) -> tuple[list[_Slice], Position]:
        taken: list[_Slice] = []
        while count:
            head = self._slices[0]
            k = min(count, head.stop - head.start)
            if k == head.stop - head.start:
                taken.append(self._slices.pop(0))
            else:
                taken.append(_cut(head, 0, k))
                self._slices[0] = _cut(head, k, head.stop - head.start)
            count -= k
        last = taken[-1]
        end = Position(last.unit + 1) if last.stop == last.unit_samples else Position(last.unit, last.stop)
        return taken, end

    def _close(self, count: int) -> WindowPlan:
        taken, end = self._take(count)
        self._held -= count
        lengths = np.concatenate([s.lengths for s in taken])  # int32 [N]
        n_patches = np.concatenate([s.n_patches for s in taken])
        refs = np.concatenate(
            [np.stack([np.full(s.stop - s.start, s.unit), np.arange(s.start, s.stop)], axis=1) for s in taken]
        ).astype(np.int64)  # int64 [N, 2]
        order, bounds = plan_window(lengths, n_patches, self.packing)
        packs = len(bounds) - 1
        plan = WindowPlan(
            index=self._window,
            start=self._start,
            end=end,
            first_shard=self._shard,
            first_pack=self._pack,
            packs=packs,
            stats=stats_for_flat(lengths, order, bounds, self.packing.seq_len, self.packing.pad_multiple),
            short_of_multiple=bool(self.packing.pack_count_multiple and packs % self.packing.pack_count_multiple),
        )
        for first in range(0, packs, self.shard_size):
            last = min(first + self.shard_size, packs)
            a, b = int(bounds[first]), int(bounds[last])
            plan.tasks.append(
                ShardTask(self._shard, self._pack + first, refs[order[a:b]], bounds[first : last + 1] - a)
            )
            self._shard += 1
        self._pack += packs
        self._window += 1
        self._start = end
        return plan
