"""Work units and their results: the only things that cross the Ray boundary."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cook.types import RejectRecord, TokenizedSample


@dataclass(frozen=True)
class Unit:
    """A slice of one input file, cooked by one worker call. ``index`` fixes its place in the output.

    ``span`` is a byte range (JSONL) or a row-group range (Parquet); None means the whole file.
    ``first_index`` numbers the unit's first record within its file (line or row, from 1).
    """

    index: int
    path: str
    format: str
    span: tuple[int, int] | None = None
    first_index: int = 1


@dataclass(frozen=True)
class Attempt:
    """How to cook a unit this time: ``trace`` names a file that records each record's ordinal before
    it is cooked (set after a worker died on the unit); records in ``crashed`` are rejected as
    ``worker_crash`` instead of being cooked again."""

    trace: str | None = None
    crashed: frozenset[int] = field(default_factory=frozenset)


@dataclass(frozen=True, eq=False)
class UnitResult:
    """What a worker returns for a unit. Pickled columnar (see ``__reduce__``) to cross Ray cheaply."""

    unit: int
    samples: tuple[TokenizedSample, ...]  # in record order
    rejects: tuple[RejectRecord, ...]  # deterministic order: source failures, then cook/tokenize rejects
    records_in: int

    @property
    def tokens(self) -> int:
        return sum(s.length for s in self.samples)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Send all samples' ids and masks as two concatenated arrays instead of two small arrays per
        sample: Ray then moves a few large buffers, not tens of thousands of tiny ones."""
        samples = self.samples
        lengths = np.array([s.length for s in samples], dtype=np.int64)  # int64 [N]
        ids = np.concatenate([s.input_ids for s in samples]) if samples else np.zeros(0, np.int32)
        mask = np.concatenate([s.loss_mask for s in samples]) if samples else np.zeros(0, np.uint8)
        sources = "\0".join(s.source for s in samples)  # a path never holds NUL
        ends = np.array([s.media_end for s in samples], dtype=np.int64)  # int64 [N]
        truncated = np.array([s.truncated for s in samples], dtype=bool)  # bool [N]
        media = {i: s.media for i, s in enumerate(samples) if s.media}
        columns = (lengths, ids, mask, sources, ends, truncated, media)
        return _rebuild, (self.unit, columns, self.rejects, self.records_in)


def _rebuild(unit: int, columns: tuple, rejects: tuple, records_in: int) -> UnitResult:
    lengths, ids, mask, sources, ends, truncated, media = columns
    bounds = np.concatenate([[0], np.cumsum(lengths)]).tolist()
    names = sources.split("\0") if len(lengths) else []
    samples = tuple(
        TokenizedSample(name, ids[a:b], mask[a:b], media.get(i, ()), end, cut)
        for i, (name, a, b, end, cut) in enumerate(
            zip(names, bounds[:-1], bounds[1:], ends.tolist(), truncated.tolist(), strict=True)
        )
    )
    return UnitResult(unit, samples, rejects, records_in)
