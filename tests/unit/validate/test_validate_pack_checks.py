"""Per-pack invariants on hand-made packs: each broken invariant gives its own code, and a well-formed
pack (text, image, video, tiles, audio) gives none."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cook import format as fmt
from cook.packfiles import clip_tokens
from cook.types import Pack
from cook.validate.placeholders import parse_blocks
from cook.validate.problems import Code, PackRules
from cook.validate.scan import check_pack
from tests.unit.validate.packs_data import IDS, RULES, audio_block, build, image_block, multimodal, sequence

DEEP = dataclasses.replace(RULES, deep=True)


def codes(pack: Pack, rules: PackRules = DEEP) -> set[str]:
    return {code.value for code, _ in check_pack(pack, rules)}


def test_clean_packs_have_no_findings() -> None:
    assert codes(build([sequence([20, 21], 4), sequence([22], 9)])) == set()
    assert codes(multimodal()) == set()
    tiles = build([sequence([20, *image_block(512)], 2)], media=[("tiles",)], sizes=[[2, 512, 512]])
    assert codes(tiles, dataclasses.replace(DEEP, image_mode="tiles", seq_len=1024)) == set()


def test_audio_tokens_follow_the_frames_convention() -> None:
    # audio_lengths are valid 10 ms frames; tokens come from samples = frames * 160 (SPEC §6)
    assert clip_tokens(np.array([3000, 100, 10])).tolist() == [375, 13, 2]
    assert fmt.audio_clip_tokens(30 * 16_000) == 375


def _with(pack: Pack, **arrays: object) -> Pack:
    return dataclasses.replace(pack, **arrays)  # type: ignore[arg-type]


def test_boundaries() -> None:
    pack = build([sequence([20, 21], 4), sequence([22], 9)])
    assert codes(_with(pack, cu_seqlens=np.array([0, 8, 8], np.int32))) == {"cu_seqlens"}
    assert codes(_with(pack, cu_seqlens_padded=np.array([1, 16, 32], np.int32))) == {"cu_seqlens"}
    assert codes(_with(pack, cu_seqlens_padded=np.array([0, 16, 24], np.int32))) == {"cu_seqlens"}  # != T
    assert pack.cu_seqlens_padded.tolist() == [0, 16, 32]
    over = np.zeros(40, np.int32)
    over[24 : 24 + 13] = pack.input_ids[16 : 16 + 13]
    over[:9] = pack.input_ids[:9]
    over_mask = np.zeros(40, np.uint8)
    over_mask[24 : 24 + 13] = pack.loss_mask[16 : 16 + 13]
    over_mask[:9] = pack.loss_mask[:9]
    moved = _with(pack, cu_seqlens_padded=np.array([0, 24, 40], np.int32), input_ids=over, loss_mask=over_mask)
    assert codes(moved) == {"pad_multiple"}  # 24 is a multiple of 8, but 9 tokens pad to 16
    assert codes(pack, dataclasses.replace(DEEP, seq_len=16)) == {"pack_length"}
    wrong_meta = _with(pack, sequences=(dataclasses.replace(pack.sequences[0], length=7), pack.sequences[1]))
    assert codes(wrong_meta) == {"meta_length"}


def test_masks() -> None:
    pack = build([sequence([20, 21], 4), sequence([22], 9)])
    mask = pack.loss_mask.copy()
    mask[pack.cu_seqlens_padded[1]] = 1  # start of sequence 1
    seqs = (pack.sequences[0], dataclasses.replace(pack.sequences[1], targets=pack.sequences[1].targets + 1))
    assert codes(_with(pack, loss_mask=mask, sequences=seqs), RULES) == {"loss_mask_start"}
    mask = pack.loss_mask.copy()
    mask[pack.sequences[0].length] = 1  # padding of sequence 0
    assert codes(_with(pack, loss_mask=mask), RULES) == {"loss_mask_padding"}
    mask = pack.loss_mask.copy()
    mask[3] = 2
    assert "loss_mask_values" in codes(_with(pack, loss_mask=mask))
    seqs = (dataclasses.replace(pack.sequences[0], targets=1), pack.sequences[1])
    assert codes(_with(pack, sequences=seqs)) == {"meta_targets"}


def test_tokens() -> None:
    pack = build([sequence([20, 21], 4), sequence([22], 9)])
    ids = pack.input_ids.copy()
    ids[2] = 8192
    assert codes(_with(pack, input_ids=ids)) == {"token_range"}
    ids = pack.input_ids.copy()
    ids[2] = -1
    assert codes(_with(pack, input_ids=ids)) == {"token_range"}
    ids = pack.input_ids.copy()
    ids[pack.sequences[0].length] = 7  # padding that is not the pad id
    assert codes(_with(pack, input_ids=ids)) == {"padding_token"}


def test_placeholder_counts() -> None:
    pack = multimodal()
    ids = pack.input_ids.copy()
    ids[int(np.flatnonzero(ids == IDS[fmt.IMAGE_TOKEN])[0])] = 20  # one <image> fewer
    assert codes(_with(pack, input_ids=ids), RULES) == {"placeholder_count"}
    ids = pack.input_ids.copy()
    ids[int(np.flatnonzero(ids == IDS[fmt.AUDIO_TOKEN])[0])] = 20
    assert codes(_with(pack, input_ids=ids), RULES) == {"placeholder_count"}
    # right total, wrong sequence: the audio clips of sequence 1 cannot explain one extra token there
    ids = pack.input_ids.copy()
    ids[int(np.flatnonzero(ids == IDS[fmt.IMAGE_TOKEN])[-1])] = 20
    ids[int(pack.cu_seqlens_padded[2]) + 1] = IDS[fmt.IMAGE_TOKEN]
    assert codes(_with(pack, input_ids=ids), RULES) == {"placeholder_count"}


def test_media_arrays() -> None:
    pack = multimodal()
    assert pack.pixel_patches is not None and pack.media_sizes is not None
    assert codes(_with(pack, pixel_patches=pack.pixel_patches[:-1])) == {"patch_count"}
    sizes = pack.media_sizes.copy()
    sizes[1, 0] = 3  # a video with an odd frame count
    assert codes(_with(pack, media_sizes=sizes)) == {"media_sizes"}
    sizes = pack.media_sizes.copy()
    sizes[0, 1] = 40  # not a multiple of 16
    assert codes(_with(pack, media_sizes=sizes)) == {"media_sizes"}
    assert codes(_with(pack, media_sizes=pack.media_sizes[:1])) == {"media_count"}
    assert codes(pack, dataclasses.replace(DEEP, image_mode="tiles")) == {"media_kind"}
    assert codes(_with(pack, audio_lengths=np.array([100, 5000], np.int32))) == {"audio_lengths"}
    assert codes(_with(pack, audio_lengths=np.array([100, 100], np.int32))) == {"placeholder_count"}


def test_deep_blocks_and_target_spans() -> None:
    pack = multimodal()
    ids = pack.input_ids.copy()
    first_img_end = int(np.flatnonzero(ids == IDS[fmt.IMG_END])[0])
    ids[first_img_end] = 20  # <img> never closed; counts unchanged
    assert codes(_with(pack, input_ids=ids), RULES) == set()
    assert codes(_with(pack, input_ids=ids)) == {"placeholder_block"}
    # swap the order of the image and the video blocks: same counts, wrong order
    sizes = pack.media_sizes[::-1].copy()  # type: ignore[index]
    seqs = (dataclasses.replace(pack.sequences[0], media=("video", "image")), *pack.sequences[1:])
    assert codes(_with(pack, media_sizes=sizes, sequences=seqs)) == {"placeholder_block"}
    mask = pack.loss_mask.copy()
    end = int(pack.cu_seqlens_padded[2]) + pack.sequences[2].length - 1  # the <|im_end|> of sequence 2
    mask[end] = 0
    seqs = (*pack.sequences[:2], dataclasses.replace(pack.sequences[2], targets=pack.sequences[2].targets - 1))
    assert codes(_with(pack, loss_mask=mask, sequences=seqs), RULES) == set()
    assert codes(_with(pack, loss_mask=mask, sequences=seqs)) == {"target_span"}


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        ([1, *image_block(3), 20, *audio_block(2)], [("visual", 3), ("audio", 2)]),
        ([1, 6, 5, 5], "an unpaired block delimiter"),
        ([6, 5, 10], "do not open and close"),
        ([6, 5, 9, 7], "not a run"),
        ([6, 7], "not a run"),
        ([5, *image_block(1)], "outside its block"),
    ],
)
def test_parse_blocks(tokens: list[int], expected: object) -> None:
    found = parse_blocks(np.array(tokens, np.int32), IDS)
    if isinstance(expected, str):
        assert isinstance(found, str) and expected in found
    else:
        assert found == expected


def test_every_code_is_distinct() -> None:
    values = [code.value for code in Code]
    assert len(values) == len(set(values))
