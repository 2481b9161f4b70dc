"""What crosses between the driver and the workers: jobs out, small results back (SPEC §11).

    driver --Unit-->        worker: cook the unit, stage its samples and their lengths --UnitDone--> driver
    driver --WindowTask-->  worker: plan the window's packs from the staged lengths, stage the plan
                            --WindowDone--> driver
    driver --WriteTask-->   worker: for each of its ``ShardTask``s (consecutive shards of one window),
                            build packs ``[start, stop)`` of the window's plan from staged samples,
                            write the shard and its Energon index rows --WriteDone--> driver (a
                            ``ShardDone`` per shard)
    driver --IndexTask-->   worker (once, every shard committed): publish ``.nv-meta/`` from the
                            shards' rows --IndexDone--> driver
    driver --LineCountTask--> worker (before any cook, for JSONL files cut into several units): count
                            the newlines of units --LineCounts--> driver (their files' first line numbers)

A ``UnitDone`` holds the unit's counts (records, samples, tokens) and rejects; a ``WindowDone`` its
pack count and packing stats; a ``ShardDone`` a shard's sha256, size and counts. Nothing the driver
receives grows with samples or packs: token ids, patches, audio features, per-sample lengths, the pack
plans and Energon's per-pack index rows stay in the workers, the staging store
(``cook.runner.staging``) and the progress directory. The driver cuts windows from sample counts and
numbers packs and shards in window order.
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import orjson

from cook.errors import Rejected, RejectReason
from cook.format import PACKED_COUNT_KEYS, Counts
from cook.manifest import ShardInfo
from cook.packing.metrics import PackingStats
from cook.types import RejectRecord, TokenizedSample
from cook.writer.rejects import reject_line


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
    ``first_index`` numbers the unit's first record within its file (line or row, from 1); None for a
    JSONL unit after its file's first until the lines before it are counted (``cook.runner.plan``).
    A repack unit (``reads`` set) is a range ``span`` of one cooked source's sequences in input order;
    ``path`` is that source's manifest.
    """

    index: int
    path: str
    format: str
    span: tuple[int, int] | None = None
    first_index: int | None = 1
    size_bytes: int = 0  # about how much input it holds (for progress only)
    reads: SequenceReads | None = field(default=None, compare=False)  # a repack unit: cooked sequences to read


TRACE_DONE = "done"  # a trace's last line once every record of its unit has been cooked


@dataclass(frozen=True)
class Attempt:
    """How to cook a unit this time: ``trace`` names a file that records each record's ordinal before
    it is cooked, then ``TRACE_DONE`` after the last (set after a worker died on the unit); records in
    ``crashed`` are rejected as ``worker_crash`` instead of being cooked again."""

    trace: str | None = None
    crashed: frozenset[int] = field(default_factory=frozenset)

    def check(self, ordinal: int) -> None:
        """``Rejected(worker_crash)`` for the unit's record ``ordinal`` if it is in ``crashed``."""
        if ordinal in self.crashed:
            raise Rejected(RejectReason.WORKER_CRASH, "record crashed a worker twice")


@dataclass(frozen=True, eq=False)
class UnitSummary:
    """A cooked unit as its worker sees it: what the staging store keeps beside its samples
    (``done()`` is the part the driver gets)."""

    unit: int
    records_in: int
    rejects: tuple[RejectRecord, ...]  # in the order raised: read/cook/media per record, tokenize/fit per batch
    lengths: np.ndarray  # int32 [N] tokens per sample, in record order
    n_patches: np.ndarray  # int32 [N] visual patches per sample
    heavy: bool  # a sample holds patches or audio to copy: the unit's shards are heavy (``heavy_sample``)

    @classmethod
    def of(
        cls, unit: int, records_in: int, rejects: Sequence[RejectRecord], samples: Sequence[TokenizedSample]
    ) -> UnitSummary:
        """The summary of a unit's ``samples`` (``TokenizedSample``s, in record order)."""
        lengths = np.array([s.length for s in samples], dtype=np.int32)
        n_patches = np.array([s.n_patches for s in samples], dtype=np.int32)
        return cls(unit, records_in, tuple(rejects), lengths, n_patches, any(heavy_sample(s) for s in samples))

    @property
    def samples(self) -> int:
        return int(self.lengths.shape[0])

    @property
    def tokens(self) -> int:
        return int(self.lengths.sum())

    def done(self) -> UnitDone:
        return UnitDone(self.unit, self.records_in, Rejects.of(self.rejects), self.samples, self.tokens)


