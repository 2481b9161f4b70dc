"""A cooked dataset -> ``DatasetStats`` -> ``StatsSummary`` (``cook stats``): packing efficiency, stored fill,
pack fill, sequence lengths, sources per pack, media-token share, truncation, reject reasons and (given a global
batch size) steps per epoch.

    compute_stats(DIR) -> DatasetStats -summarize(stats, global_batch_size)-> StatsSummary -.to_dict()-> --json

``StatsSummary`` and its parts live in ``cook.dataset_stats`` (L0), so that the HTML page
(``cook.view.stats_page``) reads them without importing ``cook.validate``.

Only the small members are read (cu_seqlens*, meta.json, media_sizes, audio_lengths); the large ones
(input_ids, loss_mask, pixel_patches, audio_features, stored frames) are seeked over, their sizes taken
from their tar headers: the stored bytes of each medium (``StoredBytes``) need no large member read.
Media tokens are the embeddings that ``media_sizes``/``audio_lengths`` imply, which ``cook validate``
proves equal to the ``<image>``/``<so_embedding>`` placeholders, so no tokenizer is needed; they are counted
as image (images and tiles), video and audio, by each row's kind in meta.json.
A pack whose small members are damaged raises ``PackUnreadable`` (``cook stats`` exits 1 on one line).
``seq_len``, the records read, the truncation counts and the target tokens come from the manifest
(``cook.manifest.load_manifest``; an unreadable one raises ``ManifestError``).

    fill of a pack        = T / seq_len                  (padding included)
    packing efficiency    = tokens / (packs × seq_len)   (cook.dataset_stats.packing_efficiency, as in the manifest)
    stored fill           = tokens / stored tokens (ΣT)  (cook.dataset_stats.stored_fill, as in the manifest)
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from cook import format as fmt
from cook.dataset_stats import (
    Distribution,
    Histogram,
    MediaTokens,
    StatsSummary,
    StepsPerEpoch,
    StoredBytes,
    packing_efficiency,
    stored_fill,
)
from cook.frames import frame_media, frame_sizes
from cook.manifest import load_manifest
from cook.packfiles import (
    FRAME_MEMBERS,
    VISUAL_KINDS,
    PackUnreadable,
    RawPack,
    clip_tokens,
    iter_packs,
    visual_embeddings,
)
from cook.validate.members import SequenceColumns, load_member, meta_entries, sequence_columns
from cook.validate.problems import Finding
from cook.validate.rejects import read_rejects

READ_ONLY: Final = frozenset({fmt.INPUT_IDS, fmt.LOSS_MASK, fmt.PIXEL_PATCHES, fmt.AUDIO_FEATURES, FRAME_MEMBERS})
FILL_BINS: Final = 10
LENGTH_BINS: Final = 16


@dataclass
class DatasetStats:
    """What ``compute_stats`` gathers: per-pack figures from the shards, the rest from the manifest."""

    seq_len: int
    counts: fmt.Counts  # the manifest's
    pack_tokens: list[int] = field(default_factory=list)  # T of each pack
    true_tokens: list[int] = field(default_factory=list)  # cu_seqlens[-1] of each pack
    sources_per_pack: list[int] = field(default_factory=list)
    seq_lengths: list[int] = field(default_factory=list)
    image_tokens: int = 0  # images and tiles
    video_tokens: int = 0
    audio_tokens: int = 0
    stored_bytes: Counter[str] = field(default_factory=Counter)  # medium (dataset_stats.STORED_MEDIA) -> bytes
    rejects: Counter[str] = field(default_factory=Counter)


class RejectsUnreadable(Exception):
    """A line of ``rejects.jsonl`` that ``cook.validate.rejects.read_rejects`` refuses (the line, and why)."""


def _small_array(raw: RawPack, name: str) -> np.ndarray | None:
    """Member ``name`` parsed and of its schema dtype and rank (None when the pack has none); raises
    ``PackUnreadable`` naming the pack when it cannot be read."""
    if name not in raw.members:
        return None
    findings: list[Finding] = []
    array = load_member(name, raw.members[name], *fmt.MEMBER_DTYPES[name], findings)
    if findings:  # cook validate's member rule, so stats reads only what validate would pass
        raise PackUnreadable(f"{raw.key}: {findings[0][1]}")
    return array


def _pack_figures(raw: RawPack) -> tuple[np.ndarray, np.ndarray, SequenceColumns]:
    """cu_seqlens, cu_seqlens_padded and meta.json's sequences of one pack, checked to agree in length
    (``cook.validate.members.sequence_columns``); raises ``PackUnreadable`` naming the pack."""
    cu, padded_cu = _small_array(raw, fmt.CU_SEQLENS), _small_array(raw, fmt.CU_SEQLENS_PADDED)
    if fmt.META not in raw.members:
        raise PackUnreadable(f"{raw.key}: {fmt.META} is missing")
    findings: list[Finding] = []
    frames = bool(fmt.frame_names(raw.members) or fmt.frame_names(raw.skipped))  # skipped: not read, still there
    entries = meta_entries(raw.members[fmt.META], frames, findings)
    if entries is None:
        raise PackUnreadable(f"{raw.key}: {findings[0][1]}")
    columns = sequence_columns(entries)
    if cu is None or padded_cu is None or not len(cu) == len(padded_cu) == len(columns.sources) + 1:
        raise PackUnreadable(f"{raw.key}: cu_seqlens and cu_seqlens_padded must hold len(sequences) + 1 entries")
    return cu, padded_cu, columns


def _pack_media_tokens(raw: RawPack, media: list[list[str]]) -> tuple[int, int, int]:
    """(image, video, audio) tokens that the pack's media rows imply; tiles count as image."""
    visual = [kind for kinds in media for kind in kinds if kind in VISUAL_KINDS]
    image = video = 0
    sizes = _small_array(raw, fmt.MEDIA_SIZES)
    if sizes is not None:
        for kind, row in zip(visual, sizes.tolist(), strict=False):
            tokens = visual_embeddings(kind, *row)
            video += tokens if kind == "video" else 0
            image += 0 if kind == "video" else tokens
    lengths = _small_array(raw, fmt.AUDIO_LENGTHS)
    return image, video, int(clip_tokens(lengths).sum()) if lengths is not None else 0


