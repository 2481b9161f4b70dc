"""In-process executor: the same CookWorker, called directly (``--workers 0``, tests, benchmarks)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from cook.config import PipelineConfig
from cook.runner.units import Unit, UnitResult
from cook.runner.worker import CookWorker


class LocalExecutor:
    def __init__(self, config: PipelineConfig) -> None:
        self.worker = CookWorker(config)

    def map_units(self, units: Iterable[Unit]) -> Iterator[UnitResult]:
        for unit in units:
            yield self.worker.cook_unit(unit)

    def close(self) -> None:
        pass
