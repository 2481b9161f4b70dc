"""The staging sample store: a unit's cooked samples wait here until their packs are written.

    put(unit, samples, summary)  ->  get(unit) -> [TokenizedSample]  ->  drop(unit)

``MemoryStore`` keeps them in the process (in-process runs with windows). ``DiskStore`` writes one
file per unit under ``<output>/.cook-progress/stage/`` (Ray runs, where the shard writer may be
another process or node, and ``buffer_size: all``, where pass 1 stages the whole dataset): the
arrays go to the file beside their own buffers (``os.writev``, no concatenation of media) and come
back as views of a read-only ``mmap``, so a shard writer copies each byte once, into the tar.

A stage file is written under a temporary name and renamed; its small summary sidecar (the
``UnitSummary``: lengths, patch counts, rejects) is renamed after it, so a present sidecar means a
complete unit, which a resumed run reuses instead of cooking it again. Staging is scratch: it is
not fsynced (a process kill keeps it; a lost machine loses only work that is redone).
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import struct
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from cook import format as fmt
from cook.runner.units import UnitSummary, decode_result, encode_result
from cook.types import MediaItem, TokenizedSample

STAGE_DIR = "stage"
MAGIC = b"COOKSTG1"
ALIGN = 64
IOV_BATCH = 512  # buffers per writev call (below Linux's IOV_MAX of 1024)


class SampleStore(Protocol):
    def put(self, summary: UnitSummary, samples: Sequence[TokenizedSample]) -> None: ...
    def get(self, unit: int) -> Sequence[TokenizedSample]: ...
    def summary(self, unit: int) -> UnitSummary | None: ...
    def drop(self, unit: int) -> None: ...


class MemoryStore:
    def __init__(self) -> None:
        self._units: dict[int, Sequence[TokenizedSample]] = {}

    def put(self, summary: UnitSummary, samples: Sequence[TokenizedSample]) -> None:
        self._units[summary.unit] = samples

    def get(self, unit: int) -> Sequence[TokenizedSample]:
        return self._units[unit]

    def summary(self, unit: int) -> UnitSummary | None:
        return None  # nothing survives the process: a resumed run cooks again

    def drop(self, unit: int) -> None:
        self._units.pop(unit, None)


def stage_dir(out_dir: str) -> str:
    return os.path.join(out_dir, fmt.PROGRESS_DIR, STAGE_DIR)


class DiskStore:
    """One ``unit-NNNNNN.stage`` (+ ``.json`` summary) per unit; reads are cached per unit."""

    def __init__(self, out_dir: str, cache_units: int = 4) -> None:
        self.dir = stage_dir(out_dir)
        self._cache: dict[int, list[TokenizedSample]] = {}
        self._cache_units = cache_units

    def _path(self, unit: int, suffix: str) -> str:
        return os.path.join(self.dir, f"unit-{unit:06d}{suffix}")

    def put(self, summary: UnitSummary, samples: Sequence[TokenizedSample]) -> None:
        os.makedirs(self.dir, exist_ok=True)
        _write_atomic(self._path(summary.unit, ".stage"), _stage_buffers(samples))
        _write_atomic(self._path(summary.unit, ".json"), [encode_result(summary)])

    def get(self, unit: int) -> Sequence[TokenizedSample]:
        if unit not in self._cache:
            if len(self._cache) >= self._cache_units:
                self._cache.pop(next(iter(self._cache)))
            self._cache[unit] = _read_stage(self._path(unit, ".stage"))
        return self._cache[unit]

    def summary(self, unit: int) -> UnitSummary | None:
        try:
            with open(self._path(unit, ".json"), "rb") as handle:
                summary = decode_result(handle.read())
        except FileNotFoundError:
            return None
        if not isinstance(summary, UnitSummary) or not os.path.isfile(self._path(unit, ".stage")):
            return None
        return summary

    def drop(self, unit: int) -> None:
        self._cache.pop(unit, None)
        for suffix in (".json", ".stage"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._path(unit, suffix))


# ------------------------------------------------------------------ the stage file
#   MAGIC | uint64 header length | header JSON | pad to 64 | sections, each aligned to 64
# header: sources, lengths, truncated (cut tokens, or -1 when not truncated), media (per sample:
# [kind, visual_kind, size, patches (offset, rows), audio (offset, clips, frames), lengths offset]),
# and the offsets of the concatenated input_ids and loss_mask sections.


def _stage_buffers(samples: Sequence[TokenizedSample]) -> list[Any]:
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
    media = [[_place_item(item, place) for item in s.media] for s in samples]
    header = {
        "sources": [s.source for s in samples],
        "lengths": [s.length for s in samples],
        "truncated": [s.truncated_tokens if s.truncated else -1 for s in samples],
        "media": media,
        "ids": ids,
        "mask": mask,
    }
    head = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    lead = MAGIC + struct.pack("<Q", len(head)) + head
    return [lead + b"\0" * (-len(lead) % ALIGN), *sections]


def _place_item(item: MediaItem, place: Any) -> list[Any]:
    patches = audio = lengths = None
    if item.patches is not None:
        rows = int(item.patches.shape[0])
        patches = [place(np.ascontiguousarray(item.patches, dtype=np.uint8)), rows]
    if item.audio_features is not None:
        clips, frames = int(item.audio_features.shape[0]), int(item.audio_features.shape[1])
        audio = [place(np.ascontiguousarray(item.audio_features, dtype="<f2")), clips, frames]
    if item.audio_lengths is not None:
        lengths = place(np.ascontiguousarray(item.audio_lengths, dtype="<i4"))
    size = list(item.size) if item.size is not None else None
    return [item.kind, item.visual_kind, size, patches, audio, lengths]


def _write_atomic(path: str, buffers: list[Any]) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        views = [memoryview(b).cast("B") for b in buffers if memoryview(b).nbytes]
        while views:
            written = os.writev(fd, views[:IOV_BATCH])
            while views and written >= views[0].nbytes:
                written -= views[0].nbytes
                views.pop(0)
            if written:
                views[0] = views[0][written:]
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)


def _read_stage(path: str) -> list[TokenizedSample]:
    with open(path, "rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    if mapped[: len(MAGIC)] != MAGIC:
        raise RuntimeError(f"{path}: not a cook stage file")
    (head_len,) = struct.unpack_from("<Q", mapped, len(MAGIC))
    start = len(MAGIC) + 8
    header = json.loads(bytes(mapped[start : start + head_len]))
    base = start + head_len + (-(start + head_len) % ALIGN)
    lengths = header["lengths"]
    total = sum(lengths)
    ids = np.frombuffer(mapped, dtype="<i4", count=total, offset=base + header["ids"])
    mask = np.frombuffer(mapped, dtype="u1", count=total, offset=base + header["mask"])
    samples, at = [], 0
    for source, length, cut, items in zip(
        header["sources"], lengths, header["truncated"], header["media"], strict=True
    ):
        media = tuple(_read_item(mapped, base, item) for item in items)
        samples.append(
            TokenizedSample(
                source,
                ids[at : at + length],
                mask[at : at + length],
                media,
                truncated=cut >= 0,
                truncated_tokens=max(cut, 0),
            )
        )
        at += length
    return samples


def _read_item(mapped: mmap.mmap, base: int, item: list[Any]) -> MediaItem:
    kind, visual_kind, size, patches, audio, lengths = item
    pixel = features = clip_lengths = None
    if patches is not None:
        offset, rows = patches
        pixel = np.frombuffer(mapped, np.uint8, rows * fmt.PATCH_VALUES, base + offset).reshape(rows, fmt.PATCH_VALUES)
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
    )
