"""Stored media of a pack -> pictures: images and tiles reassembled from ``pixel_patches``, video frame
strips, audio log-mel maps; PNG bytes and ``data:`` URIs for the page.

    pixel_patches uint8 [P, 768] + media_sizes int32 [M, 3] -> VisualItem per row (placeholder order)
    VisualItem -> frames uint8 [frames, H, W, 3] (``frames.unpatchify``, the exact inverse of ``frames.patchify_image``)
    audio_features float16 [C, F, 128] + audio_lengths -> one palette picture per clip

**Patch order** (SPEC §6, ``cook/media/image.py``): patch ``k = row * grid_w + col`` holds the 16x16 block
at ``(row*16, col*16)``, flattened channel-major ``patch[c*256 + y*16 + x] = pixel[row*16+y, col*16+x, c]``;
the patches of a visual item are its frames (video) or tiles (tiles mode, thumbnail last) one after another,
and items follow each other in ``media_sizes`` order. So ``unpatchify(patchify(a)) == a`` bit for bit, and
the PNG of an image holds exactly the stored pixels, at the stored size.

**Tiles** store only the tile count: the grid ``cols x rows`` (``cols * rows = tiles - 1``, the thumbnail
last) is found back by downscaling every candidate arrangement and keeping the one closest to the stored
thumbnail, which cook made from the whole image (``tile_layout``). A single tile has no thumbnail.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import numpy as np
from PIL import Image

from cook import format as fmt
from cook.frames import unpatchify
from cook.packfiles import VISUAL_KINDS
from cook.types import Pack

PNG_COMPRESS_LEVEL: Final = 3  # zlib level: about 3x faster than the default 6, within ~10% in size
FRAME_MIME: Final = {"png": "image/png", "jpeg": "image/jpeg"}  # stored frame codec -> its data URI type
FRAME_GAP_PX: Final = 4  # white columns between the frames of a video strip
MEL_MARK_PX: Final = 2  # red columns that mark the end of a clip's valid frames
PREVIEW_AREA_PX: Final = 320 * 320  # a preview (picture over the page budget) has at most this many pixels
PREVIEW_QUALITY: Final = 80
_COMPARE_PX: Final = 64  # tiles: arrangements are compared to the thumbnail at this size


@dataclass(frozen=True, slots=True)
class VisualItem:
    """One ``media_sizes`` row: its kind and where its patches are."""

    index: int  # row of media_sizes
    kind: str  # image | video | tiles
    frames: int  # frames of a video, tiles in tiles mode, 1 for an image
    height_px: int
    width_px: int
    first_patch: int
    first_frame: int = 0  # of the pack's visual frames (stored frames: member frame.<first_frame>)

    @property
    def patches_per_frame(self) -> int:
        return fmt.frame_patches(self.height_px, self.width_px)


def visual_items(pack: Pack) -> list[VisualItem]:
    """Every visual item of the pack in placeholder order (meta.json kinds matched to media_sizes rows)."""
    kinds = [kind for s in pack.sequences for kind in s.media if kind in VISUAL_KINDS]
    sizes = pack.media_sizes.tolist() if pack.media_sizes is not None else []
    items, first, first_frame = [], 0, 0
    for row, (kind, (frames, height_px, width_px)) in enumerate(zip(kinds, sizes, strict=False)):
        item = VisualItem(row, kind, frames, height_px, width_px, first, first_frame)
        items.append(item)
        first += frames * item.patches_per_frame
        first_frame += frames
    return items


def item_frames(pack: Pack, item: VisualItem) -> np.ndarray:
    """uint8 [frames, H, W, 3]: the item's frames (tiles, thumbnail last) from the pack's patches."""
    assert pack.pixel_patches is not None
    end = item.first_patch + item.frames * item.patches_per_frame
    frames = pack.pixel_patches[item.first_patch : end].reshape(item.frames, item.patches_per_frame, fmt.PATCH_VALUES)
    return np.stack([unpatchify(frame, item.height_px, item.width_px) for frame in frames])


def _arrangements(tiles: int) -> list[tuple[int, int]]:
    """``(cols, rows)`` with ``cols * rows == tiles``, squarest first."""
    found = [(c, tiles // c) for c in range(1, tiles + 1) if tiles % c == 0]
    return sorted(found, key=lambda cr: (abs(math.log(cr[0] / cr[1])), cr[0]))


def assemble_tiles(tiles: np.ndarray, cols: int, rows: int) -> np.ndarray:
    """uint8 [cols*rows, S, S, 3] in raster order -> uint8 [rows*S, cols*S, 3]."""
    size = tiles.shape[1]
    grid = tiles[: cols * rows].reshape(rows, cols, size, size, fmt.CHANNELS)
    return np.ascontiguousarray(grid.transpose(0, 2, 1, 3, 4).reshape(rows * size, cols * size, fmt.CHANNELS))


def tile_layout(tiles: np.ndarray) -> tuple[int, int]:
    """``(cols, rows)`` of a tiles item's grid (its frames: the tiles, then the thumbnail when > 1)."""
    if tiles.shape[0] == 1:
        return 1, 1
    thumbnail = Image.fromarray(tiles[-1]).resize((_COMPARE_PX, _COMPARE_PX), Image.Resampling.BOX)
    target = np.asarray(thumbnail, dtype=np.int16)

    def distance(cols_rows: tuple[int, int]) -> float:
        whole = Image.fromarray(assemble_tiles(tiles, *cols_rows))
        small = np.asarray(whole.resize((_COMPARE_PX, _COMPARE_PX), Image.Resampling.BOX), dtype=np.int16)
        return float(np.abs(small - target).mean())

    return min(_arrangements(tiles.shape[0] - 1), key=distance)


