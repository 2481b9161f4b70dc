"""The pack page of a hand-made pack: one media <img> per visual item and audio clip, at its placeholder;
one target span per run of loss_mask == 1; data text escaped (no element comes from data)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from PIL import Image

from cook import format as fmt
from cook.types import Pack, SequenceMeta
from cook.view.pack_page import render_pack_page
from cook.view.tokens import TokenView, from_ids
from tests.unit.media.oracles import patchify
from tests.unit.validate.packs_data import IDS, audio_block, build, image_block, sequence
from tests.unit.view.dom import find, parse, picture, target_run_count

SCRIPT = "<script>alert(1)</script>"
ONERROR = '<img src=x onerror="alert(2)">'
WORDS = {
    20: "Look: ",
    21: "Frame 1 sampled at 0.25 seconds: ",
    22: "\nFrame 2 sampled at 1.25 seconds: ",
    23: SCRIPT,
    24: ONERROR,
    100: "x",
}


def _view() -> TokenView:
    base = from_ids(IDS, pad_id=0)
    return TokenView(decode=lambda ids: "".join(WORDS.get(i, f"[{i}]") for i in ids), controls=base.controls, pad_id=0)


def _pixels(rng: np.random.Generator, frames: int, height: int, width: int) -> list[np.ndarray]:
    return [rng.integers(0, 256, (height, width, 3), dtype=np.uint8) for _ in range(frames)]


@pytest.fixture(scope="module")
def pack_and_pixels() -> tuple[Pack, list[list[np.ndarray]]]:
    """Sequence 0: an image and a 4-frame video (2 labelled groups); 1: a tiles item (3 tiles) and a
    2-clip audio item; 2: text holding <script> and <img onerror> (the source too)."""
    video = [21, *image_block(4 * 4 // 4), 22, *image_block(4)]
    pack = build(
        [
            sequence([20, *image_block(4), *video], 3),
            sequence([20, *image_block(3 * 256), *audio_block(13 + 2)], 4),
            sequence([23, 24], 2),
        ],
        media=[("image", "video"), ("tiles", "audio"), ()],
        sizes=[[1, 32, 32], [4, 64, 64], [3, 512, 512]],
        audio_lengths=[100, 10],
    )
    rng = np.random.default_rng(0)
    whole = np.asarray(
        Image.fromarray(rng.integers(0, 256, (3, 6, 3), dtype=np.uint8)).resize((1024, 512), Image.BICUBIC)
    )
    thumbnail = np.asarray(Image.fromarray(whole).resize((512, 512), Image.BICUBIC))
    items = [_pixels(rng, 1, 32, 32), _pixels(rng, 4, 64, 64), [whole[:, :512], whole[:, 512:], thumbnail]]
    patches = np.concatenate([patchify(frame) for frames in items for frame in frames])
    sequences = (
        *pack.sequences[:2],
        SequenceMeta(source=f"evil.jsonl#{SCRIPT}", length=pack.sequences[2].length, targets=3),
    )
    assert pack.audio_features is not None
    features = np.random.default_rng(1).normal(size=pack.audio_features.shape).astype(np.float16)
    return dataclasses.replace(pack, pixel_patches=patches, sequences=sequences, audio_features=features), items


@pytest.fixture(scope="module")
def elements(pack_and_pixels):
    pack, _ = pack_and_pixels
    return parse(render_pack_page(pack, fmt.pack_key(7), "shard-000000.tar", 1024, _view()))


def test_one_media_img_per_visual_item_and_audio_clip(elements) -> None:
    media = find(elements, "img", "media")
    assert [e.attrs.get("data-item") or "clip" + e.attrs["data-clip"] for e in media] == [
        "0",
        "1",
        "2",
        "clip0",
        "clip1",
    ]
    assert {frozenset(e.classes) for e in find(elements, "img")} == {frozenset({"media"}), frozenset({"thumb"})}


def test_images_and_frames_are_the_stored_pixels(elements, pack_and_pixels) -> None:
    _, items = pack_and_pixels
    image, strip, tiles = (picture(e) for e in find(elements, "img", "media")[:3])
    assert np.array_equal(image, items[0][0])
    for i, frame in enumerate(items[1]):
        x = i * (64 + 4)
        assert np.array_equal(strip[:, x : x + 64], frame)
    assert np.array_equal(tiles, np.concatenate(items[2][:2], axis=1))  # 3 tiles: the 2x1 grid + the thumbnail
    assert np.array_equal(picture(find(elements, "img", "thumb")[0]), items[2][2])


def test_video_groups_carry_their_frame_labels(elements) -> None:
    labels = ["".join(e.text) for e in find(elements, "span", "label")]
    assert labels == ["Frame 1 sampled at 0.25 seconds", "Frame 2 sampled at 1.25 seconds"]


def test_media_sits_at_its_placeholder(elements) -> None:
    sequences = find(elements, "section", "sequence")
    assert len(sequences) == 3
    order = [(e.tag, e.attrs.get("id", "")) for e in elements if e.attrs.get("id", "").startswith(("seq-", "m", "a"))]
    assert order == [
        ("section", "seq-0"), ("span", "m0"), ("span", "m1"),
        ("section", "seq-1"), ("span", "m2"), ("span", "a0"), ("span", "a1"),
        ("section", "seq-2"),
    ]  # fmt: skip


def test_one_target_span_per_target_run(elements, pack_and_pixels) -> None:
    pack, _ = pack_and_pixels
    spans = find(elements, "span", "target")
    starts = pack.cu_seqlens_padded
    runs = sum(target_run_count(pack.loss_mask[starts[i] : starts[i + 1]]) for i in range(len(pack.sequences)))
    assert len(spans) == runs == 3
    assert sum(int(e.attrs["data-tokens"]) for e in spans) == int(pack.loss_mask.sum())


def test_data_text_is_escaped_and_makes_no_element(elements) -> None:
    assert not find(elements, "script")
    assert all(not name.startswith("on") for e in elements for name in e.attrs)
    assert all(e.attrs.get("src", "").startswith("data:image/png;base64,") for e in find(elements, "img"))
    text = "".join(t for e in find(elements, "div", "text") for t in e.text)
    assert SCRIPT in text and ONERROR in text
    title = find(elements, "section", "sequence")[2]
    assert SCRIPT in "".join(title.text)


def test_padding_and_fill_are_shown(elements, pack_and_pixels) -> None:
    pack, _ = pack_and_pixels
    chips = ["".join(e.text) for e in find(elements, "span", "pad")]
    pads = np.diff(pack.cu_seqlens_padded) - np.diff(pack.cu_seqlens)
    assert [c for c in chips if c.startswith("padding")] == [f"padding ×{n}" for n in pads.tolist() if n]
    fill = {
        e.attrs["class"]: e.attrs["title"]
        for e in elements
        if e.tag == "span" and e.attrs.get("class") in ("tok", "padm", "tail")
    }
    assert fill == {
        "tok": f"tokens: {pack.tokens:,}",
        "padm": f"pad-multiple padding: {pack.padded_tokens - pack.tokens:,}",
        "tail": f"tail padding: {1024 - pack.padded_tokens:,}",
    }


def _budget_page(pack: Pack, max_bytes: int | None) -> tuple[str, list]:
    page = render_pack_page(pack, fmt.pack_key(7), "shard-000000.tar", 1024, _view(), max_bytes)
    return page, parse(page)


def test_pictures_past_the_page_budget_become_marked_previews(pack_and_pixels) -> None:
    pack, items = pack_and_pixels
    exact_page, exact = _budget_page(pack, None)
    assert not find(exact, "img", "preview")
    budget = 400_000  # the 32x32 image and the video strip fit, the 1024x512 tiles picture (~0.5 MB) does not
    page, elements = _budget_page(pack, budget)
    assert len(page.encode()) <= budget < len(exact_page.encode())
    media = find(elements, "img", "media")
    assert [("preview" in e.classes) for e in media] == [False, False, True, False, False]
    assert media[2].attrs["src"].startswith("data:image/jpeg;base64,")
    assert np.array_equal(picture(media[0]), items[0][0])  # what fits stays pixel-exact
    preview = picture(media[2], "image/jpeg")
    assert preview.shape[0] * preview.shape[1] <= 320 * 320 + 453 and abs(preview.shape[1] - 2 * preview.shape[0]) <= 1
    captions = ["".join(e.text) for e in find(elements, "span", "caption")]
    assert "did not fit the page budget" in captions[2] and "full size" not in captions[2]
    assert "pictures are previews" in page


def test_a_budget_too_small_for_any_png_still_shows_every_item(pack_and_pixels) -> None:
    pack, _ = pack_and_pixels
    _, elements = _budget_page(pack, 1)
    media = find(elements, "img", "media")
    assert len(media) == 5 and sum("preview" in e.classes for e in media) == 3  # audio maps stay exact