_AUDIO_MEMBERS: Final = frozenset(fmt.AUDIO_MEMBERS)


def _pack_stored_bytes(raw: RawPack, media: list[list[str]]) -> Counter[str]:
    """Member bytes of one pack by the medium they hold (``StoredBytes``); raises ``PackUnreadable``."""
    sizes = {name: len(data) for name, data in raw.members.items()} | raw.skipped
    out: Counter[str] = Counter()
    frames = fmt.frame_names(sizes)
    media_sizes = _small_array(raw, fmt.MEDIA_SIZES)
    if media_sizes is not None and (frames or fmt.PIXEL_PATCHES in sizes):
        try:
            kinds = frame_media(media_sizes, [kind for kinds in media for kind in kinds])
        except ValueError as err:
            raise PackUnreadable(f"{raw.key}: {fmt.META} media and {fmt.MEDIA_SIZES}: {err}") from None
        if frames:
            if len(frames) != len(kinds):
                raise PackUnreadable(f"{raw.key}: {len(frames)} frame members, {fmt.MEDIA_SIZES} lists {len(kinds)}")
            for medium, (_, name, _) in zip(kinds, frames, strict=True):
                out[medium] += sizes.pop(name)
        else:
            rows = [fmt.frame_patches(h, w) * fmt.PATCH_VALUES for h, w in frame_sizes(media_sizes)]
            for medium, size in zip(kinds, rows, strict=True):
                out[medium] += size
            sizes[fmt.PIXEL_PATCHES] -= sum(rows)  # its .npy header stays with the text
    out["audio"] += sum(size for name, size in sizes.items() if name in _AUDIO_MEMBERS)
    out["text"] += sum(size for name, size in sizes.items() if name not in _AUDIO_MEMBERS)
    return out


def compute_stats(root: str) -> DatasetStats:
    """Stream every pack's small members once, then count ``rejects.jsonl``'s reasons. A pack its small
    members do not describe raises ``PackUnreadable``, a bad rejects line ``RejectsUnreadable``."""
    manifest = load_manifest(root)
    stats = DatasetStats(seq_len=manifest.seq_len, counts=manifest.counts)
    for _, raw in iter_packs(root, skip=READ_ONLY):
        cu, padded_cu, columns = _pack_figures(raw)
        stats.pack_tokens.append(int(padded_cu[-1]))
        stats.true_tokens.append(int(cu[-1]))
        stats.sources_per_pack.append(len(columns.sources))
        stats.seq_lengths.extend(np.diff(cu).tolist())
        image, video, audio = _pack_media_tokens(raw, columns.media)
        stats.image_tokens += image
        stats.video_tokens += video
        stats.audio_tokens += audio
        stats.stored_bytes += _pack_stored_bytes(raw, columns.media)
    rejects = read_rejects(root, max_problems=1)
    if rejects.lines is not None and rejects.problems:  # no rejects.jsonl: nothing rejected to count
        raise RejectsUnreadable(rejects.problems[0].detail)
    stats.rejects.update(rejects.by_reason)
    return stats


