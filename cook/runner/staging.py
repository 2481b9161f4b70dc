"""The staging sample store: a unit's cooked samples wait here until their packs are written.

    put(summary, samples)  ->  lengths(unit) (a window's plan)  ->  get/take (a shard)  ->  drop(unit)
    put_plan(window, plan)  ->  plan(window) (each shard of the window)  ->  drop_plan(window)

``MemoryStore`` keeps them in the process (in-process runs with windows). ``DiskStore`` writes one
file per unit under ``<output>/.cook-progress/stage/`` (``cook.runner.output_dir.stage_dir``; Ray
runs, where the shard writer may be another process or node, and ``buffer_size: all``, where pass 1
stages the whole dataset): the arrays are written beside their own buffers (no concatenation of
media) and come back as views of a read-only ``mmap``, so a shard writer copies each byte once,
into the tar. A reader builds a sample only when a shard asks for it (``StagedUnit``). A ``cook
repack`` unit's image and video patches are not copied into the stage file: it keeps a ``PatchSpan``
(source shard, byte offset, rows) and the reader maps the rows from the source shard, so they move
once, from the source shard into the new one.

A stage file is written under a temporary name and renamed; its small summary sidecar (the
``UnitSummary``: counts, rejects, lengths, patch counts) is renamed after it, so a present sidecar
means a complete unit, which a resumed run reuses instead of cooking it again (the driver reads only
its counts, ``UnitDone``). A window's pack plan (``PackPlan``, made by the worker that planned it) is
staged as ``window-NNNNNN.plan`` for the workers that write its shards; a plan that is missing, or
that is not the asked window's, is made again (it is a pure function of the window's lengths). Staging
is scratch: it is not fsynced (a process kill keeps it; a lost machine loses only work that is redone).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import mmap
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, overload

import numpy as np
import orjson

from cook import format as fmt
from cook.runner.output_dir import stage_dir
from cook.runner.units import (
    PackPlan,
    StagedLengths,
    UnitDone,
    UnitSummary,
    WindowTask,
    decode_result,
    encode_staged,
    staged_lengths,
)
from cook.types import MediaItem, TokenizedSample

CACHE_UNITS = 64  # open stage files per reader: a shard takes samples from all of a window's units
CACHE_BYTES = 512 * 2**20  # ... and at most this many bytes of them mapped
MAGIC = b"COOKSTG1"
PLAN_MAGIC = b"COOKPLN1"
ALIGN = 64


@dataclass(frozen=True)
class PatchSpan:
    """Where a media item's ``pixel_patches`` rows lie in a cooked shard (``cook repack``)."""

    shard: str  # the source shard's path
    offset: int  # byte offset of the item's first row in the shard
    rows: int


@dataclass(frozen=True)
class FrameSpans:
    """Where a media item's stored frame members (png/jpeg storage) lie in a cooked shard (``cook repack``)."""

    shard: str  # the source shard's path
    members: tuple[tuple[int, int], ...]  # (byte offset, size) of each frame's bytes, in frame order


MediaSpan = PatchSpan | FrameSpans
Spans = Sequence[tuple[MediaSpan | None, ...]]  # per sample, per media item; None: stage the item's bytes


class SampleStore(Protocol):
    def put(self, summary: UnitSummary, samples: Sequence[TokenizedSample], spans: Spans | None = None) -> None: ...
    def take(self, refs: np.ndarray) -> list[TokenizedSample]: ...
    def summary(self, unit: int) -> UnitDone | None: ...
    def lengths(self, unit: int) -> StagedLengths: ...
    def drop(self, unit: int) -> None: ...
    def put_plan(self, window: WindowTask, plan: PackPlan) -> None: ...
    def plan(self, window: WindowTask) -> PackPlan | None: ...
    def drop_plan(self, window: int) -> None: ...


