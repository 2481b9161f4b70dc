"""The geometry the pack page emits for pictures (issue 33): a 4x3 tile grid, a single tile and a plain
image, cooked by ``cook/media`` itself, then drawn. Every overlay is placed in percentages of one box of
the stored size, and each tile outline covers exactly the pixels of the tile cut there (the browser
measures the same page in tests/e2e/test_browser_pages.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from PIL import Image

from cook import format as fmt
from cook.media.image import process_image
from cook.media.tiles import choose_tiles, process_tiles
from cook.types import MediaItem, MediaRef, Pack
from cook.view.pack_page import render_pack_page
from cook.view.tokens import from_ids
from tests.unit.media.media_data import config, rgb_bytes
from tests.unit.validate.packs_data import IDS, build, image_block, sequence
from tests.unit.view.dom import Element, find, parse
from tests.unit.view.geometry import check_geometry, declarations, drawn

REF = MediaRef(kind="image", ref="x.png")


def _source(width: int, height: int, seed: int) -> np.ndarray:
    """uint8 [H, W, 3]: a coarse random grid upscaled (so every tile differs) plus a ramp."""
    rng = np.random.default_rng(seed)
    coarse = Image.fromarray(rng.integers(0, 256, (6, 8, 3), dtype=np.uint8)).resize((width, height), Image.BICUBIC)
    ramp = (np.add.outer(np.arange(height), np.arange(width)) * 97 // (height + width)).astype(np.uint8)
    return np.asarray(coarse) // 2 + ramp[:, :, None]


def _pack(items: list[tuple[str, MediaItem]]) -> Pack:
    """One sequence per item: ``<img><image>xN</img>`` and a 3-token answer, with the item's real patches."""
    sizes = [list(item.size or ()) for _, item in items]
    pack = build(
        [sequence([20, *image_block(item.n_embeddings)], 3) for _, item in items],
        media=[(kind,) for kind, _ in items],
        sizes=sizes,
    )
    patches = np.concatenate([item.patches for _, item in items if item.patches is not None])
    return dataclasses.replace(pack, pixel_patches=patches)


@pytest.fixture(scope="module")
def page() -> list[Element]:
    tiles = config(image={"mode": "tiles", "max_tiles": 12})
    assert choose_tiles(800, 600, 12) == (4, 3) and choose_tiles(400, 400, 12) == (1, 1)
    (grid,) = process_tiles(REF, rgb_bytes(_source(800, 600, 0)), tiles)
    (single,) = process_tiles(REF, rgb_bytes(_source(400, 400, 1)), tiles)
    (image,) = process_image(REF, rgb_bytes(_source(320, 256, 2)), config(image={"min_patches": 256}))
    assert (grid.size, single.size, image.size) == ((13, 512, 512), (1, 512, 512), (1, 256, 320))
    pack = _pack([("tiles", grid), ("tiles", single), ("image", image)])
    elements = parse(render_pack_page(pack, fmt.pack_key(0), "shard-000000.tar", None, from_ids(IDS, 0), None))
    assert check_geometry(elements, pack) == 12 + 1
    return elements


def test_the_4x3_grid_is_drawn_in_percentages_of_the_picture_box(page: list[Element]) -> None:
    grid, single, image = drawn(page)
    assert grid.style == {"width": "2048px", "aspect-ratio": "2048/1536"}
    assert [k for k, _ in grid.tiles] == list(range(12))
    assert grid.tiles[5][1] == {"left": "25.0000%", "top": "33.3333%", "width": "25.0000%", "height": "33.3333%"}
    assert grid.tiles[11][1] == {"left": "75.0000%", "top": "66.6667%", "width": "25.0000%", "height": "33.3333%"}
    assert grid.grid == {"background-size": "0.7812% 1.0417%"}  # 128 x 96 patches
    assert grid.thumb == {"aspect-ratio": "4/3"}
    assert single.style == {"width": "512px", "aspect-ratio": "512/512"} and single.thumb is None
    assert single.tiles == [(0, {"left": "0.0000%", "top": "0.0000%", "width": "100.0000%", "height": "100.0000%"})]
    assert image.style == {"width": "320px", "aspect-ratio": "320/256"} and not image.tiles
    assert image.grid == {"background-size": "5.0000% 6.2500%"}  # 20 x 16 patches


def test_only_the_picture_box_has_a_pixel_size(page: list[Element]) -> None:
    """The picture and its overlays take the box's size (CSS), so no two of them can disagree in pixels."""
    drawn_classes = {"media", "grid", "tilegrid", "tile"}
    overlays = [e for e in page if e.tag in ("img", "span") and e.classes & drawn_classes and "chip" not in e.classes]
    assert len(overlays) == 3 + 3 + 2 + 13
    assert not [e.attrs["style"] for e in overlays if "px" in e.attrs.get("style", "")]
    assert [declarations(e)["width"] for e in find(page, "span", "pic")] == ["2048px", "512px", "320px"]
