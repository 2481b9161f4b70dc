"""In-process executor: the same CookWorker, called directly (``--workers 0``, tests, benchmarks).

Each job runs when it is submitted and its result waits in a queue for ``next_done``; the worker's
progress reports of a unit reach ``on_progress`` while it cooks. Samples are staged in memory for
windowed packing, on disk for ``buffer_size: all`` (pass 1 stages the whole dataset, so it must not
need the whole dataset in memory).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from cook.config import PipelineConfig
from cook.runner.progress import REPORT_INTERVAL_S, UnitProgress
from cook.runner.staging import DiskStore, MemoryStore, SampleStore
from cook.runner.units import ShardDone, ShardTask, Unit, UnitSummary
from cook.runner.worker import CookWorker


class LocalExecutor:
    slots = 1
    lookahead = 1
    received_bytes = 0  # nothing crosses a process boundary

    def __init__(self, config: PipelineConfig, report_interval_s: float = REPORT_INTERVAL_S) -> None:
        all_at_once = config.packing.buffer_size == "all"
        self.store: SampleStore = DiskStore(config.output.dir) if all_at_once else MemoryStore()
        self.on_progress: Callable[[UnitProgress], None] = lambda progress: None
        self.worker = CookWorker(config, self.store, lambda progress: self.on_progress(progress), report_interval_s)
        self._done: deque[UnitSummary | ShardDone] = deque()

    def submit(self, job: Unit | ShardTask) -> None:
        if isinstance(job, Unit):
            self._done.append(self.worker.cook_unit(job))
        else:
            self._done.append(self.worker.write_shard(job))

    def outstanding(self) -> int:
        return len(self._done)

    def next_done(self) -> UnitSummary | ShardDone:
        return self._done.popleft()

    def close(self) -> None:
        pass