def heavy_sample(sample: TokenizedSample) -> bool:
    """Whether writing ``sample`` moves heavy bytes: raw image or video patches (8.5x a photo's JPEG bytes)
    or audio features. Frames stored png/jpeg, encoded by the cooking worker, are not: a window of them
    is written as a text window is, several shards a job, riding on a cook's call."""
    return any(item.patches is not None or item.audio_features is not None for item in sample.media)


StagedLengths = tuple[np.ndarray, np.ndarray, bool]  # a staged unit's lengths, patch counts, heavy flag


@dataclass(frozen=True)
class Rejects:
    """A unit's rejects as the driver gets them: their ``rejects.jsonl`` lines, made by the worker (the
    driver appends them as they are: no work per record), and the count per reason in first-seen order."""

    lines: str = ""
    by_reason: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(cls, records: Sequence[RejectRecord]) -> Rejects:
        counts = Counter(record.reason.value for record in records)
        return cls("".join(reject_line(record) for record in records), tuple(counts.items()))

    def __len__(self) -> int:
        return sum(n for _, n in self.by_reason)


@dataclass(frozen=True)
class UnitDone:
    """A cooked unit as the driver sees it: counts and rejects; its samples and their lengths wait in
    the staging store under ``unit``."""

    unit: int
    records_in: int
    rejects: Rejects
    samples: int
    tokens: int


Slice = tuple[int, int, int]  # (unit, first sample, end sample) of one unit's samples in a window


@dataclass(frozen=True)
class WindowTask:
    """One window to plan: the samples ``[start, stop)`` of each ``(unit, start, stop)`` in ``slices``,
    in input order. Its plan is a pure function of those samples' lengths and patch counts, so any
    worker makes the same plan, as often as asked (``cook.runner.windows.plan_window_task``)."""

    index: int
    slices: tuple[Slice, ...]

    @property
    def samples(self) -> int:
        return sum(stop - start for _, start, stop in self.slices)


@dataclass(frozen=True)
class WindowDone:
    """A planned window: how many packs, their packing stats, whether their count misses
    ``packing.pack_count_multiple``, and whether its shards are heavy (a unit's sample holds patches or
    audio: ``heavy_sample``), so the driver hands them out a shard per job. The plan itself stays in the
    staging store."""

    index: int
    packs: int
    stats: PackingStats
    short_of_multiple: bool
    heavy: bool