class MemoryStore:
    def __init__(self) -> None:
        self._units: dict[int, Sequence[TokenizedSample]] = {}
        self._lengths: dict[int, StagedLengths] = {}
        self._plans: dict[int, tuple[WindowTask, PackPlan]] = {}

    def put(self, summary: UnitSummary, samples: Sequence[TokenizedSample], spans: Spans | None = None) -> None:
        """Keep ``samples`` (their arrays as they are: ``spans`` is not needed in the process)."""
        self._units[summary.unit] = samples
        self._lengths[summary.unit] = (summary.lengths, summary.n_patches, summary.heavy)

    def lengths(self, unit: int) -> StagedLengths:
        """The unit's lengths and patch counts (int32 [N] each), in sample order, and its heavy flag."""
        return self._lengths[unit]

    def put_plan(self, window: WindowTask, plan: PackPlan) -> None:
        self._plans[window.index] = (window, plan)

    def plan(self, window: WindowTask) -> PackPlan | None:
        kept = self._plans.get(window.index)
        return kept[1] if kept is not None and kept[0] == window else None

    def drop_plan(self, window: int) -> None:
        self._plans.pop(window, None)

    def get(self, unit: int) -> Sequence[TokenizedSample]:
        return self._units[unit]

    def take(self, refs: np.ndarray) -> list[TokenizedSample]:
        """The samples at ``refs`` (int64 [N, 2]: unit, position), in order."""
        units = self._units
        return [units[unit][position] for unit, position in refs.tolist()]

    def summary(self, unit: int) -> UnitDone | None:
        return None  # nothing survives the process: a resumed run cooks again

    def drop(self, unit: int) -> None:
        self._units.pop(unit, None)
        self._lengths.pop(unit, None)