def video_strip(frames: np.ndarray) -> np.ndarray:
    """uint8 [F, H, W, 3] -> uint8 [H, F*W + (F-1)*gap, 3]: frame i at columns ``i*(W+gap)``, white gaps."""
    count, height_px, width_px, _ = frames.shape
    strip = np.full((height_px, count * width_px + (count - 1) * FRAME_GAP_PX, fmt.CHANNELS), 255, np.uint8)
    for i in range(count):
        x = i * (width_px + FRAME_GAP_PX)
        strip[:, x : x + width_px] = frames[i]
    return strip


def _mel_palette() -> list[int]:
    """256 RGB entries: 0-253 a dark-blue -> teal -> yellow ramp (no red in it), 254 padding grey, 255 the red mark."""
    anchors = np.array([[20, 10, 60], [40, 70, 140], [30, 150, 140], [120, 200, 80], [250, 240, 110]], np.float64)
    positions = np.linspace(0.0, 1.0, anchors.shape[0])
    ramp = np.stack([np.interp(np.linspace(0.0, 1.0, 254), positions, anchors[:, c]) for c in range(3)], axis=1)
    return [*np.rint(ramp).astype(np.uint8).ravel().tolist(), 200, 200, 200, 240, 0, 0]


_PALETTE: Final = _mel_palette()


def mel_picture(features: np.ndarray, valid_frames: int) -> Image.Image:
    """float16 [F, 128] log-mel of one clip -> palette image, 128 px high and F + mark wide: time left to right, low
    bins at the bottom; the valid frames scaled to the ramp by their 1st-99th percentile, then a red
    ``MEL_MARK_PX`` mark, then the padding frames (``F - valid_frames``) in grey."""
    valid = features[:valid_frames].astype(np.float32)  # float32 [L, 128]
    lo, hi = np.percentile(valid, (1, 99)) if valid.size else (0.0, 1.0)
    scaled = np.clip((valid - lo) / max(float(hi - lo), 1e-6), 0.0, 1.0)
    index = np.rint(scaled * 253).astype(np.uint8).T[::-1]  # uint8 [128, L], bin 127 on top
    padding = features.shape[0] - valid_frames
    picture = np.concatenate(
        [index, np.full((fmt.MEL_BINS, MEL_MARK_PX), 255, np.uint8), np.full((fmt.MEL_BINS, padding), 254, np.uint8)],
        axis=1,
    )
    image = Image.fromarray(np.ascontiguousarray(picture))  # mode L; putpalette makes it P
    image.putpalette(_PALETTE)
    return image


def png_bytes(picture: np.ndarray | Image.Image) -> bytes:
    """uint8 [H, W, 3] (or a Pillow image) -> lossless PNG bytes."""
    image = picture if isinstance(picture, Image.Image) else Image.fromarray(picture)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    return buffer.getvalue()


def preview_bytes(pixels: np.ndarray) -> bytes:
    """uint8 [H, W, 3] -> a JPEG (quality ``PREVIEW_QUALITY``) scaled down to at most ``PREVIEW_AREA_PX``
    pixels, aspect kept: the stand-in for a picture whose lossless PNG does not fit the page budget."""
    image = Image.fromarray(pixels)
    scale = min(1.0, math.sqrt(PREVIEW_AREA_PX / (image.width * image.height)))
    if scale < 1.0:
        size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
        image = image.resize(size, Image.Resampling.BICUBIC, reducing_gap=2.0)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=PREVIEW_QUALITY)
    return buffer.getvalue()


def stored_frames(members: Mapping[str, bytes | memoryview]) -> list[tuple[str, bytes]]:
    """``(MIME type, bytes)`` of a pack's stored frame members (png/jpeg storage), in frame order."""
    found = sorted((p[0], p[1], name) for name in members if (p := fmt.parse_frame_member(name)) is not None)
    return [(FRAME_MIME[codec], bytes(members[name])) for _, codec, name in found]


def data_uri(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode("ascii")
