"""Tiles mode: closest-aspect grid of 512 px tiles, raster order, thumbnail, N = 256 per tile."""

from __future__ import annotations

import numpy as np
import pytest

from cook import format as fmt
from cook.media import process_media
from cook.media.tiles import choose_tiles
from cook.types import MediaRef

from .media_data import config, rgb_bytes
from .oracles import patchify

IMAGE = MediaRef(kind="image", ref="x.png")
TILES = config(image={"mode": "tiles"})


@pytest.mark.parametrize(
    ("width", "height", "max_tiles", "grid"),
    [
        (1024, 512, 12, (2, 1)),
        (512, 1024, 12, (1, 2)),
        (512, 512, 12, (1, 1)),
        (4096, 4096, 12, (3, 3)),  # ties on aspect 1 grow while the image has the pixels
        (600, 600, 12, (1, 1)),  # ... and not otherwise
        (300, 200, 12, (3, 2)),
        (800, 600, 12, (4, 3)),
        (100, 5000, 12, (1, 12)),
        (1024, 512, 1, (1, 1)),
        (3000, 1000, 6, (3, 1)),
    ],
)
def test_choose_tiles(width: int, height: int, max_tiles: int, grid: tuple[int, int]) -> None:
    assert choose_tiles(width, height, max_tiles) == grid


def test_wide_image_two_tiles_plus_thumbnail() -> None:
    pixels = np.zeros((512, 1024, 3), np.uint8)
    pixels[:, :512] = (255, 0, 0)
    pixels[:, 512:] = (0, 0, 255)
    (item,) = process_media(IMAGE, rgb_bytes(pixels), TILES)
    assert item.visual_kind == "tiles" and item.kind == "image"
    assert item.size == (3, 512, 512)
    assert item.n_embeddings == 768 == fmt.tiles_embeddings(3)
    (block,) = item.blocks
    assert (block.start, block.token, block.end) == (fmt.IMG_START, fmt.IMAGE_TOKEN, fmt.IMG_END)
    patches = item.patches
    assert patches is not None and patches.shape == (3 * 1024, 768) and patches.dtype == np.uint8
    # tile 0 = left half (red), tile 1 = right half (blue): no resize at an exact 2x1 size
    np.testing.assert_array_equal(patches[:1024], patchify(pixels[:, :512]))
    np.testing.assert_array_equal(patches[1024:2048], patchify(pixels[:, 512:]))
    thumbnail = patches[2048:].reshape(32, 32, 3, 16, 16)  # [row, col, C, y, x]
    assert thumbnail[:, :15, 0].min() > 250 and thumbnail[:, :15, 2].max() < 5  # left of the thumbnail red
    assert thumbnail[:, 17:, 2].min() > 250 and thumbnail[:, 17:, 0].max() < 5


def test_single_tile_has_no_thumbnail() -> None:
    (item,) = process_media(IMAGE, rgb_bytes(np.full((300, 400, 3), 9, np.uint8)), TILES)
    assert choose_tiles(400, 300, 12) == (4, 3)
    assert item.size == (13, 512, 512) and item.n_embeddings == 13 * 256
    (item,) = process_media(IMAGE, rgb_bytes(np.full((500, 500, 3), 9, np.uint8)), TILES)
    assert item.size == (1, 512, 512) and item.n_embeddings == 256 and item.n_patches == 1024


def test_tiles_are_raster_order() -> None:
    pixels = np.zeros((1024, 1536, 3), np.uint8)  # 3 cols x 2 rows of exact tiles
    for row in range(2):
        for col in range(3):
            pixels[row * 512 : (row + 1) * 512, col * 512 : (col + 1) * 512] = row * 3 + col + 1
    (item,) = process_media(IMAGE, rgb_bytes(pixels), TILES)
    assert item.size == (7, 512, 512)
    patches = item.patches
    assert patches is not None
    for tile in range(6):
        np.testing.assert_array_equal(patches[tile * 1024 : (tile + 1) * 1024], tile + 1)
