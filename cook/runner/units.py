"""What crosses between the driver and the workers: jobs out, small summaries back (SPEC §11).

    driver --Unit-->       worker: cook the unit, stage its samples  --UnitSummary-->  driver
    driver --ShardTask-->  worker: build packs from staged samples, write the shard --ShardDone--> driver

A ``UnitSummary`` holds per-sample lengths and patch counts, the unit's rejects and counts; a
``ShardDone`` holds the shard's sha256, size, Energon index rows and counts. Token ids, patches and
audio features stay in the worker and the staging store (``cook.runner.staging``): the driver plans
packs from the lengths alone.
"""

from __future__ import annotations

import base64
import json
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from cook.errors import Rejected, RejectReason
from cook.format import PACKED_COUNT_KEYS, Counts
from cook.manifest import ShardInfo
from cook.types import RejectRecord
from cook.writer.shards import ShardLayout


@dataclass(frozen=True, eq=False)
class SequenceReads:
    """Where a repack unit's sequences are, in input order (``cook repack``, ``cook.runner.repack_index``):
    sequence ``i`` is sequence ``seq[i]`` of the pack whose first tar header is at byte ``offset[i]`` of
    the shard ``shards[shard[i]]`` (a path)."""

    shards: tuple[str, ...]
    shard: np.ndarray  # int32 [N] index into shards
    offset: np.ndarray  # int64 [N] the pack's offset in its shard (from the shard's .tar.idx)
    seq: np.ndarray  # int32 [N] the sequence's position in its pack

    def __len__(self) -> int:
        return int(self.seq.shape[0])


@dataclass(frozen=True)
class Unit:
    """A slice of one input file, cooked by one worker call. ``index`` fixes its place in the output.

    ``span`` is a byte range (JSONL) or a row-group range (Parquet); None means the whole file.
    ``first_index`` numbers the unit's first record within its file (line or row, from 1).
    A repack unit (``reads`` set) is a range ``span`` of one cooked source's sequences in input order;
    ``path`` is that source's manifest.
    """

    index: int
    path: str
    format: str
    span: tuple[int, int] | None = None
    first_index: int = 1
    size_bytes: int = 0  # about how much input it holds (for progress only)
    reads: SequenceReads | None = field(default=None, compare=False)  # a repack unit: cooked sequences to read


@dataclass(frozen=True)
class Attempt:
    """How to cook a unit this time: ``trace`` names a file that records each record's ordinal before
    it is cooked (set after a worker died on the unit); records in ``crashed`` are rejected as
    ``worker_crash`` instead of being cooked again."""

    trace: str | None = None
    crashed: frozenset[int] = field(default_factory=frozenset)

    def check(self, ordinal: int) -> None:
        """``Rejected(worker_crash)`` for the unit's record ``ordinal`` if it is in ``crashed``."""
        if ordinal in self.crashed:
            raise Rejected(RejectReason.WORKER_CRASH, "record crashed a worker twice")


@dataclass(frozen=True, eq=False)
class UnitSummary:
    """A cooked unit as the driver sees it; its samples wait in the staging store under ``unit``."""

    unit: int
    records_in: int
    rejects: tuple[RejectRecord, ...]  # in the order raised: read/cook/media per record, tokenize/fit per batch
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
    counts: Counts  # the PACKED_COUNT_KEYS part (records are the driver's)
    writer: str = ""  # the node that wrote it (Ray node id; "" in-process)


# ------------------------------------------------------------------ the wire form: JSON, never pickle
# What a worker sends the driver (and what the staging store keeps beside a unit) is JSON, with the
# per-sample int32 columns as base64 of their little-endian bytes: nothing the driver reads can run
# code, whatever the records held.


def _int32s(values: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(values, dtype="<i4").tobytes()).decode("ascii")


def _from_int32s(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<i4").astype(np.int32)


def encode_result(result: UnitSummary | ShardDone) -> bytes:
    """``result`` as UTF-8 JSON bytes (``decode_result`` reads it back)."""
    body: dict[str, Any]
    if isinstance(result, UnitSummary):
        body = {
            "unit": result.unit,
            "records_in": result.records_in,
            "rejects": [[r.source, r.reason.value, r.detail] for r in result.rejects],
            "lengths": _int32s(result.lengths),
            "n_patches": _int32s(result.n_patches),
        }
    else:
        layout = result.layout
        body = {
            "shard_index": result.shard_index,
            "info": asdict(result.info),
            "layout": [list(layout.keys), list(layout.offsets), [list(part) for part in layout.parts]],
            "counts": result.counts.to_dict(PACKED_COUNT_KEYS),
            "writer": result.writer,
        }
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def decode_result(payload: bytes) -> UnitSummary | ShardDone:
    body = json.loads(payload)
    if "unit" in body:
        return UnitSummary(
            unit=body["unit"],
            records_in=body["records_in"],
            rejects=tuple(RejectRecord(s, RejectReason(r), d) for s, r, d in body["rejects"]),
            lengths=_from_int32s(body["lengths"]),
            n_patches=_from_int32s(body["n_patches"]),
        )
    keys, offsets, parts = body["layout"]
    layout = ShardLayout(tuple(keys), tuple(offsets), tuple((i, n, o, z) for i, n, o, z in parts))
    counts = Counts.from_dict(body["counts"])
    return ShardDone(body["shard_index"], ShardInfo(**body["info"]), layout, counts, body["writer"])
