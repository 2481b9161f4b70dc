"""Media arithmetic (SPEC §6, §8, §9): ``<image>`` tokens equal the visual embeddings implied by
``media_sizes``, ``pixel_patches`` holds exactly their patches, and ``<so_embedding>`` tokens equal the
audio embeddings of ``audio_lengths``.

meta.json lists each sequence's media kinds in placeholder order ("image" | "video" | "tiles" |
"audio"); the visual ones consume ``media_sizes`` rows in order. Per row ``(frames, H, W)``:

    patches    = frames * (H/16) * (W/16)                        (every kind)
    embeddings = image_embeddings(H, W)                          image  (frames == 1)
               = video_embeddings(frames, H, W)                  video  (frames even)
               = tiles_embeddings(frames)                        tiles  (H == W == 512)

Audio items consume ``audio_lengths`` entries (valid 10 ms mel frames per 30 s clip; an item has one
clip or more). A clip of ``L`` frames came from ``L * 160 + r`` samples (``0 <= r < 160``), and
``format.audio_clip_tokens`` only looks at ``samples // 160``, so its tokens are exactly
``audio_clip_tokens(L * 160)``: 3000 frames (30 s) -> 375, 100 frames (1 s) -> 13.

Counts are checked over the whole pack and, when the boundaries are usable, per sequence; the token
counts come from ``cook.packfiles`` (``visual_embeddings``, ``clip_tokens``), where ``cook stats`` and the
HTML views take them too. A pack without media may hold no placeholder at all (``check_no_media``, over
a whole batch).
"""

from __future__ import annotations

from typing import Final

import numpy as np

from cook import format as fmt
from cook.packfiles import VISUAL_KINDS, clip_tokens, visual_embeddings
from cook.types import Pack
from cook.validate.batch import Findings, PackBatch, per_pack
from cook.validate.problems import Code, Finding, PackRules

MIN_CLIP_FRAMES: Final = round(fmt.AUDIO_MIN_CLIP_S * fmt.AUDIO_SAMPLE_RATE_HZ) // fmt.AUDIO_HOP  # 10
MAX_CLIP_FRAMES: Final = fmt.AUDIO_CLIP_S * fmt.AUDIO_SAMPLE_RATE_HZ // fmt.AUDIO_HOP  # 3000


def per_sequence_counts(pack: Pack, token_id: int) -> np.ndarray:
    """int64 [n]: occurrences of ``token_id`` in each sequence's padded span."""
    positions = np.flatnonzero(pack.input_ids == token_id)
    return np.diff(np.searchsorted(positions, pack.cu_seqlens_padded.astype(np.int64)))


def check_no_media(batch: PackBatch, rules: PackRules, findings: Findings) -> None:
    """In a pack without media (no media members, no media in meta.json) no placeholder token may appear;
    the packs with media get ``check_visual`` and ``check_audio``."""
    for token_id, token in ((rules.tokens.image_id, fmt.IMAGE_TOKEN), (rules.tokens.audio_id, fmt.AUDIO_TOKEN)):
        hits = batch.ids == token_id if token_id is not None else None
        if hits is None or not hits.any():
            continue
        for k, _, count in per_pack(np.flatnonzero(hits), batch.base):
            if not batch.media[k]:
                findings[k].append((Code.PLACEHOLDER_COUNT, f"{count} {token} tokens in a pack without media"))