class DiskStore:
    """One ``unit-NNNNNN.stage`` (+ ``.json`` summary) per unit in the stage directory; reads are
    cached per unit."""

    def __init__(self, out_dir: str) -> None:
        self.dir = stage_dir(out_dir)
        self._cache: dict[int, StagedUnit] = {}
        self._mapped = 0  # bytes of the open stage files
        self._plan: tuple[WindowTask, PackPlan] | None = None  # the last plan read: a window's shards come in turn

    def _path(self, unit: int, suffix: str) -> str:
        return os.path.join(self.dir, f"unit-{unit:06d}{suffix}")

    def put(self, summary: UnitSummary, samples: Sequence[TokenizedSample], spans: Spans | None = None) -> None:
        """Stage ``samples``; an item with a ``PatchSpan`` in ``spans`` is staged as that reference."""
        os.makedirs(self.dir, exist_ok=True)
        _write_atomic(self._path(summary.unit, ".stage"), _stage_buffers(samples, spans))
        _write_atomic(self._path(summary.unit, ".json"), [encode_staged(summary)])

    def lengths(self, unit: int) -> StagedLengths:
        """The unit's lengths and patch counts (int32 [N] each), in sample order, and its heavy flag,
        from its sidecar."""
        with open(self._path(unit, ".json"), "rb") as handle:
            return staged_lengths(handle.read())

    def _plan_path(self, window: int) -> str:
        return os.path.join(self.dir, f"window-{window:06d}.plan")

    def put_plan(self, window: WindowTask, plan: PackPlan) -> None:
        """Stage ``window``'s plan: a JSON header naming the window's slices, then bounds and refs (<i8)."""
        os.makedirs(self.dir, exist_ok=True)
        head = json.dumps({"slices": window.slices, "packs": plan.packs, "samples": len(plan.refs)}).encode()
        lead = PLAN_MAGIC + struct.pack("<Q", len(head)) + head
        lead += b"\0" * (-len(lead) % ALIGN)
        bounds, refs = plan.bounds.astype("<i8", copy=False), plan.refs.astype("<i8", copy=False)
        _write_atomic(self._plan_path(window.index), [lead, np.ascontiguousarray(bounds), np.ascontiguousarray(refs)])
        self._plan = (window, plan)

    def plan(self, window: WindowTask) -> PackPlan | None:
        """``window``'s staged plan (views of the mapped file), or None when it is missing or another
        window's (a stale file under the same name)."""
        if self._plan is not None and self._plan[0] == window:
            return self._plan[1]
        try:
            mapped = map_file(self._plan_path(window.index))
        except (FileNotFoundError, ValueError):  # ValueError: an empty file
            return None
        if mapped[: len(PLAN_MAGIC)] != PLAN_MAGIC:
            return None
        (head_len,) = struct.unpack_from("<Q", mapped, len(PLAN_MAGIC))
        start = len(PLAN_MAGIC) + 8
        header = json.loads(bytes(mapped[start : start + head_len]))
        if [tuple(s) for s in header["slices"]] != list(window.slices):
            return None
        base = start + head_len + (-(start + head_len) % ALIGN)
        packs, samples = header["packs"], header["samples"]
        bounds = np.frombuffer(mapped, "<i8", packs + 1, base)
        refs = np.frombuffer(mapped, "<i8", 2 * samples, base + 8 * (packs + 1)).reshape(samples, 2)
        plan = PackPlan(refs, bounds)
        self._plan = (window, plan)
        return plan

    def drop_plan(self, window: int) -> None:
        if self._plan is not None and self._plan[0].index == window:
            self._plan = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._plan_path(window))

    def get(self, unit: int) -> StagedUnit:
        """The unit's samples; the least recently read units are closed past ``CACHE_UNITS`` open
        or ``CACHE_BYTES`` mapped (an open mapping keeps a dropped unit's pages alive)."""
        staged = self._cache.pop(unit, None)
        if staged is None:
            staged = StagedUnit(self._path(unit, ".stage"))
            self._mapped += staged.nbytes
        self._cache[unit] = staged  # most recent last
        while len(self._cache) > 1 and (len(self._cache) > CACHE_UNITS or self._mapped > CACHE_BYTES):
            self._mapped -= self._cache.pop(next(iter(self._cache))).nbytes
        return staged

    def take(self, refs: np.ndarray) -> list[TokenizedSample]:
        """The samples at ``refs`` (int64 [N, 2]: unit, position), in order: each unit is looked up
        once and builds its samples in one call (a shard takes thousands of text samples)."""
        out: list[TokenizedSample | None] = [None] * len(refs)
        units, positions = refs[:, 0], refs[:, 1]
        for unit in np.unique(units).tolist():  # int64 [U], sorted
            at = np.flatnonzero(units == unit)  # int64 [k]
            for i, sample in zip(at.tolist(), self.get(unit).take(positions[at].tolist()), strict=True):
                out[i] = sample
        return out  # type: ignore[return-value]  # every slot was filled

    def summary(self, unit: int) -> UnitDone | None:
        """The counts of a completely staged unit (a resumed run reuses it), else None."""
        path = self._path(unit, ".json")
        try:
            with open(path, "rb") as handle:
                summary = decode_result(handle.read())
        except FileNotFoundError:
            return None
        if not isinstance(summary, UnitDone) or not os.path.isfile(path.removesuffix(".json") + ".stage"):
            return None
        return summary

    def drop(self, unit: int) -> None:
        """Forget ``unit``: its summary goes first (it is no longer complete), then its stage file."""
        staged = self._cache.pop(unit, None)
        self._mapped -= staged.nbytes if staged is not None else 0
        for suffix in (".json", ".stage"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._path(unit, suffix))


# ------------------------------------------------------------------ the stage file
#   MAGIC | uint64 header length | header JSON | pad to 64 | sections, each aligned to 64
# header: sources, lengths, truncated (cut tokens, or -1 when not truncated), media (per sample:
# [kind, visual_kind, size, patches (offset, rows[, shard]), audio (offset, clips, frames), lengths offset,
# stored frames (shard or None for this file, [(offset, size)])]),
# the offsets of the concatenated input_ids and loss_mask sections, and the source shards that
# patches with a third field (a PatchSpan: offset into that shard) refer to.