@dataclass(frozen=True, eq=False)
class PackPlan:
    """A window's packs: pack ``j`` holds the samples ``refs[bounds[j]:bounds[j + 1]]``, each ``(unit,
    position in unit)``, in pack order. Kept by the staging store; never sent to the driver."""

    refs: np.ndarray  # int64 [N, 2] (unit, position)
    bounds: np.ndarray  # int64 [packs + 1]

    @property
    def packs(self) -> int:
        return int(self.bounds.shape[0]) - 1

    def packs_in(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Packs ``[start, stop)``: their refs (int64 [S, 2]) and bounds (int64 [stop - start + 1], from 0)."""
        a, b = int(self.bounds[start]), int(self.bounds[stop])
        return self.refs[a:b], self.bounds[start : stop + 1] - a


@dataclass(frozen=True)
class ShardTask:
    """One shard to write: packs ``[start, stop)`` of ``window``'s plan, numbered from ``first_pack``."""

    shard_index: int
    first_pack: int
    window: WindowTask
    start: int
    stop: int

    @property
    def packs(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class WriteTask:
    """Consecutive shards of one window, written by one worker, one after another, in one job: the
    driver's cost is per job (Ray's ``.remote``, ``wait``, ``get``: ~0.6 ms), not per shard, so a text
    window's shards go out together (``cook.runner.windows.SHARDS_PER_WRITE`` at most)."""

    shards: tuple[ShardTask, ...]
    heavy: bool = False  # heavy shards (``heavy_sample``): a Ray call of their own, not riding on a cook's


@dataclass(frozen=True)
class ShardDone:
    """A written shard (its Energon index rows beside it): its manifest entry, what it counts, who wrote it."""

    shard_index: int
    info: ShardInfo
    counts: Counts  # the PACKED_COUNT_KEYS part (records are the driver's)
    writer: str = ""  # the node that wrote it (Ray node id; "" in-process)


@dataclass(frozen=True)
class WriteDone:
    """The shards of a ``WriteTask``, in its order."""

    shards: tuple[ShardDone, ...]


@dataclass(frozen=True)
class IndexTask:
    """Publish ``.nv-meta/`` for shards ``[0, shards)`` from the rows their writers left."""

    shards: int


@dataclass(frozen=True)
class IndexDone:
    shards: int


@dataclass(frozen=True)
class LineCountTask:
    """Count the newlines in each byte range ``spans`` of the JSONL file ``path``: the consecutive units
    from ``first_unit`` on."""

    first_unit: int
    path: str
    spans: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class LineCounts:
    """The newlines of the units from ``first_unit`` on, one count each."""

    first_unit: int
    newlines: tuple[int, ...]


Job = Unit | WindowTask | WriteTask | IndexTask | LineCountTask
Result = UnitDone | WindowDone | WriteDone | IndexDone | LineCounts


# ------------------------------------------------------------------ the wire form: JSON, never pickle
# What a worker sends the driver (and what the staging store keeps beside a unit) is JSON: nothing
# the driver reads can run code, whatever the records held. The staged summary adds the per-sample
# int32 columns as base64 of their little-endian bytes; the driver never decodes them.


def _array(values: np.ndarray, dtype: str) -> str:
    """``values`` as base64 of their ``dtype`` (little-endian) bytes."""
    return base64.b64encode(np.ascontiguousarray(values, dtype=dtype).tobytes()).decode("ascii")


def _from_array(text: str, dtype: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype=dtype).astype(np.dtype(dtype).newbyteorder("="))


def _body(result: Result) -> dict[str, Any]:
    if isinstance(result, UnitDone):
        return {
            "unit": result.unit,
            "records_in": result.records_in,
            "reject_lines": result.rejects.lines,
            "rejects_by_reason": result.rejects.by_reason,
            "samples": result.samples,
            "tokens": result.tokens,
        }
    if isinstance(result, WindowDone):
        return {
            "window": result.index,
            "packs": result.packs,
            "stats": asdict(result.stats),
            "short_of_multiple": result.short_of_multiple,
            "heavy": result.heavy,
        }
    if isinstance(result, IndexDone):
        return {"index_shards": result.shards}
    if isinstance(result, LineCounts):
        return {"lines_from_unit": result.first_unit, "newlines": result.newlines}
    return {"written": [_shard_body(shard) for shard in result.shards]}


def _shard_body(shard: ShardDone) -> dict[str, Any]:
    return {
        "shard_index": shard.shard_index,
        "info": asdict(shard.info),
        "counts": shard.counts.to_dict(PACKED_COUNT_KEYS),
        "writer": shard.writer,
    }


def _dumps(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def encode_result(result: Result) -> bytes:
    """``result`` as UTF-8 JSON bytes (``decode_result`` reads it back)."""
    return _dumps(_body(result))


def encode_staged(summary: UnitSummary) -> bytes:
    """The staging store's sidecar of a unit: its ``UnitDone`` (``decode_result`` reads that part)
    plus its lengths, patch counts and heavy flag (``staged_lengths``)."""
    body = _body(summary.done())
    body["lengths"], body["n_patches"] = _array(summary.lengths, "<i4"), _array(summary.n_patches, "<i4")
    body["heavy"] = summary.heavy
    return _dumps(body)


def staged_lengths(payload: bytes) -> StagedLengths:
    """The lengths, patch counts (int32 [N] each) and heavy flag of a sidecar written by ``encode_staged``."""
    body = json.loads(payload)
    heavy = bool(body.get("heavy", True))  # staged before the flag (a resume): heavy, a shard per job
    return _from_array(body["lengths"], "<i4"), _from_array(body["n_patches"], "<i4"), heavy


def decode_result(payload: bytes) -> Result:
    body = orjson.loads(payload)
    if "unit" in body:
        by_reason = tuple((RejectReason(reason).value, int(n)) for reason, n in body["rejects_by_reason"])
        rejects = Rejects(body["reject_lines"], by_reason)
        return UnitDone(body["unit"], body["records_in"], rejects, body["samples"], body["tokens"])
    if "window" in body:
        stats = PackingStats.from_fields(body["stats"])
        return WindowDone(body["window"], body["packs"], stats, body["short_of_multiple"], body["heavy"])
    if "index_shards" in body:
        return IndexDone(body["index_shards"])
    if "lines_from_unit" in body:
        return LineCounts(body["lines_from_unit"], tuple(body["newlines"]))
    return WriteDone(tuple(_shard_done(shard) for shard in body["written"]))


def _shard_done(body: dict[str, Any]) -> ShardDone:
    counts = Counts.from_dict(body["counts"])
    return ShardDone(body["shard_index"], ShardInfo(**body["info"]), counts, body["writer"])


# ------------------------------------------------------------------ jobs, driver to worker: JSON too
# A Ray call carries ``encode_jobs`` of its (job, attempt) pairs; the actor reads them with
# ``decode_jobs``, which builds only these dataclasses from plain values: nothing it reads can run
# code. ``json`` (not orjson) both ways: a path from an undecodable file name holds a lone surrogate,
# which ``json`` escapes and reads back.


def _window_body(window: WindowTask) -> dict[str, Any]:
    return {"window": window.index, "slices": window.slices}


def _window_task(body: dict[str, Any]) -> WindowTask:
    return WindowTask(body["window"], tuple((int(u), int(a), int(b)) for u, a, b in body["slices"]))


def _job_body(job: Job) -> dict[str, Any]:
    if isinstance(job, Unit):
        body = {"unit": job.index, "path": job.path, "format": job.format, "span": job.span}
        body |= {"first_index": job.first_index, "size_bytes": job.size_bytes}
        if job.reads is not None:
            reads = job.reads
            body["reads"] = {
                "shards": reads.shards,
                "shard": _array(reads.shard, "<i4"),
                "offset": _array(reads.offset, "<i8"),
                "seq": _array(reads.seq, "<i4"),
            }
        return body
    if isinstance(job, WindowTask):
        return _window_body(job)
    if isinstance(job, WriteTask):
        shards = [
            {"shard_index": s.shard_index, "first_pack": s.first_pack, "of": _window_body(s.window)}
            | {"start": s.start, "stop": s.stop}
            for s in job.shards
        ]
        return {"write": shards, "heavy": job.heavy}
    if isinstance(job, IndexTask):
        return {"index_shards": job.shards}
    return {"count_from_unit": job.first_unit, "path": job.path, "spans": job.spans}


def _job(body: dict[str, Any]) -> Job:
    if "unit" in body:
        reads = body.get("reads")
        return Unit(
            body["unit"],
            body["path"],
            body["format"],
            tuple(body["span"]) if body["span"] is not None else None,
            body["first_index"],
            body["size_bytes"],
            reads=None
            if reads is None
            else SequenceReads(
                tuple(reads["shards"]),
                _from_array(reads["shard"], "<i4"),
                _from_array(reads["offset"], "<i8"),
                _from_array(reads["seq"], "<i4"),
            ),
        )
    if "window" in body:
        return _window_task(body)
    if "write" in body:
        shards = tuple(
            ShardTask(s["shard_index"], s["first_pack"], _window_task(s["of"]), s["start"], s["stop"])
            for s in body["write"]
        )
        return WriteTask(shards, body["heavy"])
    if "index_shards" in body:
        return IndexTask(body["index_shards"])
    return LineCountTask(body["count_from_unit"], body["path"], tuple((int(a), int(b)) for a, b in body["spans"]))


def encode_jobs(jobs: Sequence[tuple[Job, Attempt]]) -> bytes:
    """One Ray call's jobs and their attempts as JSON bytes (``decode_jobs`` reads them back)."""
    return json.dumps(
        [[_job_body(job), {"trace": attempt.trace, "crashed": sorted(attempt.crashed)}] for job, attempt in jobs],
        separators=(",", ":"),
    ).encode("ascii")


def decode_jobs(payload: bytes) -> list[tuple[Job, Attempt]]:
    """``encode_jobs``' pairs again: only this module's dataclasses, built from plain JSON values."""
    pairs = json.loads(payload)
    return [(_job(job), Attempt(attempt["trace"], frozenset(attempt["crashed"]))) for job, attempt in pairs]
