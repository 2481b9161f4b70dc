"""A repack unit's cooked sequences read back out of their packs (``cook repack``, on a worker):

    Unit with SequenceReads -read_sequences-> [TokenizedSample] + [PatchSpan] -fit_sample-> UnitSummary
        + staged samples (their patches staged as PatchSpans: references into the source shards)

For each pack the unit touches, the member headers are read from the pack's offset in the shard
(``.tar.idx``; ``packfiles.pack_member_spans``), then its small members (ids, mask, boundaries,
meta.json, media sizes, audio lengths), and of ``pixel_patches`` only the rows of the unit's own
items, all as views of the mapped shard: a sequence's bytes are copied once, by the shard writer,
from the page cache (where the executor stages samples on disk, the stage file holds the ids and
masks and, for the patch rows, only where they lie in the source shard: ``PatchSpan``), and a
pack whose sequences several units take costs each of them little more than its meta.json. It is cut into sequences
(SPEC §8 members):

    ids, mask   input_ids[s : s + L], loss_mask[s : s + L] for s = cu_seqlens_padded[i], L = the length;
                the writer zeroes each sequence's first mask entry, so it is restored from meta.json's
                ``targets`` (the targets counted before that)
    visual      each of the sequence's image / video / tiles items takes the next media_sizes row
                (frames, H, W) and the next frames * (H/16) * (W/16) rows of pixel_patches
    audio       each audio item is one run of ``<so_embedding>`` tokens; it takes the next clips of
                audio_lengths until their tokens make the run, and their features cut to the longest
                clip's frames (what the cook made: the pack pads every clip to its longest)

so a sequence moves with exactly the arrays it was cooked with, and a pack built from it again is
byte-identical. Nothing is decoded or tokenized.
"""

from __future__ import annotations

import mmap
from collections.abc import Mapping

import numpy as np
import orjson

from cook import format as fmt
from cook.config import PackingConfig
from cook.packfiles import clip_tokens, pack_member_spans, read_npy
from cook.packing.packer import fit_sample
from cook.runner.reject_log import RejectLog
from cook.runner.staging import FrameSpans, MediaSpan, PatchSpan, map_file
from cook.runner.units import SequenceReads, Unit, UnitSummary
from cook.types import MediaItem, TokenizedSample

MEDIA_END_TOKENS = (fmt.IMG_END, fmt.AUDIO_END)  # a sequence's media end just past the last of these


ItemSpans = tuple[MediaSpan | None, ...]  # per media item of a sequence: where its patch rows or frames lie


def read_sequences(
    reads: SequenceReads, control_ids: Mapping[str, int]
) -> tuple[list[TokenizedSample], list[ItemSpans]]:
    """The sequences of ``reads``, in its order, and where each one's patch rows lie."""
    out: list[tuple[TokenizedSample, ItemSpans] | None] = [None] * len(reads)
    keys = reads.shard.astype(np.int64) * (1 << 40) + reads.offset  # int64 [N], one per pack
    packs, where = np.unique(keys, return_inverse=True)
    mapped: dict[int, mmap.mmap] = {}
    for k, key in enumerate(packs.tolist()):
        shard, offset = divmod(key, 1 << 40)
        at = np.flatnonzero(where == k)  # int64 [m] the unit's sequences in this pack
        positions = reads.seq[at].tolist()
        if shard not in mapped:
            mapped[shard] = map_file(reads.shards[shard])
        pack = _PackFile(reads.shards[shard], mapped[shard], offset)
        samples = _cut_pack(pack, control_ids, set(positions))
        for i, position in zip(at.tolist(), positions, strict=True):
            out[i] = samples[position]
    filled: list[tuple[TokenizedSample, ItemSpans]] = out  # type: ignore[assignment]  # every slot was filled
    return [sample for sample, _ in filled], [spans for _, spans in filled]