def _stage_buffers(samples: Sequence[TokenizedSample], spans: Spans | None = None) -> list[Any]:
    sections: list[Any] = []
    offset = 0

    def place(buffer: Any) -> int:
        nonlocal offset
        at = offset
        sections.append(buffer)
        size = memoryview(buffer).nbytes
        pad = -size % ALIGN
        if pad:
            sections.append(b"\0" * pad)
        offset += size + pad
        return at

    ids = place(np.concatenate([s.input_ids for s in samples]).astype("<i4", copy=False) if samples else b"")
    mask = place(np.concatenate([s.loss_mask for s in samples]).astype("u1", copy=False) if samples else b"")
    shards: dict[str, int] = {}
    all_spans = spans if spans is not None else [(None,) * len(s.media) for s in samples]
    media = [
        [_place_item(item, place, span, shards) for item, span in zip(s.media, item_spans, strict=True)]
        for s, item_spans in zip(samples, all_spans, strict=True)
    ]
    header = {
        "sources": [s.source for s in samples],
        "lengths": [s.length for s in samples],
        "truncated": [s.truncated_tokens if s.truncated else -1 for s in samples],
        "media": media,
        "ids": ids,
        "mask": mask,
        "shards": list(shards),
    }
    head = _dump_header(header)
    lead = MAGIC + struct.pack("<Q", len(head)) + head
    return [lead + b"\0" * (-len(lead) % ALIGN), *sections]


def _dump_header(header: dict[str, Any]) -> bytes:
    """The header as JSON: orjson, or ``json`` with escapes for what orjson refuses (a source that
    holds a lone surrogate, from an undecodable file name)."""
    try:
        return orjson.dumps(header)
    except TypeError:  # orjson.JSONEncodeError
        return json.dumps(header, separators=(",", ":")).encode("ascii")


def _load_header(head: bytes) -> dict[str, Any]:
    try:
        return orjson.loads(head)  # type: ignore[no-any-return]
    except orjson.JSONDecodeError:  # the json fallback's escaped lone surrogates
        return json.loads(head)  # type: ignore[no-any-return]


def _place_item(item: MediaItem, place: Any, span: MediaSpan | None, shards: dict[str, int]) -> list[Any]:
    patches: list[int] | None = None
    stored: list[Any] | None = None
    audio = lengths = None
    if isinstance(span, FrameSpans):
        stored = [shards.setdefault(span.shard, len(shards)), [list(member) for member in span.members]]
    elif item.stored_frames:
        stored = [None, [[place(data), memoryview(data).nbytes] for data in item.stored_frames]]
    elif span is not None:
        patches = [span.offset, span.rows, shards.setdefault(span.shard, len(shards))]
    elif item.patches is not None:
        rows = int(item.patches.shape[0])
        patches = [place(np.ascontiguousarray(item.patches, dtype=np.uint8)), rows]
    if item.audio_features is not None:
        clips, frames = int(item.audio_features.shape[0]), int(item.audio_features.shape[1])
        audio = [place(np.ascontiguousarray(item.audio_features, dtype="<f2")), clips, frames]
    if item.audio_lengths is not None:
        lengths = place(np.ascontiguousarray(item.audio_lengths, dtype="<i4"))
    size = list(item.size) if item.size is not None else None
    return [item.kind, item.visual_kind, size, patches, audio, lengths, stored]


def map_file(path: str) -> mmap.mmap:
    """``path`` mapped read-only."""
    with open(path, "rb") as handle:
        return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)


def _write_atomic(path: str, buffers: list[Any]) -> None:
    """Write ``buffers`` in order to ``path`` through a temp file and a rename."""
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as handle:
            for buffer in buffers:
                handle.write(memoryview(buffer).cast("B"))
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    os.replace(tmp, path)


