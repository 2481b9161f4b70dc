"""``cook stats``'s figures as types: ``StatsSummary`` (built by ``cook.validate.stats.summarize``) and its
parts. ``StatsSummary.to_dict()`` is the ``cook stats --json`` object.

L0 (stdlib only): ``cook.validate`` builds it; ``cook.cli`` and ``cook.view`` read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Histogram:
    edges: tuple[float, ...]  # len(counts) + 1 bin edges
    counts: tuple[int, ...]


@dataclass(frozen=True)
class Distribution:
    """Summary figures of some values (all 0 for none) and their histogram."""

    min: float
    median: float
    p90: float
    max: float
    mean: float
    histogram: Histogram


@dataclass(frozen=True)
class MediaTokens:
    """Placeholder tokens the media rows imply: ``image`` counts images and tiles, ``video`` videos."""

    image: int
    video: int
    audio: int
    image_share: float  # of the true tokens
    video_share: float
    audio_share: float

    def line(self) -> str:
        """``image 1,024 (12.5%), video 0 (0.0%), audio 375 (4.6%)``"""
        shares = ((self.image, self.image_share), (self.video, self.video_share), (self.audio, self.audio_share))
        return ", ".join(
            f"{kind} {n:,} ({share:.1%})" for kind, (n, share) in zip(("image", "video", "audio"), shares, strict=True)
        )


@dataclass(frozen=True)
class StepsPerEpoch:
    """``--global-batch-size N``: full global batches of N packs in one pass, and the mean supervised
    tokens in one (the manifest's ``target_tokens`` per pack times N)."""

    global_batch_size: int
    steps_per_epoch: int
    target_tokens_per_step: int


@dataclass(frozen=True)
class StatsSummary:
    """The ``cook stats`` figures; ``to_dict`` is the ``--json`` object (keys in field order, ``steps``
    flattened into it when given)."""

    packs: int
    sources: int
    seq_len: int
    records_in: int
    tokens: int
    padded_tokens: int
    padding_tokens: int
    packing_efficiency: float
    fill: Distribution  # T / seq_len of each pack
    sequence_length: Distribution
    sources_per_pack: Distribution
    media_tokens: MediaTokens
    rejects: Mapping[str, int]  # most frequent first
    truncated_sequences: int
    truncated_tokens: int
    steps: StepsPerEpoch | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        steps = data.pop("steps")
        return {**data, **(steps or {})}