class _PackFile:
    """One pack in its (mapped) shard: members and ``pixel_patches`` rows as views."""

    def __init__(self, shard_path: str, mapped: mmap.mmap, offset: int) -> None:
        self.spans = pack_member_spans(shard_path, offset)
        self.path, self.mapped = shard_path, mapped

    def bytes(self, name: str) -> memoryview:
        offset, size = self.spans[name]
        return memoryview(self.mapped)[offset : offset + size]

    def array(self, name: str) -> np.ndarray:
        """The member's array, a read-only view of the mapped shard (nothing is read until it is used)."""
        return read_npy(self.bytes(name))

    def patch_rows(self, first: int, rows: int) -> tuple[PatchSpan, np.ndarray]:
        """Where rows ``first ..`` of ``pixel_patches`` lie in the shard, and those rows (uint8 [rows, 768]):
        a read-only view of the mapped shard (the writer copies it once, from the page cache into the new shard)."""
        offset, size = self.spans[fmt.PIXEL_PATCHES]
        head = self.mapped[offset : offset + 12]
        start = 10 + head[8] + (head[9] << 8) if head[6] == 1 else 12 + int.from_bytes(head[8:12], "little")
        if start + (first + rows) * fmt.PATCH_VALUES > size:
            raise RuntimeError(f"pixel_patches holds fewer than {first + rows} rows")
        at = offset + start + first * fmt.PATCH_VALUES
        view = np.frombuffer(self.mapped, np.uint8, rows * fmt.PATCH_VALUES, at)
        return PatchSpan(self.path, at, rows), view.reshape(rows, fmt.PATCH_VALUES)


def _cut_pack(
    pack: _PackFile, control_ids: Mapping[str, int], wanted: set[int]
) -> dict[int, tuple[TokenizedSample, ItemSpans]]:
    """The ``wanted`` sequences of one pack as the ``TokenizedSample``s it was packed from."""
    ids = pack.array(fmt.INPUT_IDS)  # int32 [T]
    mask = pack.array(fmt.LOSS_MASK)  # uint8 [T]
    cu = pack.array(fmt.CU_SEQLENS).tolist()
    starts = pack.array(fmt.CU_SEQLENS_PADDED).tolist()
    sequences = orjson.loads(pack.bytes(fmt.META))["sequences"]
    media = _MediaCursor(pack, control_ids.get(fmt.AUDIO_TOKEN))
    ends = [control_ids[t] for t in MEDIA_END_TOKENS if t in control_ids]
    samples = {}
    for i, entry in enumerate(sequences):
        a, length = starts[i], cu[i + 1] - cu[i]
        seq_ids = ids[a : a + length]
        items, spans = media.take(entry["media"], seq_ids, i in wanted)
        if i not in wanted:
            continue
        seq_mask = mask[a : a + length]
        first = entry["targets"] - int(seq_mask[1:].sum())  # the mask entry the writer zeroed
        if length and first != seq_mask[0]:
            seq_mask = seq_mask.copy()
            seq_mask[0] = first
        media_end = 0
        if items:
            hits = np.flatnonzero(np.isin(seq_ids, ends))
            media_end = int(hits[-1]) + 1 if hits.size else 0
        truncated = bool(entry.get(fmt.SEQUENCE_TRUNCATED_KEY, False))
        samples[i] = TokenizedSample(entry["source"], seq_ids, seq_mask, items, media_end, truncated, 0), spans
    return samples


