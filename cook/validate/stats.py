"""A cooked dataset -> ``DatasetStats`` -> ``StatsSummary`` (``cook stats``): packing efficiency, pack fill,
sequence lengths, sources per pack, media-token share, truncation, reject reasons and (given a global
batch size) steps per epoch.

    compute_stats(DIR) -> DatasetStats -summarize(stats, global_batch_size)-> StatsSummary -.to_dict()-> --json

``StatsSummary`` and its parts live in ``cook.dataset_stats`` (L0), so that the HTML page
(``cook.view.stats_page``) reads them without importing ``cook.validate``.

Only the small members are read (cu_seqlens*, meta.json, media_sizes, audio_lengths); the large ones
are seeked over. Media tokens are the embeddings that ``media_sizes``/``audio_lengths`` imply, which
``cook validate`` proves equal to the ``<image>``/``<so_embedding>`` placeholders, so no tokenizer is needed.
``seq_len``, the records read, the truncation counts and the target tokens come from the manifest
(``cook.manifest.load_manifest``; an unreadable one raises ``ManifestError``).

    fill of a pack        = T / seq_len                        (padding included)
    packing efficiency    = true tokens / (packs * seq_len)    (as in the manifest)
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from cook import format as fmt
from cook.dataset_stats import Distribution, Histogram, MediaTokens, StatsSummary, StepsPerEpoch
from cook.manifest import load_manifest
from cook.packfiles import VISUAL_KINDS, MemberData, clip_tokens, iter_packs, read_npy, visual_embeddings

READ_ONLY: Final = frozenset({fmt.INPUT_IDS, fmt.LOSS_MASK, fmt.PIXEL_PATCHES, fmt.AUDIO_FEATURES})
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
    image_tokens: int = 0
    audio_tokens: int = 0
    rejects: Counter[str] = field(default_factory=Counter)


def _pack_media_tokens(members: dict[str, MemberData], media: list[str]) -> tuple[int, int]:
    visual = [kind for kind in media if kind in VISUAL_KINDS]
    image = audio = 0
    if fmt.MEDIA_SIZES in members:
        sizes = read_npy(members[fmt.MEDIA_SIZES]).tolist()
        image = sum(visual_embeddings(k, *row) for k, row in zip(visual, sizes, strict=False))
    if fmt.AUDIO_LENGTHS in members:
        audio = int(clip_tokens(read_npy(members[fmt.AUDIO_LENGTHS])).sum())
    return image, audio


def compute_stats(root: str) -> DatasetStats:
    """Stream every pack's small members once."""
    manifest = load_manifest(root)
    stats = DatasetStats(seq_len=manifest.seq_len, counts=manifest.counts)
    for _, raw in iter_packs(root, skip=READ_ONLY):
        cu = read_npy(raw.members[fmt.CU_SEQLENS])
        padded_cu = read_npy(raw.members[fmt.CU_SEQLENS_PADDED])
        sequences = json.loads(bytes(raw.members[fmt.META]))["sequences"]
        stats.pack_tokens.append(int(padded_cu[-1]))
        stats.true_tokens.append(int(cu[-1]))
        stats.sources_per_pack.append(len(sequences))
        stats.seq_lengths.extend(np.diff(cu).tolist())
        image, audio = _pack_media_tokens(raw.members, [k for s in sequences for k in s["media"]])
        stats.image_tokens += image
        stats.audio_tokens += audio
    rejects = os.path.join(root, fmt.REJECTS_NAME)
    if os.path.isfile(rejects):
        with open(rejects, encoding="utf-8") as handle:
            stats.rejects.update(json.loads(line)["reason"] for line in handle if line.strip())
    return stats


def histogram(values: list[int] | list[float], edges: np.ndarray) -> Histogram:
    counts, _ = np.histogram(np.asarray(values, dtype=np.float64), bins=edges)
    return Histogram(edges=tuple(round(float(e), 6) for e in edges), counts=tuple(counts.tolist()))


def distribution(values: list[int] | list[float], edges: np.ndarray) -> Distribution:
    """The figures of ``values`` and their histogram over ``edges``."""
    counts = histogram(values, edges)
    if not values:
        return Distribution(min=0, median=0, p90=0, max=0, mean=0, histogram=counts)
    array = np.asarray(values, dtype=np.float64)
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
        packing_efficiency=tokens / (packs * capacity) if packs else 0.0,
        fill=distribution(fills, np.linspace(0.0, 1.0, FILL_BINS + 1)),
        sequence_length=distribution(stats.seq_lengths, np.linspace(0, capacity, LENGTH_BINS + 1)),
        sources_per_pack=distribution(stats.sources_per_pack, np.arange(0.5, most + width + 0.5, width)),
        media_tokens=MediaTokens(
            image=stats.image_tokens,
            audio=stats.audio_tokens,
            image_share=stats.image_tokens / tokens if tokens else 0.0,
            audio_share=stats.audio_tokens / tokens if tokens else 0.0,
        ),
        rejects=dict(sorted(stats.rejects.items(), key=lambda item: (-item[1], item[0]))),
        truncated_sequences=counts.truncated_sequences,
        truncated_tokens=counts.truncated_tokens,
        steps=None if global_batch_size is None else _epoch_steps(packs, counts.target_tokens, global_batch_size),
    )
