"""Work units and their results: the only things that cross the Ray boundary."""

from __future__ import annotations

from dataclasses import dataclass, field

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
    unit: int
    samples: tuple[TokenizedSample, ...]  # in record order
    rejects: tuple[RejectRecord, ...]  # in record order
    records_in: int

    @property
    def tokens(self) -> int:
        return sum(s.length for s in self.samples)
