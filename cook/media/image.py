"""Image bytes -> one dynamic-resolution ``MediaItem`` (SPEC §6, Nemotron Omni style).

    bytes -> header check (limits) -> patch grid (choose_grid, from the upright header size)
          -> Pillow decode (JPEG draft when shrinking >= 2x) -> EXIF orientation -> RGB uint8
          -> BICUBIC resize to (grid_w*16, grid_h*16) -> patches uint8 [P, 768]
          -> one block <img><image>xN</img>, N = P / 4

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

**Speed.** The grid is chosen from the header (EXIF orientation included) before any pixel is decoded,
so a JPEG that shrinks by 2x or more is decoded in draft mode (``Image.draft``: libjpeg scales by 1/2,
1/4 or 1/8 inside the IDCT, keeping the image at least as large as the target), then resized once.
Draft mode changes pixel values slightly against a full decode + resize: the stored patches are the
draft decode resized (tests/unit/media/test_table.py pins it).
Patches are cut from Pillow's own channel split (``Image.split``, read zero-copy) with one copy of
16-byte runs (``patchify_planes``), instead of de-interleaving RGB pixels in NumPy (2x slower).
"""

from __future__ import annotations

import math
from typing import Final, Literal

import numpy as np
from PIL import Image, ImageOps

from cook import format as fmt
from cook.config import MediaConfig
from cook.errors import Rejected, RejectReason
from cook.frames import patchify_image
from cook.media.limits import PIL_DECODE_ERRORS, open_image_header, short_error
from cook.types import MediaItem, MediaRef, PlaceholderBlock

RESAMPLE: Final = Image.Resampling.BICUBIC
BACKGROUND: Final = (255, 255, 255)  # transparency is composited over white
_ALPHA_MODES: Final = frozenset({"RGBA", "RGBa", "LA", "La", "PA"})
_EXIF_ORIENTATION: Final = 0x0112
_TRANSPOSED: Final = frozenset({5, 6, 7, 8})  # EXIF orientations that swap width and height


def process_image(ref: MediaRef, data: bytes, config: MediaConfig) -> tuple[MediaItem, ...]:
    """Image bytes -> ``(MediaItem,)`` with ``visual_kind="image"``, size ``(1, H, W)``, N = P / 4."""
    header = open_image_header(data, config.image.max_pixels)
    width_px, height_px = upright_size(header)
    grid_h, grid_w = choose_grid(height_px, width_px, config.image.min_patches, config.image.max_patches)
    size = (grid_w * fmt.PATCH_SIZE, grid_h * fmt.PATCH_SIZE)  # (W, H)
    image = load_rgb(header, draft_to=size)
    if image.size != size:
        image = image.resize(size, RESAMPLE)
    patches = patchify_image(image)  # uint8 [grid_h*grid_w, 768]
    return (visual_item(patches, fmt.image_embeddings(size[1], size[0]), (1, size[1], size[0]), "image"),)


def upright_size(image: Image.Image) -> tuple[int, int]:
    """``(width, height)`` after EXIF orientation, without decoding a JPEG (other formats may load)."""
    try:
        orientation = image.getexif().get(_EXIF_ORIENTATION, 1)
    except PIL_DECODE_ERRORS as err:
        raise Rejected(RejectReason.MEDIA_DECODE, f"image undecodable: {short_error(err)}") from None
    width, height = image.size
    return (height, width) if orientation in _TRANSPOSED else (width, height)


def load_rgb(image: Image.Image, draft_to: tuple[int, int] | None = None) -> Image.Image:
    """Decode a header-checked image -> upright 8-bit RGB.

    ``draft_to`` (upright ``(W, H)``, the size the caller resizes to next) lets a JPEG decode at 1/2,
    1/4 or 1/8 scale when the result stays at least that large.

    Only Pillow's own calls are guarded (``PIL_DECODE_ERRORS`` -> ``media_decode``): an exception
    from cook's code (``to_rgb``'s arithmetic) is a bug and propagates.
    """
    try:
        if draft_to is not None and image.format == "JPEG":
            width, height = draft_to
            transposed = image.getexif().get(_EXIF_ORIENTATION, 1) in _TRANSPOSED
            image.draft(None, (height, width) if transposed else (width, height))
        image.load()
        ImageOps.exif_transpose(image, in_place=True)
    except PIL_DECODE_ERRORS as err:
        raise Rejected(RejectReason.MEDIA_DECODE, f"image undecodable: {short_error(err)}") from None
    return to_rgb(image)


def to_rgb(image: Image.Image) -> Image.Image:
    """Any Pillow mode of a loaded image -> mode ``RGB`` uint8 (rules in the module docstring)."""
    mode = image.mode
    if mode == "RGB":
        return image
    if mode.startswith("I;16") or mode == "I":
        grey = np.clip(_pixels(image), 0, 65535) / 257.0  # float64 [H, W]
        return Image.fromarray(np.rint(grey).astype(np.uint8)).convert("RGB")
    if mode == "F":
        grey = np.nan_to_num(_pixels(image), nan=0.0, posinf=255.0, neginf=0.0)  # float64 [H, W]
        if grey.size and grey.max() <= 1.0:
            grey = grey * 255.0
        return Image.fromarray(np.rint(np.clip(grey, 0, 255)).astype(np.uint8)).convert("RGB")
    if mode in _ALPHA_MODES or (mode == "P" and "transparency" in image.info):
        rgba = _convert(image, "RGBA")
        background = Image.new("RGBA", rgba.size, (*BACKGROUND, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return _convert(image, "RGB")


def _convert(image: Image.Image, mode: str) -> Image.Image:
    """Pillow's ``convert``: a conversion it refuses (``ValueError``) is ``media_unsupported``, any
    other failure on the file's data (a bad palette, transparency entry) ``media_decode``."""
    try:
        return image.convert(mode)
    except ValueError as err:
        raise Rejected(RejectReason.MEDIA_UNSUPPORTED, f"image mode {image.mode!r}: {short_error(err)}") from None
    except PIL_DECODE_ERRORS as err:
        raise Rejected(RejectReason.MEDIA_DECODE, f"image mode {image.mode!r}: {short_error(err)}") from None


def _pixels(image: Image.Image) -> np.ndarray:
    """A single-band integer or float image -> float64 [H, W] through Pillow's array interface."""
    try:
        return np.asarray(image, dtype=np.float64)
    except PIL_DECODE_ERRORS as err:
        raise Rejected(RejectReason.MEDIA_DECODE, f"image mode {image.mode!r}: {short_error(err)}") from None


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


def visual_item(
    patches: np.ndarray, count: int, size: tuple[int, int, int], visual_kind: Literal["image", "tiles"]
) -> MediaItem:
    """One still-image item: its uint8 patches ``[P, 768]`` and one ``<img><image>x count</img>`` block."""
    block = PlaceholderBlock(start=fmt.IMG_START, token=fmt.IMAGE_TOKEN, count=count, end=fmt.IMG_END)
    return MediaItem(kind="image", blocks=(block,), patches=patches, size=size, visual_kind=visual_kind)
