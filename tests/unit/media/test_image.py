"""Dynamic-resolution images: grid choice, patch layout, colour modes, EXIF orientation, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from cook import format as fmt
from cook.errors import Rejected, RejectReason
from cook.media import process_media
from cook.media.image import choose_grid, to_rgb
from cook.types import MediaRef

from .media_data import config, image_bytes, rgb_bytes
from .oracles import decode_image, patchify

IMAGE = MediaRef(kind="image", ref="x.png")


@pytest.mark.parametrize(
    ("width", "height", "grid"),
    [
        (640, 480, (30, 40)),  # in range: unchanged
        (512, 512, (32, 32)),  # exactly min_patches
        (100, 100, (32, 32)),  # upscaled to min_patches
        (1, 1, (32, 32)),
        (1000, 200, (14, 74)),  # the module docstring's worked example
        (6000, 4000, (94, 140)),  # downscaled under max_patches
        (200_000, 16, (2, 6656)),  # extreme aspect: max and evenness win
    ],
)
def test_grid_for_known_sizes(width: int, height: int, grid: tuple[int, int]) -> None:
    assert choose_grid(height, width, 1024, 13312) == grid


@settings(max_examples=300, deadline=None)
@given(
    width=st.integers(1, 30_000),
    height=st.integers(1, 30_000),
    min_patches=st.integers(4, 4000),
    extra=st.integers(0, 20_000),
)
def test_grid_properties(width: int, height: int, min_patches: int, extra: int) -> None:
    max_patches = min_patches + extra
    grid_h, grid_w = choose_grid(height, width, min_patches, max_patches)
    assert grid_h % 2 == 0 and grid_w % 2 == 0 and grid_h >= 2 and grid_w >= 2
    assert grid_h * grid_w <= max_patches
    if max_patches >= 2 * min_patches:
        assert grid_h * grid_w >= min_patches
    aspect = width / height
    # both sides >= 8 patches and room in [min, max]: aspect kept closely (with min == max the walk may
    # have to stretch, e.g. 14x40 at exactly 256 patches -> 8 x 32, the closest even grid of that area)
    if 0.25 <= aspect <= 4 and min_patches >= 256 and max_patches >= 2 * min_patches:
        assert abs(math.log(grid_w / grid_h) - math.log(aspect)) < 0.3


def test_process_640x480() -> None:
    pixels = np.random.default_rng(0).integers(0, 256, (480, 640, 3), dtype=np.uint8)
    (item,) = process_media(IMAGE, rgb_bytes(pixels), config())
    assert item.kind == "image" and item.visual_kind == "image"
    assert item.size == (1, 480, 640)
    assert item.patches is not None and item.patches.dtype == np.uint8 and item.patches.shape == (1200, 768)
    assert item.n_embeddings == 300 == item.n_patches // 4 == fmt.image_embeddings(480, 640)
    (block,) = item.blocks
    assert (block.start, block.token, block.end, block.prefix) == (fmt.IMG_START, fmt.IMAGE_TOKEN, fmt.IMG_END, "")
    # no resize at a native in-range grid: the patches are the pixels
    np.testing.assert_array_equal(item.patches, patchify(pixels))


def test_patch_layout_raster_order_channel_major() -> None:
    grid = 32  # 512x512: exactly min_patches, so no resize
    pixels = np.zeros((grid * 16, grid * 16, 3), np.uint8)
    for row in range(grid):
        for col in range(grid):
            pixels[row * 16 : (row + 1) * 16, col * 16 : (col + 1) * 16] = (row, col, (row * grid + col) % 256)
    inner = np.arange(256, dtype=np.uint8).reshape(16, 16)  # y*16 + x, in patch (1, 2), red channel
    pixels[16:32, 32:48, 0] = inner
    (item,) = process_media(IMAGE, rgb_bytes(pixels), config())
    patches = item.patches
    assert patches is not None and patches.shape == (1024, 768)
    for k in (0, 1, 31, 32, 33, 500, 1023):
        row, col = divmod(k, grid)
        if (row, col) == (1, 2):
            continue
        np.testing.assert_array_equal(patches[k, :256], row)
        np.testing.assert_array_equal(patches[k, 256:512], col)
        np.testing.assert_array_equal(patches[k, 512:], k % 256)
    k = 1 * grid + 2
    np.testing.assert_array_equal(patches[k, :256], np.arange(256))  # c*256 + y*16 + x
    np.testing.assert_array_equal(patches[k, 256:512], 2)


def test_resized_image_keeps_grid_and_content() -> None:
    pixels = np.zeros((200, 1000, 3), np.uint8)
    pixels[:, :500] = (255, 0, 0)
    (item,) = process_media(IMAGE, rgb_bytes(pixels), config())
    assert item.size == (1, 14 * 16, 74 * 16) and item.n_patches == 1036 and item.n_embeddings == 259
    assert item.patches is not None
    assert item.patches[0, :256].min() == 255 and item.patches[73, :256].max() == 0  # left red, right black


def _alpha_image(mode: str) -> Image.Image:
    rgba = np.zeros((4, 4, 4), np.uint8)
    rgba[:2] = (200, 10, 10, 255)  # top: opaque red
    image = Image.fromarray(rgba)  # bottom: fully transparent black
    return image if mode == "RGBA" else image.convert(mode)


@pytest.mark.parametrize(
    ("image", "expected_top", "expected_bottom"),
    [
        (_alpha_image("RGBA"), (200, 10, 10), (255, 255, 255)),
        (_alpha_image("LA"), (67, 67, 67), (255, 255, 255)),
        (Image.new("L", (4, 4), 77), (77, 77, 77), (77, 77, 77)),
        (Image.new("1", (4, 4), 1), (255, 255, 255), (255, 255, 255)),
        (Image.new("CMYK", (4, 4), (0, 255, 255, 0)), (255, 0, 0), (255, 0, 0)),
        (Image.fromarray(np.full((4, 4), 257 * 100, np.uint16)), (100, 100, 100), (100, 100, 100)),
        (Image.fromarray(np.full((4, 4), 65535, np.int32)), (255, 255, 255), (255, 255, 255)),
        (Image.fromarray(np.full((4, 4), 0.5, np.float32)), (128, 128, 128), (128, 128, 128)),
        (Image.fromarray(np.full((4, 4), 300.0, np.float32)), (255, 255, 255), (255, 255, 255)),
    ],
    ids=["RGBA", "LA", "L", "1", "CMYK", "I;16", "I", "F01", "F255"],
)
def test_to_rgb_modes(image: Image.Image, expected_top: tuple, expected_bottom: tuple) -> None:
    rgb = np.asarray(to_rgb(image))
    assert rgb.dtype == np.uint8 and rgb.shape == (4, 4, 3)
    assert tuple(rgb[0, 0]) == expected_top and tuple(rgb[3, 3]) == expected_bottom


def test_palette_with_transparency_over_white() -> None:
    image = Image.new("P", (4, 4), 0)
    image.putpalette([0, 0, 255] + [0, 255, 0] * 255)
    image.putpixel((0, 0), 1)
    data = image_bytes(image, "PNG", transparency=0)  # index 0 (blue) is transparent
    rgb = np.asarray(decode_image(data, 10**6))
    assert tuple(rgb[0, 0]) == (0, 255, 0) and tuple(rgb[3, 3]) == (255, 255, 255)


@pytest.mark.parametrize(
    ("mode", "fmt_name"),
    [
        ("RGBA", "PNG"),
        ("LA", "PNG"),
        ("P", "PNG"),
        ("L", "PNG"),
        ("I;16", "PNG"),
        ("I", "TIFF"),
        ("F", "TIFF"),
        ("CMYK", "JPEG"),
        ("CMYK", "TIFF"),
        ("1", "PNG"),
        ("RGB", "WEBP"),
        ("RGB", "GIF"),
    ],
)
def test_every_mode_round_trips_to_a_patch_grid(mode: str, fmt_name: str) -> None:
    base = Image.fromarray(np.random.default_rng(1).integers(0, 256, (48, 64, 3), dtype=np.uint8))
    image = base.convert(mode) if mode not in ("I;16", "I", "F") else base.convert("L").convert(mode)
    (item,) = process_media(IMAGE, image_bytes(image, fmt_name), config())
    assert item.patches is not None and item.patches.dtype == np.uint8
    assert item.size == (1, 28 * 16, 38 * 16) and item.n_patches == 28 * 38  # 28x36=1008 < 1024: grown


def test_exif_orientation_is_applied() -> None:
    pixels = np.zeros((480, 640, 3), np.uint8)
    pixels[:, :320] = (255, 0, 0)  # left half red
    pixels[:, 320:] = (0, 0, 255)  # right half blue
    exif = Image.Exif()
    exif[0x0112] = 6  # stored image must be rotated 90 degrees clockwise for display
    data = image_bytes(Image.fromarray(pixels), "JPEG", exif=exif.tobytes(), quality=95)
    upright = np.asarray(decode_image(data, 10**7))
    assert upright.shape == (640, 480, 3)
    assert upright[10, 240, 0] > 200 and upright[10, 240, 2] < 60  # left half went to the top
    assert upright[630, 240, 2] > 200 and upright[630, 240, 0] < 60
    (item,) = process_media(IMAGE, data, config())
    assert item.size == (1, 640, 480) and item.n_patches == 40 * 30


def test_truncated_image_is_a_decode_error() -> None:
    data = rgb_bytes(np.random.default_rng(2).integers(0, 256, (480, 640, 3), dtype=np.uint8))
    with pytest.raises(Rejected) as err:
        process_media(IMAGE, data[: len(data) // 2], config())
    assert err.value.reason == RejectReason.MEDIA_DECODE


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", RejectReason.MEDIA_DECODE),
        (b"\x00garbage" * 50, RejectReason.MEDIA_DECODE),
        (b"%PDF-1.7\n...", RejectReason.MEDIA_UNSUPPORTED),
        (b"<svg xmlns='http://www.w3.org/2000/svg'/>", RejectReason.MEDIA_UNSUPPORTED),
        (b"\x00\x00\x00\x18ftypmp42" + b"\0" * 40, RejectReason.MEDIA_UNSUPPORTED),
    ],
    ids=["empty", "garbage", "pdf", "svg", "mp4"],
)
def test_unreadable_images(data: bytes, reason: RejectReason) -> None:
    with pytest.raises(Rejected) as err:
        process_media(IMAGE, data, config())
    assert err.value.reason == reason


def test_process_media_checks_bytes_and_kind() -> None:
    data = rgb_bytes(np.zeros((16, 16, 3), np.uint8))
    with pytest.raises(Rejected) as err:
        process_media(IMAGE, data, config(max_media_bytes=len(data) - 1))
    assert err.value.reason == RejectReason.MEDIA_LIMIT and "media.max_media_bytes" in err.value.detail
    with pytest.raises(Rejected) as err:
        process_media(MediaRef(kind="pdf", ref="x.pdf"), data, config())  # type: ignore[arg-type]
    assert err.value.reason == RejectReason.MEDIA_UNSUPPORTED
