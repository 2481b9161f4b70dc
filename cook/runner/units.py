"""Work units and their results: the only things that cross the Ray boundary."""

from __future__ import annotations

from dataclasses import dataclass

from cook.types import RejectRecord, TokenizedSample


@dataclass(frozen=True)
class Unit:
    """One input file, cooked by one worker call. ``index`` fixes its place in the output order."""

    index: int
    path: str
    format: str


@dataclass(frozen=True, eq=False)
class UnitResult:
    unit: int
    samples: tuple[TokenizedSample, ...]  # in record order
    rejects: tuple[RejectRecord, ...]  # in record order
    records_in: int

    @property
    def tokens(self) -> int:
        return sum(s.length for s in self.samples)
