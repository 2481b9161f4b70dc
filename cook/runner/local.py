"""In-process executor: the same CookWorker, called directly (``--workers 0``, tests, benchmarks).

Each job waits in a queue and runs when the driver asks for ``next_done``, so the driver's own work
before that call comes before the first cook, not in the middle of the progress bar. The worker's
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
from cook.runner.units import Job, Result
from cook.runner.worker import CookWorker


class LocalExecutor:
    slots = 1
    lookahead = 1
    shards_per_write = 1  # no per-job cost to save in-process: a shard a job, so a Ctrl-C keeps each one written
    received_bytes = 0  # nothing crosses a process boundary

    def __init__(self, config: PipelineConfig, report_interval_s: float = REPORT_INTERVAL_S) -> None:
        all_at_once = config.packing.buffer_size == "all"
        self.store: SampleStore = DiskStore(config.output.dir) if all_at_once else MemoryStore()
        self.on_progress: Callable[[UnitProgress], None] | None = None
        self.worker = CookWorker(config, self.store, self._report, report_interval_s)
        self._jobs: deque[Job] = deque()

    def _report(self, progress: UnitProgress) -> None:
        if self.on_progress is not None:
            self.on_progress(progress)

    def submit(self, job: Job) -> None:
        self._jobs.append(job)

    def outstanding(self) -> int:
        return len(self._jobs)

    def next_done(self) -> Result:
        return self.worker.work(self._jobs.popleft())

    def close(self) -> None:
        pass
