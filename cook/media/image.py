"""Image bytes -> one dynamic-resolution ``MediaItem`` (SPEC §6, Nemotron Omni style).

    bytes -> header check (limits) -> Pillow decode -> EXIF orientation -> RGB uint8
          -> patch grid (choose_grid) -> BICUBIC resize to (grid_w*16, grid_h*16)
          -> patches uint8 [P, 768] -> one block <img><image>xN</img>, N = P / 4

**Colour.** Every Pillow mode becomes 8-bit RGB (``to_rgb``). Transparency (RGBA, LA, PA, RGBa, La,
P with a ``transparency`` entry) is composited over **white**: documents, logos and diagrams with a
transparent background are dark-on-transparent far more often than light-on-transparent. 16/32-bit
integer grey (``I;16*``, ``I``) is scaled from the 16-bit range (value / 257, clipped to [0, 65535]);
float grey (``F``) is read as [0, 1] when its maximum is at most 1, else as [0, 255] (clipped, NaN -> 0).
CMYK, YCbCr, 1, L use Pillow's conversion. Multi-frame files (GIF, TIFF) use their first frame.

**Patch grid.** ``choose_grid(height_px, width_px, min_patches, max_patches)`` returns
``(grid_h, grid_w)`` in 16 px patches:

1. native grid ``h/16 x w/16`` (fractional), ``n = (h/16)(w/16)``;
2. ``target = clamp(n, min_patches, max_patches)``, scale ``s = sqrt(target / n)`` (aspect kept);
3. round each side to the nearest even number ``>= 2`` (halves round up);
4. while ``grid_h * grid_w > max_patches``: take 2 off the side whose removal keeps the aspect ratio
   closest (in log space) to the image's, never below 2;
5. while ``grid_h * grid_w < min_patches``: add 2 to a side the same way, but only if the result
   stays ``<= max_patches``; stop when neither side can grow.

Ties prefer changing the height. ``max_patches`` and evenness always hold (``max_patches >= 4``);
``min_patches`` can be missed only when no even x even grid fits in ``[min, max]`` along the walk
(e.g. ``min = max = 1030``, not a multiple of 4), or for extreme aspect ratios, where the short side
stays at 2 patches and the long side is cut to fit ``max_patches``: max and evenness win.

Worked examples (default ``[1024, 13312]``)::

    640x480 (WxH):  native 30 x 40 = 1200, in range -> s = 1 -> grid 30 x 40 -> 1200 patches, N = 300,
                    resized to 640x480 (unchanged)
    100x100:        native 6.25 x 6.25 = 39 -> target 1024, s = 5.12 -> 32 x 32 -> 1024 patches, N = 256
    1000x200:       native 12.5 x 62.5 = 781 -> target 1024, s = 1.145 -> 14.3 x 71.6 -> 14 x 72 = 1008
                    < 1024 -> grow: 14 x 74 (aspect 5.29) beats 16 x 72 (4.5) for the image's 5.0
                    -> 1036 patches, N = 259, resized to 1184x224

**Patch layout.** Patch ``k = row * grid_w + col`` (raster order) holds the 16x16 block at
``(row*16, col*16)``, flattened channel-major: ``patch[c*256 + y*16 + x] = pixel[row*16+y, col*16+x, c]``.
"""

from __future__ import annotations

import math
from typing import Final

import numpy as np
from PIL import Image, ImageOps

from cook import format as fmt
from cook.config import MediaConfig
from cook.errors import Rejected, RejectReason
from cook.media.limits import PIL_DECODE_ERRORS, open_image_header, short_error
from cook.types import MediaItem, MediaRef, PlaceholderBlock

RESAMPLE: Final = Image.Resampling.BICUBIC
BACKGROUND: Final = (255, 255, 255)  # transparency is composited over white
_ALPHA_MODES: Final = frozenset({"RGBA", "RGBa", "LA", "La", "PA"})


def process_image(ref: MediaRef, data: bytes, config: MediaConfig) -> tuple[MediaItem, ...]:
    """Image bytes -> ``(MediaItem,)`` with ``visual_kind="image"``, size ``(1, H, W)``, N = P / 4."""
    image = decode_image(data, config.image.max_pixels)
    grid_h, grid_w = choose_grid(image.height, image.width, config.image.min_patches, config.image.max_patches)
    pixels = resize_rgb(image, grid_h, grid_w)  # uint8 [H, W, 3]
    patches = patchify(pixels)  # uint8 [grid_h*grid_w, 768]
    height_px, width_px = pixels.shape[:2]
    count = fmt.image_embeddings(height_px, width_px)
    block = PlaceholderBlock(start=fmt.IMG_START, token=fmt.IMAGE_TOKEN, count=count, end=fmt.IMG_END)
    return (
        MediaItem(
            kind="image",
            blocks=(block,),
            patches=patches,
            size=(1, height_px, width_px),
            visual_kind="image",
        ),
    )


