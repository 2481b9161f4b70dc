"""Test oracles for the image path: the plain NumPy/Pillow forms that cook's faster code must equal."""

from __future__ import annotations

import numpy as np
from PIL import Image

from cook import format as fmt
from cook.media.image import load_rgb
from cook.media.limits import open_image_header


def decode_image(data: bytes, max_pixels: int) -> Image.Image:
    """Bytes -> upright 8-bit RGB Pillow image at full size; the size is checked from the header first."""
    return load_rgb(open_image_header(data, max_pixels))


def patchify(pixels: np.ndarray) -> np.ndarray:
    """uint8 [H, W, 3] (H, W multiples of 16) -> uint8 [(H/16)(W/16), 768], raster order, C x 16 x 16."""
    p = fmt.PATCH_SIZE
    height_px, width_px, channels = pixels.shape
    grid = pixels.reshape(height_px // p, p, width_px // p, p, channels)  # [gh, 16, gw, 16, C]
    grid = grid.transpose(0, 2, 4, 1, 3)  # [gh, gw, C, 16, 16]
    return np.ascontiguousarray(grid.reshape(-1, channels * p * p))
