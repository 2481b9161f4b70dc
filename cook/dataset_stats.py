"""``cook stats``'s figures as types: ``StatsSummary`` (built by ``cook.validate.stats.summarize``) and its
parts. ``StatsSummary.to_dict()`` is the ``cook stats --json`` object.

The two packing figures are defined here, once (docs/DESIGN.md says why), and every place that
computes or prints one goes through these functions: the packer's ``PackingStats``, the manifest,
``cook validate``, the run summary, ``cook stats`` and its HTML page::

    packing efficiency = tokens / (packs × seq_len)    packing_efficiency(tokens, packs, seq_len)
    stored fill        = tokens / stored tokens         stored_fill(tokens, stored_tokens)

``tokens`` are the real tokens, ``stored tokens`` the packs' ``T`` summed (real tokens plus
``pad_multiple`` padding). Worked example, seq_len 16384, pad_multiple 1024, one pack holding one
2,944-token sequence, stored as T = 3,072::

    packing efficiency = 2944 / (1 × 16384) = 17.97%     stored fill = 2944 / 3072 = 95.83%

L0 (stdlib only): ``cook.validate`` builds it; ``cook.cli`` and ``cook.view`` read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Final

PACKING_EFFICIENCY: Final = ("packing efficiency", "tokens / (packs × seq_len)")  # (name, rule) as printed
STORED_FILL: Final = ("stored fill", "tokens / stored tokens")


def packing_efficiency(tokens: int, packs: int, seq_len: int) -> float:
    """Real tokens over the packs' capacity: the share of the token slots a trainer that pads every pack
    to ``seq_len`` computes on that are real. 0.0 when there are no packs."""
    return tokens / (packs * seq_len) if packs else 0.0


def stored_fill(tokens: int, stored_tokens: int) -> float:
    """Real tokens over the stored tokens (each pack's ``T``): the share of what is written, and of what
    cook's reader computes on, that is not ``pad_multiple`` padding. 0.0 when nothing is stored."""
    return tokens / stored_tokens if stored_tokens else 0.0


def packing_figure_rows(efficiency: float, fill: float) -> tuple[tuple[str, str], tuple[str, str]]:
    """``(name, "value (rule)")`` of a packing efficiency and a stored fill, as the run summary, ``cook stats``
    and its HTML page print them::

        ("packing efficiency", "17.97% (tokens / (packs × seq_len))")
        ("stored fill", "95.83% (tokens / stored tokens)")
    """
    (efficiency_name, efficiency_rule), (fill_name, fill_rule) = PACKING_EFFICIENCY, STORED_FILL
    return (efficiency_name, f"{efficiency:.2%} ({efficiency_rule})"), (fill_name, f"{fill:.2%} ({fill_rule})")


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


STORED_MEDIA: tuple[str, ...] = ("image", "video", "audio", "text")


@dataclass(frozen=True)
class StoredBytes:
    """Bytes of the pack members that hold each medium's tokens (member bytes; tar headers and padding not
    counted), and those bytes per token of that medium (0.0 with no tokens):

    - ``image``: the frame members of images and tiles, or their rows of ``pixel_patches.npy`` (768 B a patch);
    - ``video``: the same for video frames;
    - ``audio``: ``audio_features.npy`` and ``audio_lengths.npy``;
    - ``text``: every other member (input_ids, loss_mask, the boundaries, meta.json, media_sizes, the
      ``pixel_patches.npy`` header), per token that is not a media placeholder (padding is stored, not counted).
    """

    image: int
    video: int
    audio: int
    text: int
    image_per_token: float
    video_per_token: float
    audio_per_token: float
    text_per_token: float

    def line(self) -> str:
        """``image 1,152.0 B (1.2 MB), video 384.5 B (0.4 MB), audio 2,048.0 B (0.8 MB), text 5.1 B (0.1 MB)``"""
        return ", ".join(
            f"{medium} {getattr(self, f'{medium}_per_token'):,.1f} B ({getattr(self, medium) / 1e6:,.1f} MB)"
            for medium in STORED_MEDIA
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
    packing_efficiency: float  # packing_efficiency(tokens, packs, seq_len)
    stored_fill: float  # stored_fill(tokens, padded_tokens)
    fill: Distribution  # T / seq_len of each pack
    sequence_length: Distribution
    sources_per_pack: Distribution
    media_tokens: MediaTokens
    stored_bytes: StoredBytes
    rejects: Mapping[str, int]  # most frequent first
    truncated_sequences: int
    truncated_tokens: int
    steps: StepsPerEpoch | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        steps = data.pop("steps")
        return {**data, **(steps or {})}

    def rows(self) -> list[tuple[str, str]]:
        """``(name, value)`` of the headline figures, as ``cook stats`` and its HTML page print them."""
        share = self.truncated_sequences / self.sources if self.truncated_sequences and self.sources else None
        rows = [
            ("packs", f"{self.packs:,}  (seq_len {self.seq_len})"),
            ("sources", f"{self.sources:,}" + (f" of {self.records_in:,} records" if self.records_in else "")),
            ("tokens", f"{self.tokens:,} + {self.padding_tokens:,} padding"),
            (
                "truncated",
                f"{self.truncated_sequences:,} sequences, {self.truncated_tokens:,} tokens cut"
                + (f" ({share:.1%} of the sources)" if share is not None else ""),
            ),
            *packing_figure_rows(self.packing_efficiency, self.stored_fill),
        ]
        if self.steps is not None:
            steps = self.steps
            left = self.packs - steps.steps_per_epoch * steps.global_batch_size
            rows += [
                (
                    "steps per epoch",
                    f"{steps.steps_per_epoch:,} at global batch size {steps.global_batch_size:,}"
                    + (f" (+ {left:,} packs left over)" if left else ""),
                ),
                ("target tokens/step", f"{steps.target_tokens_per_step:,} (mean)"),
            ]
        return [*rows, ("media tokens", self.media_tokens.line()), ("stored bytes/token", self.stored_bytes.line())]