def decode_image(data: bytes, max_pixels: int) -> Image.Image:
    """Bytes -> upright 8-bit RGB Pillow image; the size is checked from the header before decoding."""
    image = open_image_header(data, max_pixels)
    try:
        image.load()
        ImageOps.exif_transpose(image, in_place=True)
        return to_rgb(image)
    except Rejected:
        raise
    except PIL_DECODE_ERRORS as err:
        raise Rejected(RejectReason.MEDIA_DECODE, f"image undecodable: {short_error(err)}") from None


def to_rgb(image: Image.Image) -> Image.Image:
    """Any Pillow mode -> mode ``RGB`` uint8 (rules in the module docstring)."""
    mode = image.mode
    if mode == "RGB":
        return image
    if mode.startswith("I;16") or mode == "I":
        grey = np.clip(np.asarray(image, dtype=np.float64), 0, 65535) / 257.0  # float64 [H, W]
        return Image.fromarray(np.rint(grey).astype(np.uint8)).convert("RGB")
    if mode == "F":
        grey = np.nan_to_num(np.asarray(image, dtype=np.float64), nan=0.0, posinf=255.0, neginf=0.0)
        if grey.size and grey.max() <= 1.0:
            grey = grey * 255.0
        return Image.fromarray(np.rint(np.clip(grey, 0, 255)).astype(np.uint8)).convert("RGB")
    if mode in _ALPHA_MODES or (mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (*BACKGROUND, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    try:
        return image.convert("RGB")
    except ValueError as err:
        raise Rejected(RejectReason.MEDIA_UNSUPPORTED, f"image mode {mode!r}: {short_error(err)}") from None


def _round_even(value: float) -> int:
    """Nearest even integer >= 2 (halves round up): 27.7 -> 28, 29.0 -> 30, 0.3 -> 2."""
    return max(2, 2 * math.floor(value / 2 + 0.5))


def _closest(options: list[tuple[int, int]], log_aspect: float) -> tuple[int, int]:
    return min(options, key=lambda hw: abs(math.log(hw[1] / hw[0]) - log_aspect))


def choose_grid(height_px: int, width_px: int, min_patches: int, max_patches: int) -> tuple[int, int]:
    """``(grid_h, grid_w)``: both even, product in ``[min_patches, max_patches]`` where possible.

    >>> choose_grid(480, 640, 1024, 13312), choose_grid(100, 100, 1024, 13312)
    ((30, 40), (32, 32))
    """
    native_h, native_w = height_px / fmt.PATCH_SIZE, width_px / fmt.PATCH_SIZE
    native = native_h * native_w
    target = min(max(native, float(min_patches)), float(max_patches))
    scale = math.sqrt(target / native)
    grid_h, grid_w = _round_even(native_h * scale), _round_even(native_w * scale)
    log_aspect = math.log(width_px / height_px)
    while grid_h * grid_w > max_patches:
        shrink = [(h, w) for h, w in ((grid_h - 2, grid_w), (grid_h, grid_w - 2)) if h >= 2 and w >= 2]
        grid_h, grid_w = _closest(shrink, log_aspect)
    while grid_h * grid_w < min_patches:
        grow = [(h, w) for h, w in ((grid_h + 2, grid_w), (grid_h, grid_w + 2)) if h * w <= max_patches]
        if not grow:
            break
        grid_h, grid_w = _closest(grow, log_aspect)
    return grid_h, grid_w


def resize_rgb(image: Image.Image, grid_h: int, grid_w: int) -> np.ndarray:
    """RGB image -> uint8 [grid_h*16, grid_w*16, 3], BICUBIC (antialiased when shrinking)."""
    size = (grid_w * fmt.PATCH_SIZE, grid_h * fmt.PATCH_SIZE)
    if image.size != size:
        image = image.resize(size, RESAMPLE)
    return np.asarray(image, dtype=np.uint8)


def patchify(pixels: np.ndarray) -> np.ndarray:
    """uint8 [H, W, 3] (H, W multiples of 16) -> uint8 [(H/16)(W/16), 768], raster order, C x 16 x 16."""
    p = fmt.PATCH_SIZE
    height_px, width_px, channels = pixels.shape
    grid = pixels.reshape(height_px // p, p, width_px // p, p, channels)  # [gh, 16, gw, 16, C]
    grid = grid.transpose(0, 2, 4, 1, 3)  # [gh, gw, C, 16, 16]
    return np.ascontiguousarray(grid.reshape(-1, channels * p * p))