def distribution(values: list[int] | list[float], edges: np.ndarray) -> Distribution:
    """The figures of ``values`` and their histogram over ``edges``."""
    array = np.asarray(values, dtype=np.float64)
    bins, _ = np.histogram(array, bins=edges)
    counts = Histogram(edges=tuple(round(float(e), 6) for e in edges), counts=tuple(bins.tolist()))
    if not values:
        return Distribution(min=0, median=0, p90=0, max=0, mean=0, histogram=counts)
    return Distribution(
        min=float(array.min()),
        median=float(np.median(array)),
        p90=float(np.percentile(array, 90)),
        max=float(array.max()),
        mean=float(array.mean()),
        histogram=counts,
    )


def _epoch_steps(packs: int, target_tokens: int, global_batch_size: int) -> StepsPerEpoch:
    """Full steps of ``global_batch_size`` packs in ``packs``, and the mean target tokens in one."""
    return StepsPerEpoch(
        global_batch_size=global_batch_size,
        steps_per_epoch=packs // global_batch_size,
        target_tokens_per_step=round(target_tokens * global_batch_size / packs) if packs else 0,
    )


def _stored_bytes(stats: DatasetStats, tokens: int) -> StoredBytes:
    stored = stats.stored_bytes
    text_tokens = tokens - stats.image_tokens - stats.video_tokens - stats.audio_tokens

    def per_token(medium: str, count: int) -> float:
        return stored[medium] / count if count > 0 else 0.0

    return StoredBytes(
        image=stored["image"],
        video=stored["video"],
        audio=stored["audio"],
        text=stored["text"],
        image_per_token=per_token("image", stats.image_tokens),
        video_per_token=per_token("video", stats.video_tokens),
        audio_per_token=per_token("audio", stats.audio_tokens),
        text_per_token=per_token("text", text_tokens),
    )


def summarize(stats: DatasetStats, global_batch_size: int | None = None) -> StatsSummary:
    """The ``cook stats`` figures; ``global_batch_size`` (>= 1) adds the steps per epoch."""
    packs, tokens, padded = len(stats.pack_tokens), sum(stats.true_tokens), sum(stats.pack_tokens)
    capacity = stats.seq_len or max(stats.pack_tokens, default=1)
    fills = [t / capacity for t in stats.pack_tokens]
    most = max(stats.sources_per_pack, default=1)
    width = -(-most // LENGTH_BINS)  # integer-wide bins centred on whole source counts
    counts = stats.counts
    return StatsSummary(
        packs=packs,
        sources=len(stats.seq_lengths),
        seq_len=stats.seq_len,
        records_in=counts.records_in,
        tokens=tokens,
        padded_tokens=padded,
        padding_tokens=padded - tokens,
        packing_efficiency=packing_efficiency(tokens, packs, capacity),
        stored_fill=stored_fill(tokens, padded),
        fill=distribution(fills, np.linspace(0.0, 1.0, FILL_BINS + 1)),
        sequence_length=distribution(stats.seq_lengths, np.linspace(0, capacity, LENGTH_BINS + 1)),
        sources_per_pack=distribution(stats.sources_per_pack, np.arange(0.5, most + width + 0.5, width)),
        media_tokens=MediaTokens(
            image=stats.image_tokens,
            video=stats.video_tokens,
            audio=stats.audio_tokens,
            image_share=stats.image_tokens / tokens if tokens else 0.0,
            video_share=stats.video_tokens / tokens if tokens else 0.0,
            audio_share=stats.audio_tokens / tokens if tokens else 0.0,
        ),
        stored_bytes=_stored_bytes(stats, tokens),
        rejects=dict(sorted(stats.rejects.items(), key=lambda item: (-item[1], item[0]))),
        truncated_sequences=counts.truncated_sequences,
        truncated_tokens=counts.truncated_tokens,
        steps=None if global_batch_size is None else _epoch_steps(packs, counts.target_tokens, global_batch_size),
    )
