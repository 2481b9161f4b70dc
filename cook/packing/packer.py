"""Packer: TokenizedSamples of one window -> Packs (SPEC §7, §8).

Three steps, each pure:

1. ``fit_sample``: a sample longer than ``seq_len`` is truncated to ``seq_len`` tokens only when that
   keeps every media placeholder and at least one target; otherwise it is rejected (``too_long``).
2. ``pack`` (``cook.packing.algorithms``) groups the window's samples by padded length.
3. ``build_pack`` concatenates a group, each sequence padded to ``pad_multiple``.

Worked example, ``pad_multiple=4``, sequences of 5 and 3 tokens::

    input_ids          a a a a a P P P b b b P      (P = pad id)       T = 12
    cu_seqlens         [0, 5, 8]                    true boundaries
    cu_seqlens_padded  [0, 8, 12]                   sequence i starts at cu_seqlens_padded[i]
    loss_mask          0 . . . . 0 0 0 0 . . 0      first token of each sequence and padding are 0
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from cook import format as fmt
from cook.config import PackingConfig
from cook.errors import Rejected, RejectReason
from cook.packing.algorithms import PackRequest, pack_flat
from cook.types import Pack, SequenceMeta, TokenizedSample


def fit_sample(sample: TokenizedSample, config: PackingConfig) -> TokenizedSample:
    """Return ``sample`` if it fits, a truncated copy if policy allows, else raise ``too_long``.

    A sample whose visual patches exceed ``packing.media_budget`` can never fit a pack: ``too_long``.
    """
    seq_len = config.seq_len
    if config.media_budget is not None and sample.n_patches > config.media_budget:
        raise Rejected(
            RejectReason.TOO_LONG, f"{sample.n_patches} visual patches > packing.media_budget={config.media_budget}"
        )
    if sample.length <= seq_len:
        return sample
    if config.overflow != "truncate":
        raise Rejected(RejectReason.TOO_LONG, f"{sample.length} tokens > packing.seq_len={seq_len}")
    if sample.media_end > seq_len:
        raise Rejected(
            RejectReason.TOO_LONG,
            f"{sample.length} tokens > packing.seq_len={seq_len}, and truncating would cut a media slot "
            f"(media end at token {sample.media_end})",
        )
    if not sample.loss_mask[:seq_len].any():
        raise Rejected(
            RejectReason.TOO_LONG,
            f"{sample.length} tokens > packing.seq_len={seq_len}, and truncating would leave no target",
        )
    return replace(
        sample,
        input_ids=sample.input_ids[:seq_len],
        loss_mask=sample.loss_mask[:seq_len],
        truncated=True,
        truncated_tokens=sample.length - seq_len,
    )


def build_pack(samples: Sequence[TokenizedSample], pad_id: int, pad_multiple: int, join_patches: bool = True) -> Pack:
    """Concatenate ``samples`` into one pack. With ``join_patches=False`` the visual patches stay
    as the items' own arrays (``Pack.pixel_patch_parts``), for a writer that streams them."""
    lengths = np.array([s.length for s in samples], dtype=np.int64)
    padded = fmt.padded_lengths(lengths, pad_multiple)
    cu = np.zeros(len(samples) + 1, dtype=np.int32)
    np.cumsum(lengths, out=cu[1:])
    cu_padded = np.zeros(len(samples) + 1, dtype=np.int32)
    np.cumsum(padded, out=cu_padded[1:])
    starts = cu_padded[:-1].tolist()
    total = int(cu_padded[-1])
    input_ids = np.full(total, pad_id, dtype=np.int32)  # int32 [T]
    loss_mask = np.zeros(total, dtype=np.uint8)  # uint8 [T]
    for sample, start in zip(samples, starts, strict=True):
        end = start + sample.input_ids.shape[0]
        input_ids[start:end] = sample.input_ids
        loss_mask[start:end] = sample.loss_mask
    running = np.zeros(total + 1, dtype=np.int64)
    np.cumsum(loss_mask, out=running[1:])
    targets = (running[cu_padded[1:]] - running[cu_padded[:-1]]).tolist()  # padding adds 0
    loss_mask[cu_padded[:-1]] = 0
    media = [item for s in samples for item in s.media]
    visual = [m for m in media if m.size is not None]
    patches = [m.patches for m in visual if m.patches is not None]
    sizes = [m.size for m in visual]
    features = [m.audio_features for m in media if m.audio_features is not None]
    clip_lengths = [m.audio_lengths for m in media if m.audio_lengths is not None]
    return Pack(
        input_ids=input_ids,
        loss_mask=loss_mask,
        cu_seqlens=cu,
        cu_seqlens_padded=cu_padded,
        sequences=tuple(
            SequenceMeta(
                source=s.source,
                length=length,
                targets=n_targets,
                media=tuple(m.visual_kind or m.kind for m in s.media),  # image, video, tiles or audio
                truncated=s.truncated,
            )
            for s, length, n_targets in zip(samples, lengths.tolist(), targets, strict=True)
        ),
        pixel_patches=np.concatenate(patches) if patches and join_patches else None,
        pixel_patch_parts=tuple(patches) if not join_patches else (),
        media_sizes=np.array(sizes, dtype=np.int32) if sizes else None,
        audio_features=_stack_audio(features) if features else None,
        audio_lengths=np.concatenate(clip_lengths).astype(np.int32) if clip_lengths else None,
        stored_frames=tuple(frame for m in visual for frame in m.stored_frames),
    )


def _stack_audio(features: list[np.ndarray]) -> np.ndarray:
    """Concatenate ``[C_i, F_i, 128]`` clips along C, zero-padding F to the longest."""
    frames = max(f.shape[1] for f in features)
    out = np.zeros((sum(f.shape[0] for f in features), frames, features[0].shape[2]), dtype=np.float16)
    row = 0
    for f in features:
        out[row : row + f.shape[0], : f.shape[1]] = f
        row += f.shape[0]
    return out


def plan_window(
    lengths: Sequence[int] | np.ndarray, n_patches: Sequence[int] | np.ndarray, config: PackingConfig
) -> tuple[np.ndarray, np.ndarray]:
    """Pack one window from the samples' lengths and visual patch counts alone (the driver's plan).

    Returns ``order`` (int64 [N]) and ``bounds`` (int64 [packs + 1]): pack ``j`` holds the window's
    samples ``order[bounds[j]:bounds[j + 1]]``, packs in a canonical, deterministic order. Arrays in
    and out: no Python object per sample, for windows of millions.
    """
    request = PackRequest(
        capacity=config.seq_len,
        pad_multiple=config.pad_multiple,
        max_sequences_per_pack=config.max_sequences_per_pack,
        media_budget=config.media_budget,
        pack_count_multiple=config.pack_count_multiple,
        seed=config.seed,
        delta=config.delta,
    )
    return pack_flat(lengths, request, config.algorithm, n_patches if config.media_budget else None)


def pack_window(samples: Sequence[TokenizedSample], config: PackingConfig, pad_id: int) -> list[Pack]:
    """Pack one window of fitted samples; packs come out in a canonical, deterministic order."""
    order, bounds = plan_window([s.length for s in samples], [s.n_patches for s in samples], config)
    spans = zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)
    return [build_pack([samples[i] for i in order[a:b].tolist()], pad_id, config.pad_multiple) for a, b in spans]