class _MediaCursor:
    """Walks a pack's media item by item, in placeholder order; reads the arrays of wanted items only."""

    def __init__(self, pack: _PackFile, audio_id: int | None) -> None:
        self.pack = pack
        self.sizes = pack.array(fmt.MEDIA_SIZES) if fmt.MEDIA_SIZES in pack.spans else None  # int32 [M, 3]
        self.lengths = pack.array(fmt.AUDIO_LENGTHS) if fmt.AUDIO_LENGTHS in pack.spans else None  # int32 [C]
        self.features: np.ndarray | None = None  # float16 [C, F, 128], read when an audio item is wanted
        self.tokens = clip_tokens(self.lengths).tolist() if self.lengths is not None else []
        self.audio_id = audio_id
        self.frame_names = [name for _, name, _ in fmt.frame_names(pack.spans)]
        self.row = self.patch = self.clip = self.frame = 0

    def take(self, labels: list[str], seq_ids: np.ndarray, wanted: bool) -> tuple[tuple[MediaItem, ...], ItemSpans]:
        """The sequence's media items and where each one's patch rows lie (None for audio)."""
        if not labels:
            return (), ()
        runs = self._audio_runs(seq_ids) if "audio" in labels else []
        items: list[MediaItem] = []
        spans: list[MediaSpan | None] = []
        for label in labels:
            item, span = (self._audio(runs.pop(0), wanted), None) if label == "audio" else self._visual(label, wanted)
            items.append(item)
            spans.append(span)
        return tuple(items), tuple(spans)

    def _visual(self, label: str, wanted: bool) -> tuple[MediaItem, MediaSpan | None]:
        assert self.sizes is not None, "meta.json lists a visual item"
        frames, height, width = (int(v) for v in self.sizes[self.row])
        kind = "video" if label == "video" else "image"
        size = (frames, height, width)
        self.row += 1
        if self.frame_names:  # png/jpeg storage: the item's frame members move as they are
            names = self.frame_names[self.frame : self.frame + frames]
            self.frame += frames
            if not wanted:
                return MediaItem(kind, (), None, size, label), None  # type: ignore[arg-type]
            if len(names) < frames:
                raise RuntimeError(f"the pack holds fewer than {self.frame} frame members")
            spans = FrameSpans(self.pack.path, tuple(self.pack.spans[name] for name in names))
            stored = tuple(self.pack.bytes(name) for name in names)
            return MediaItem(kind, (), None, size, label, stored_frames=stored), spans  # type: ignore[arg-type]
        rows = frames * fmt.frame_patches(height, width)
        span, patches = self.pack.patch_rows(self.patch, rows) if wanted else (None, None)
        self.patch += rows
        return MediaItem(kind, (), patches, size, label, None, None), span  # type: ignore[arg-type]

    def _audio(self, tokens: int, wanted: bool) -> MediaItem:
        assert self.lengths is not None, "meta.json lists an audio item"
        first = self.clip
        taken = 0
        while taken < tokens:
            taken += self.tokens[self.clip]
            self.clip += 1
        lengths = self.lengths[first : self.clip]
        features = None
        if wanted:
            if self.features is None:
                self.features = self.pack.array(fmt.AUDIO_FEATURES)
            features = self.features[first : self.clip, : int(lengths.max())]
        return MediaItem("audio", (), audio_features=features, audio_lengths=lengths)

    def _audio_runs(self, seq_ids: np.ndarray) -> list[int]:
        """Tokens of each run of ``<so_embedding>`` in the sequence (one run per audio item)."""
        at = np.flatnonzero(seq_ids == self.audio_id)
        if not at.size:
            return []
        breaks = np.flatnonzero(np.diff(at) != 1)
        runs: list[int] = np.diff(np.r_[0, breaks + 1, at.size]).tolist()
        return runs


def repack_unit(
    unit: Unit, packing: PackingConfig, control_ids: Mapping[str, int]
) -> tuple[UnitSummary, list[TokenizedSample], list[ItemSpans]]:
    """A repack unit's sequences fitted to ``packing`` (``fit_sample``: a sequence longer than the new
    ``seq_len`` is truncated where ``packing.overflow`` and its media allow, else rejected ``too_long``),
    and where each kept one's patch rows lie (a fitted sample keeps its media items); every sequence
    read ends up once in the samples or in the rejects."""
    assert unit.reads is not None, "a repack unit"
    rejects = RejectLog()
    samples: list[TokenizedSample] = []
    kept: list[ItemSpans] = []
    for sample, spans in zip(*read_sequences(unit.reads, control_ids), strict=True):
        with rejects.catch(sample.source):
            samples.append(fit_sample(sample, packing))
            kept.append(spans)
    return UnitSummary.of(unit.index, len(unit.reads), rejects.records, samples), samples, kept