def _row_problem(kind: str, frames: int, height_px: int, width_px: int, mode: str | None) -> tuple[Code, str] | None:
    if frames < 1 or height_px < fmt.PATCH_SIZE or width_px < fmt.PATCH_SIZE:
        return Code.MEDIA_SIZES, "frames, height and width must be positive (at least one patch)"
    if height_px % fmt.PATCH_SIZE or width_px % fmt.PATCH_SIZE:
        return Code.MEDIA_SIZES, f"height and width must be multiples of {fmt.PATCH_SIZE} px"
    if kind == "tiles":
        if height_px != fmt.TILE_SIZE or width_px != fmt.TILE_SIZE:
            return Code.MEDIA_SIZES, f"a tiles item must be {fmt.TILE_SIZE}x{fmt.TILE_SIZE} per tile"
        if mode is not None and mode != "tiles":
            return Code.MEDIA_KIND, f"a tiles item, but the manifest's media.image.mode is {mode!r}"
        return None
    if (height_px // fmt.PATCH_SIZE) % 2 or (width_px // fmt.PATCH_SIZE) % 2:
        return Code.MEDIA_SIZES, "both patch-grid sides must be even (2x2 pixel shuffle)"
    if kind == "image" and frames != 1:
        return Code.MEDIA_SIZES, "an image has exactly 1 frame"
    if kind == "image" and mode == "tiles":
        return Code.MEDIA_KIND, "a dynamic-resolution image, but the manifest's media.image.mode is 'tiles'"
    if kind == "video" and frames % fmt.TEMPORAL_PATCH:
        return Code.MEDIA_SIZES, f"a video's frame count must be a multiple of {fmt.TEMPORAL_PATCH}"
    return None


def check_visual(pack: Pack, rules: PackRules, usable: bool) -> list[Finding]:
    """media_sizes rows vs meta.json kinds, pixel_patches rows, and the ``<image>`` tokens."""
    kinds = [(i, kind) for i, s in enumerate(pack.sequences) for kind in s.media if kind in VISUAL_KINDS]
    sizes = pack.media_sizes if pack.media_sizes is not None else np.zeros((0, 3), np.int32)  # int32 [M, 3]
    if len(kinds) != sizes.shape[0]:
        return [
            (
                Code.MEDIA_COUNT,
                f"{fmt.META} lists {len(kinds)} visual items, {fmt.MEDIA_SIZES} has {sizes.shape[0]} rows",
            )
        ]
    embeddings = np.zeros(len(pack.sequences), dtype=np.int64)  # int64 [n]
    patches = 0
    for row, ((seq, kind), (frames, height_px, width_px)) in enumerate(zip(kinds, sizes.tolist(), strict=True)):
        problem = _row_problem(kind, frames, height_px, width_px, rules.image_mode)
        if problem is not None:
            return [(problem[0], f"{fmt.MEDIA_SIZES}[{row}] = {[frames, height_px, width_px]} ({kind}): {problem[1]}")]
        patches += frames * fmt.frame_patches(height_px, width_px)
        embeddings[seq] += visual_embeddings(kind, frames, height_px, width_px)
    findings: list[Finding] = []
    stored = 0 if pack.pixel_patches is None else pack.pixel_patches.shape[0]
    if stored != patches:
        findings.append(
            (
                Code.PATCH_COUNT,
                f"{fmt.PIXEL_PATCHES} has {stored} patches, {fmt.MEDIA_SIZES} implies "
                f"{patches} (sum of frames * H/16 * W/16)",
            )
        )
    if rules.tokens.image_id is not None:
        findings += _compare_counts(pack, rules.tokens.image_id, embeddings, fmt.IMAGE_TOKEN, usable)
    return findings


def check_audio(pack: Pack, rules: PackRules, usable: bool) -> list[Finding]:
    """audio_lengths vs meta.json audio items, and the ``<so_embedding>`` tokens (greedy clip assignment)."""
    items = [sum(kind == "audio" for kind in s.media) for s in pack.sequences]
    lengths = pack.audio_lengths if pack.audio_lengths is not None else np.zeros(0, np.int32)  # int32 [C]
    if sum(items) > lengths.shape[0] or (sum(items) == 0) != (lengths.shape[0] == 0):
        return [
            (
                Code.MEDIA_COUNT,
                f"{fmt.META} lists {sum(items)} audio items, {fmt.AUDIO_LENGTHS} has "
                f"{lengths.shape[0]} clips (each item has at least one)",
            )
        ]
    frames = 0 if pack.audio_features is None else pack.audio_features.shape[1]
    bad = np.flatnonzero((lengths < MIN_CLIP_FRAMES) | (lengths > MAX_CLIP_FRAMES) | (lengths > frames))
    if bad.size:
        c = int(bad[0])
        return [
            (
                Code.AUDIO_LENGTHS,
                f"{fmt.AUDIO_LENGTHS}[{c}] = {lengths[c]} frames, outside "
                f"[{MIN_CLIP_FRAMES}, min({MAX_CLIP_FRAMES}, F={frames})]",
            )
        ]
    audio_id = rules.tokens.audio_id
    if audio_id is None:
        return []
    tokens = clip_tokens(lengths)
    total = int(np.count_nonzero(pack.input_ids == audio_id))
    if total != int(tokens.sum()):
        return [
            (
                Code.PLACEHOLDER_COUNT,
                f"{total} {fmt.AUDIO_TOKEN} tokens, {fmt.AUDIO_LENGTHS} implies "
                f"{int(tokens.sum())} (sum of audio_clip_tokens per clip)",
            )
        ]
    if not usable:
        return []
    return _assign_clips(pack, per_sequence_counts(pack, audio_id), items, tokens)


def _assign_clips(pack: Pack, counts: np.ndarray, items: list[int], tokens: np.ndarray) -> list[Finding]:
    """Each sequence takes the next clips until their tokens reach its ``<so_embedding>`` count."""
    clip = 0
    for i, (count, n_items) in enumerate(zip(counts.tolist(), items, strict=True)):
        taken, used = 0, 0
        while taken < count and clip < tokens.shape[0]:
            taken, used, clip = taken + int(tokens[clip]), used + 1, clip + 1
        if taken != count or used < n_items:
            return [
                (
                    Code.PLACEHOLDER_COUNT,
                    f"sequence {i} ({pack.sequences[i].source}): {count} "
                    f"{fmt.AUDIO_TOKEN} tokens for {n_items} audio items do not match "
                    f"its clips' tokens in {fmt.AUDIO_LENGTHS}",
                )
            ]
    return []


def _compare_counts(pack: Pack, token_id: int, expected: np.ndarray, token: str, usable: bool) -> list[Finding]:
    total, want = int(np.count_nonzero(pack.input_ids == token_id)), int(expected.sum())
    if total != want:
        return [(Code.PLACEHOLDER_COUNT, f"{total} {token} tokens, {fmt.MEDIA_SIZES} implies {want} embeddings")]
    if not usable:
        return []
    counts = per_sequence_counts(pack, token_id)
    wrong = np.flatnonzero(counts != expected)
    if not wrong.size:
        return []
    i = int(wrong[0])
    return [
        (
            Code.PLACEHOLDER_COUNT,
            f"sequence {i} ({pack.sequences[i].source}) has {counts[i]} {token} tokens, its media imply {expected[i]}",
        )
    ]
