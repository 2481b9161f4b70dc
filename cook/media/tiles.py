"""Image bytes -> one tiled ``MediaItem`` (SPEC §6, Nemotron Nano VL v2 / InternVL style).

    bytes -> header check -> grid of 512 px tiles (from the upright header size) -> decode (same
          checks, colour rules and JPEG draft mode as image.py) -> BICUBIC resize to (cols*512, rows*512)
          -> tiles in raster order (+ 512x512 thumbnail of the whole image when there is more than one
          tile) -> 1024 patches per tile
          -> one block <img><image>xN</img>, N = 256 x tiles (thumbnail included)

**Tile grid** (``choose_tiles``, InternVL's ``dynamic_preprocess``/``find_closest_aspect_ratio``):
the candidates are every ``(cols, rows)`` with ``cols * rows <= max_tiles``, visited in increasing area
``cols * rows`` (then cols, for determinism). The best is the one whose ``cols / rows`` is closest to the
image's ``width / height``; on an exact tie a later (larger) candidate replaces the best only when the
image has more than half that candidate's pixels (``w * h > 0.5 * 512^2 * cols * rows``), i.e. a grid
is only enlarged when the image has enough pixels to fill it.

Worked examples (``max_tiles = 12``)::

    1024x512: aspect 2 -> (2, 1) exact; (4, 2) ties but 524288 <= 0.5*512^2*8 -> 2x1 + thumbnail = 3 tiles,
              N = 768, size (3, 512, 512)
    4096x4096: aspect 1 -> (1, 1) first, then (2, 2) and (3, 3) tie and the image has the pixels -> 3x3
              + thumbnail = 10 tiles, N = 2560
    300x200:  aspect 1.5 -> (3, 2) exact -> 6 tiles + thumbnail = 7, N = 1792

Patches of each tile follow image.py's layout (raster order, C x 16 x 16); tiles are concatenated in
order, the thumbnail last: ``patches`` is uint8 [tiles * 1024, 768].
"""

from __future__ import annotations

import numpy as np

from cook import format as fmt
from cook.config import MediaConfig
from cook.frames import patchify_image, patchify_planes, rgb_planes
from cook.media.image import RESAMPLE, load_rgb, upright_size, visual_item
from cook.media.limits import open_image_header
from cook.types import MediaItem, MediaRef


def process_tiles(ref: MediaRef, data: bytes, config: MediaConfig) -> tuple[MediaItem, ...]:
    """Image bytes -> ``(MediaItem,)`` with ``visual_kind="tiles"``, size ``(tiles, 512, 512)``."""
    header = open_image_header(data, config.image.max_pixels)
    cols, rows = choose_tiles(*upright_size(header), config.image.max_tiles)
    tile = fmt.TILE_SIZE
    image = load_rgb(header, draft_to=(cols * tile, rows * tile))
    planes = rgb_planes(image.resize((cols * tile, rows * tile), RESAMPLE))  # uint8 [H, W] each
    tiles = [
        patchify_planes([plane[r * tile : (r + 1) * tile, c * tile : (c + 1) * tile] for plane in planes])
        for r in range(rows)
        for c in range(cols)
    ]  # uint8 [1024, 768] each
    if len(tiles) > 1:
        tiles.append(patchify_image(image.resize((tile, tile), RESAMPLE)))
    patches = np.concatenate(tiles)  # uint8 [tiles*1024, 768]
    return (visual_item(patches, fmt.tiles_embeddings(len(tiles)), (len(tiles), tile, tile), "tiles"),)


def choose_tiles(width_px: int, height_px: int, max_tiles: int) -> tuple[int, int]:
    """``(cols, rows)`` of 512 px tiles, ``cols * rows <= max_tiles`` (rule in the module docstring).

    >>> choose_tiles(1024, 512, 12), choose_tiles(4096, 4096, 12), choose_tiles(512, 512, 12)
    ((2, 1), (3, 3), (1, 1))
    """
    aspect = width_px / height_px
    area = width_px * height_px
    candidates = sorted(
        ((cols, rows) for cols in range(1, max_tiles + 1) for rows in range(1, max_tiles // cols + 1)),
        key=lambda cr: (cr[0] * cr[1], cr[0]),
    )
    best, best_diff = (1, 1), float("inf")
    for cols, rows in candidates:
        diff = abs(aspect - cols / rows)
        if diff < best_diff:
            best, best_diff = (cols, rows), diff
        elif diff == best_diff and area > 0.5 * fmt.TILE_SIZE * fmt.TILE_SIZE * cols * rows:
            best = (cols, rows)
    return best
