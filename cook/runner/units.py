"""What crosses between the driver and the workers: jobs out, small summaries back (SPEC §11).

    driver --Unit-->       worker: cook the unit, stage its samples  --UnitSummary-->  driver
    driver --ShardTask-->  worker: build packs from staged samples, write the shard --ShardDone--> driver

A ``UnitSummary`` holds per-sample lengths and patch counts, the unit's rejects and counts; a
``ShardDone`` holds the shard's sha256, size, Energon index rows and counts. Token ids, patches and
audio features stay in the worker and the staging store (``cook.runner.staging``): the driver plans
packs from the lengths alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cook.types import RejectRecord
from cook.writer.shards import ShardInfo, ShardLayout

PACKED_COUNT_KEYS = (
    "packs",
    "sources_packed",
    "tokens",
    "target_tokens",
    "padding_tokens",
    "truncated_sequences",
    "truncated_tokens",
)


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
    size_bytes: int = 0  # about how much input it holds (for progress only)


@dataclass(frozen=True)
class Attempt:
    """How to cook a unit this time: ``trace`` names a file that records each record's ordinal before
    it is cooked (set after a worker died on the unit); records in ``crashed`` are rejected as
    ``worker_crash`` instead of being cooked again."""

    trace: str | None = None
    crashed: frozenset[int] = field(default_factory=frozenset)


@dataclass(frozen=True, eq=False)
class UnitSummary:
    """A cooked unit as the driver sees it; its samples wait in the staging store under ``unit``."""

    unit: int
    records_in: int
    rejects: tuple[RejectRecord, ...]  # deterministic order: source failures, then cook/tokenize rejects
    lengths: np.ndarray  # int32 [N] tokens per sample, in record order
    n_patches: np.ndarray  # int32 [N] visual patches per sample

    @property
    def samples(self) -> int:
        return int(self.lengths.shape[0])

    @property
    def tokens(self) -> int:
        return int(self.lengths.sum())


@dataclass(frozen=True, eq=False)
class ShardTask:
    """One shard to write: pack ``first_pack + j`` holds the samples ``refs[bounds[j]:bounds[j+1]]``,
    each ``(unit, position in unit)``, in pack order."""

    shard_index: int
    first_pack: int
    refs: np.ndarray  # int64 [S, 2] (unit, position)
    bounds: np.ndarray  # int64 [packs + 1]

    @property
    def packs(self) -> int:
        return int(self.bounds.shape[0]) - 1


@dataclass(frozen=True)
class ShardDone:
    """A written shard: its manifest entry, its Energon index rows, what it counts, who wrote it."""

    shard_index: int
    info: ShardInfo
    layout: ShardLayout
    counts: dict[str, int]  # PACKED_COUNT_KEYS
    writer: str = ""  # the node that wrote it (Ray node id; "" in-process)
