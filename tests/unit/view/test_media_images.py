"""Media drawn back out of a pack: images pixel-exact at their stored size, tiles in their grid, video
strips in frame order, log-mel pictures with the valid length marked."""

from __future__ import annotations

import io

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from cook.media.image import process_image
from cook.media.tiles import choose_tiles, process_tiles
from cook.types import MediaRef
from cook.view import media_images as mi
from tests.unit.media.media_data import config, rgb_bytes
from tests.unit.media.oracles import patchify


def _smooth(width: int, height: int, seed: int) -> np.ndarray:
    """A picture with structure at every scale: a small random grid upscaled, plus a diagonal ramp."""
    rng = np.random.default_rng(seed)
    coarse = Image.fromarray(rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)).resize((width, height), Image.BICUBIC)
    ramp = (np.add.outer(np.arange(height), np.arange(width)) * 97 // (height + width)).astype(np.uint8)
    return np.asarray(coarse) // 2 + ramp[:, :, None]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_unpatchify_inverts_patchify(grid_h: int, grid_w: int, seed: int) -> None:
    pixels = np.random.default_rng(seed).integers(0, 256, (grid_h * 16, grid_w * 16, 3), dtype=np.uint8)
    assert np.array_equal(mi.unpatchify(patchify(pixels), grid_h * 16, grid_w * 16), pixels)


def test_png_of_a_cooked_image_is_the_patchified_source_pixel_for_pixel() -> None:
    # 320x256 is already an even 20x16 patch grid inside [256, 1024]: cook stores it unresized
    source = np.random.default_rng(7).integers(0, 256, (256, 320, 3), dtype=np.uint8)
    (item,) = process_image(
        MediaRef(kind="image", ref="x.png"), rgb_bytes(source), config(image={"min_patches": 256, "max_patches": 1024})
    )
    assert item.size == (1, 256, 320)
    png = mi.png_bytes(mi.unpatchify(item.patches, 256, 320))
    with Image.open(io.BytesIO(png)) as image:
        assert image.size == (320, 256) and image.mode == "RGB"
        assert np.array_equal(np.asarray(image), source)


def _tiles_frames(item) -> np.ndarray:
    frames, size, _ = item.size
    per = (size // 16) ** 2
    return np.stack([mi.unpatchify(item.patches[f * per : (f + 1) * per], size, size) for f in range(frames)])


def test_tile_layout_finds_cooks_grid_back() -> None:
    for width, height, seed in [
        (1024, 512, 0),
        (512, 1536, 1),
        (300, 200, 2),
        (200, 300, 3),
        (2048, 700, 4),
        (640, 640, 5),
    ]:
        source = _smooth(width, height, seed)
        (item,) = process_tiles(
            MediaRef(kind="image", ref="x.png"), rgb_bytes(source), config(image={"mode": "tiles", "max_tiles": 12})
        )
        tiles = _tiles_frames(item)
        cols, rows = choose_tiles(width, height, 12)
        assert mi.tile_layout(tiles) == (cols, rows), (width, height)
        whole = mi.assemble_tiles(tiles, cols, rows)
        assert whole.shape == (rows * 512, cols * 512, 3)
        assert np.array_equal(whole[:512, 512 * (cols - 1) :], tiles[cols - 1])  # the first row's last tile


def test_a_single_tile_has_no_thumbnail_and_one_layout() -> None:
    assert mi.tile_layout(np.zeros((1, 512, 512, 3), np.uint8)) == (1, 1)


def test_video_strip_keeps_frame_order_and_pixels() -> None:
    frames = np.stack([np.full((32, 48, 3), 10 * i, np.uint8) for i in range(6)])
    frames[:, 0, 0] = [1, 2, 3]
    strip = mi.video_strip(frames)
    assert strip.shape == (32, 6 * 48 + 5 * mi.FRAME_GAP_PX, 3)
    for i in range(6):
        x = i * (48 + mi.FRAME_GAP_PX)
        assert np.array_equal(strip[:, x : x + 48], frames[i])
        if i:
            assert (strip[:, x - mi.FRAME_GAP_PX : x] == 255).all()


def test_mel_picture_marks_the_valid_length() -> None:
    features = np.zeros((300, 128), np.float16)
    features[:120] = np.linspace(-5, 5, 128, dtype=np.float16)[None, :]  # rising with the bin
    picture = mi.mel_picture(features, 120)
    index = np.asarray(picture)
    assert picture.mode == "P" and index.shape == (128, 300 + mi.MEL_MARK_PX)
    assert (index[:, 120 : 120 + mi.MEL_MARK_PX] == 255).all()  # the mark
    assert (index[:, 120 + mi.MEL_MARK_PX :] == 254).all()  # the padding frames
    assert (index[:, :120] < 254).all()
    assert index[0, 0] > index[-1, 0]  # high bins on top


def test_mel_picture_of_a_full_clip_ends_with_the_mark() -> None:
    index = np.asarray(mi.mel_picture(np.ones((50, 128), np.float16), 50))
    assert index.shape == (128, 50 + mi.MEL_MARK_PX) and (index[:, 50:] == 255).all()