class StagedUnit(Sequence[TokenizedSample]):
    """A stage file's samples, each built when it is asked for: a shard writer takes a few samples
    from each of many units, so no read builds every sample of a unit (thousands, for text). The
    header is parsed once; arrays are views of the mapping."""

    def __init__(self, path: str) -> None:
        self._mapped = map_file(path)
        if self._mapped[: len(MAGIC)] != MAGIC:
            raise RuntimeError(f"{path}: not a cook stage file")
        (head_len,) = struct.unpack_from("<Q", self._mapped, len(MAGIC))
        start = len(MAGIC) + 8
        header = _load_header(bytes(self._mapped[start : start + head_len]))
        self._base = start + head_len + (-(start + head_len) % ALIGN)
        self._sources: list[str] = header["sources"]
        self._truncated: list[int] = header["truncated"]
        self._media: list[list[Any]] = header["media"]
        self._shards: list[str] = header["shards"]
        self._shard_maps: dict[int, mmap.mmap] = {}  # the source shards PatchSpans refer to, mapped on first use
        lengths = header["lengths"]
        self._starts = [0, *itertools.accumulate(lengths)]
        total = self._starts[-1]
        self._ids = np.frombuffer(self._mapped, dtype="<i4", count=total, offset=self._base + header["ids"])
        self._mask = np.frombuffer(self._mapped, dtype="u1", count=total, offset=self._base + header["mask"])

    def __len__(self) -> int:
        return len(self._sources)

    def take(self, positions: list[int]) -> list[TokenizedSample]:
        """``[self[p] for p in positions]`` for positions in range, built in one loop."""
        ids, mask, starts, sources, cuts, media = (
            self._ids, self._mask, self._starts, self._sources, self._truncated, self._media
        )  # fmt: skip
        sample, read = TokenizedSample, self._read_item
        out = []
        for p in positions:
            a, b, cut, items = starts[p], starts[p + 1], cuts[p], media[p]
            visuals = tuple(read(item) for item in items) if items else ()
            out.append(sample(sources[p], ids[a:b], mask[a:b], visuals, 0, cut >= 0, cut if cut > 0 else 0))
        return out

    @property
    def nbytes(self) -> int:
        return len(self._mapped)

    @overload
    def __getitem__(self, index: int) -> TokenizedSample: ...
    @overload
    def __getitem__(self, index: slice) -> list[TokenizedSample]: ...
    def __getitem__(self, index: int | slice) -> TokenizedSample | list[TokenizedSample]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if not -len(self) <= index < len(self):
            raise IndexError(f"staged unit has {len(self)} samples, not {index}")
        return self.take([index % len(self)])[0]

    def _read_item(self, item: list[Any]) -> MediaItem:
        """A staged media item; its arrays are views of the stage file or, for a ``PatchSpan``, of the
        source shard."""
        kind, visual_kind, size, patches, audio, lengths, frames = item
        mapped, base = self._mapped, self._base
        pixel = features = clip_lengths = None
        stored: tuple[memoryview, ...] = ()
        if frames is not None:
            source, members = frames
            view, at = (memoryview(mapped), base) if source is None else (memoryview(self._shard_map(source)), 0)
            stored = tuple(view[at + offset : at + offset + nbytes] for offset, nbytes in members)
        if patches is not None:
            offset, rows, *shard = patches
            where = (self._shard_map(shard[0]), offset) if shard else (mapped, base + offset)
            pixel = np.frombuffer(where[0], np.uint8, rows * fmt.PATCH_VALUES, where[1]).reshape(rows, fmt.PATCH_VALUES)
        if audio is not None:
            offset, clips, frames = audio
            count = clips * frames * fmt.MEL_BINS
            features = np.frombuffer(mapped, "<f2", count, base + offset).reshape(clips, frames, fmt.MEL_BINS)
            clip_lengths = np.frombuffer(mapped, "<i4", clips, base + lengths)
        return MediaItem(
            kind=kind,
            blocks=(),
            patches=pixel,
            size=tuple(size) if size is not None else None,
            visual_kind=visual_kind,
            audio_features=features,
            audio_lengths=clip_lengths,
            stored_frames=stored,
        )

    def _shard_map(self, shard: int) -> mmap.mmap:
        if shard not in self._shard_maps:
            self._shard_maps[shard] = map_file(self._shards[shard])
        return self._shard_maps[shard]
