"""``--deep`` per pack: decode each sequence's token ids into its placeholder blocks and re-check the
media arithmetic block by block, in placeholder order; and check that every target span ends with
``<|im_end|>`` (SPEC §5: targets are an assistant turn's body plus its closing ``<|im_end|>``).

Blocks (SPEC §5, ``types.PlaceholderBlock``)::

    image  <img> <image>xN </img>                 N = image_embeddings(H, W)     one block
    tiles  <img> <image>xN </img>                 N = 256 * tiles                one block
    video  ... <img> <image>xN </img>  per pair   N = image_embeddings(H, W)     frames / 2 blocks
    audio  <so_start> <so_embedding>xN <so_end>   N = tokens of its clips        one block

Example: meta media ``["image", "audio"]``, media_sizes row ``[1, 512, 512]``, audio_lengths ``[100]`` ->
the sequence must hold exactly ``<img><image>x256</img>`` then ``<so_start><so_embedding>x13<so_end>``.
A placeholder token outside a block, a block whose count or kind differs, or a block too many or
too few is a ``placeholder_block`` finding.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from cook import format as fmt
from cook.packfiles import VISUAL_KINDS, clip_tokens, visual_embeddings
from cook.types import Pack
from cook.validate.problems import Code, Finding, TokenInfo

Block = tuple[str, int]  # ("visual" | "audio", placeholder count)


def parse_blocks(span: np.ndarray, ids: dict[str, int]) -> list[Block] | str:
    """int32 [L] token ids -> its placeholder blocks in order, or what is malformed."""
    delimiters = {
        ids[fmt.IMG_START]: ("visual", ids[fmt.IMG_END], ids[fmt.IMAGE_TOKEN]),
        ids[fmt.AUDIO_START]: ("audio", ids[fmt.AUDIO_END], ids[fmt.AUDIO_TOKEN]),
    }
    marks = np.flatnonzero(
        np.isin(span, [ids[fmt.IMG_START], ids[fmt.IMG_END], ids[fmt.AUDIO_START], ids[fmt.AUDIO_END]])
    )
    if marks.size % 2:
        return "an unpaired block delimiter"
    blocks: list[Block] = []
    for start, end in zip(marks[0::2].tolist(), marks[1::2].tolist(), strict=True):
        opened = delimiters.get(int(span[start]))
        if opened is None or int(span[end]) != opened[1]:
            return f"delimiters at tokens {start} and {end} do not open and close one block"
        body = span[start + 1 : end]
        if not body.size or (body != opened[2]).any():
            return f"the block at token {start} is not a run of its placeholder token"
        blocks.append((opened[0], int(body.size)))
    for kind, token in (("visual", ids[fmt.IMAGE_TOKEN]), ("audio", ids[fmt.AUDIO_TOKEN])):
        inside = sum(count for block_kind, count in blocks if block_kind == kind)
        if int(np.count_nonzero(span == token)) != inside:
            return f"a {fmt.IMAGE_TOKEN if kind == 'visual' else fmt.AUDIO_TOKEN} token outside its block"
    return blocks


def _expected_visual(kind: str, frames: int, height_px: int, width_px: int) -> list[int]:
    """The placeholder count of each block of one visual item (a video: one block per frame pair)."""
    if kind == "video":
        return [fmt.image_embeddings(height_px, width_px)] * (frames // fmt.TEMPORAL_PATCH)
    return [visual_embeddings(kind, frames, height_px, width_px)]


def check_blocks(pack: Pack, tokens: TokenInfo) -> list[Finding]:
    """Every sequence's blocks match its media, in order (run only on packs that passed media.py)."""
    ids = {token: tokens.control_ids[token] for token in fmt.CONTROL_TOKENS if token in tokens.control_ids}
    if len(ids) != len(fmt.CONTROL_TOKENS):
        return []
    rows = iter([] if pack.media_sizes is None else pack.media_sizes.tolist())
    clips = iter([] if pack.audio_lengths is None else clip_tokens(pack.audio_lengths).tolist())
    starts = pack.cu_seqlens_padded.astype(np.int64)
    for i, seq in enumerate(pack.sequences):
        blocks = parse_blocks(pack.input_ids[starts[i] : starts[i] + seq.length], ids)
        problem = blocks if isinstance(blocks, str) else _match(blocks, seq.media, rows, clips)
        if problem:
            return [(Code.PLACEHOLDER_BLOCK, f"sequence {i} ({seq.source}): {problem}")]
    return []


def _match(blocks: list[Block], media: tuple[str, ...], rows: Iterator[list[int]], clips: Iterator[int]) -> str:
    """Compare the blocks with the media list; consumes the sequence's media_sizes rows and clips."""
    queue = iter(enumerate(blocks))
    for item, kind in enumerate(media):
        expected = _expected_visual(kind, *next(rows)) if kind in VISUAL_KINDS else None
        for want in expected if expected is not None else [None]:
            index, block = next(queue, (len(blocks), None))
            if block is None:
                return f"media item {item} ({kind}) has no placeholder block {index}"
            if block[0] != ("visual" if kind in VISUAL_KINDS else "audio"):
                return f"block {index} is {block[0]}, media item {item} is {kind}"
            if want is not None and block[1] != want:
                return f"block {index} holds {block[1]} placeholders, media item {item} ({kind}) implies {want}"
            if want is None and not _take_clips(clips, block[1]):
                return f"block {index} holds {block[1]} {fmt.AUDIO_TOKEN}, not a sum of the next clips' tokens"
    extra = next(queue, None)
    return f"block {extra[0]} has no media item" if extra is not None else ""


def _take_clips(clips: Iterator[int], count: int) -> bool:
    taken = 0
    while taken < count:
        step = next(clips, None)
        if step is None:
            return False
        taken += step
    return taken == count


def check_target_spans(pack: Pack, tokens: TokenInfo) -> list[Finding]:
    """Each maximal run of targets ends at ``<|im_end|>`` (a truncated sequence's last run may not)."""
    im_end = tokens.control_ids.get(fmt.IM_END)
    if im_end is None:
        return []
    mask = pack.loss_mask.astype(bool)
    ends = np.flatnonzero(mask & ~np.append(mask[1:], False))  # last token of each run of targets
    bad = ends[pack.input_ids[ends] != im_end]
    starts = pack.cu_seqlens_padded[:-1].astype(np.int64)
    for t in bad.tolist():
        i = int(np.searchsorted(starts, t, side="right")) - 1
        seq = pack.sequences[i]
        if seq.truncated and t == starts[i] + seq.length - 1:
            continue
        return [
            (
                Code.TARGET_SPAN,
                f"sequence {i} ({seq.source}): a target span ends at token {t} with id "
                f"{pack.input_ids[t]}, not {fmt.IM_END}",
            )
        ]
    return []
