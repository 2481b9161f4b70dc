"""cook.frames: the patch layout, and frames encoded/decoded at the grid (PNG exact, JPEG within its error)."""

from __future__ import annotations

import typing

import numpy as np
import pytest
from PIL import Image

from cook import format as fmt
from cook.config import ImageConfig
from cook.contract import frame_storage
from cook.frames import (
    decode_frame,
    encode_frame,
    frame_header,
    frame_sizes,
    frame_storages,
    patchify_image,
    unpatchify,
)


def _patches(height_px: int, width_px: int, seed: int = 0) -> np.ndarray:
    """uint8 [(H/16)(W/16), 768] of a smooth picture with noise (photo-like)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height_px, 0:width_px]
    base = np.stack([x * 255 // width_px, y * 255 // height_px, (x + y) * 255 // (width_px + height_px)], axis=-1)
    pixels = np.clip(base + rng.normal(0, 2, base.shape), 0, 255).astype(np.uint8)
    return patchify_image(Image.fromarray(pixels))


def test_storage_values_match_the_config() -> None:
    assert typing.get_args(typing.get_type_hints(ImageConfig)["storage"]) == fmt.FRAME_STORAGE
    assert fmt.frame_member(12, "jpeg") == "frame.12.jpg" and fmt.frame_member(0, "png") == "frame.0.png"
    assert fmt.parse_frame_member("frame.12.jpg") == (12, "jpeg")
    assert [fmt.parse_frame_member(n) for n in ("frame.01.png", "frame.1.jpeg", "frame.-1.png", "x.png")] == [None] * 4


def test_unpatchify_inverts_patchify() -> None:
    patches = _patches(48, 80)
    assert np.array_equal(patchify_image(Image.fromarray(unpatchify(patches, 48, 80))), patches)


@pytest.mark.parametrize("codec", ["png", "jpeg"])
def test_encoding_is_deterministic_and_decodes_at_the_grid(codec: str) -> None:
    patches = _patches(64, 96)
    storage = frame_storage(codec)
    data = encode_frame(patches, 64, 96, storage)
    assert encode_frame(patches.copy(), 64, 96, storage) == data
    assert frame_header(data) == (codec, "RGB", 96, 64)
    decoded = decode_frame(data, codec, 64, 96)
    error = np.abs(decoded.astype(np.int16) - patches)
    assert decoded.shape == patches.shape
    assert error.max() == 0 if codec == "png" else error.mean() <= 2.0


def test_decode_refuses_another_size_or_codec() -> None:
    data = encode_frame(_patches(32, 32), 32, 32, frame_storage("png"))
    with pytest.raises(ValueError, match="expected RGB 32x48"):
        decode_frame(data, "png", 48, 32)
    with pytest.raises(OSError):
        decode_frame(data, "jpeg", 32, 32)


def test_frame_sizes_follow_media_sizes_rows() -> None:
    assert frame_sizes(np.array([[1, 32, 48], [2, 16, 16]], np.int32)) == [(32, 48), (16, 16), (16, 16)]


def test_frame_storages_follow_each_frames_medium() -> None:
    sizes = np.array([[1, 32, 48], [4, 16, 16], [3, 512, 512]], np.int32)  # an image, a video, 3 tiles
    png, jpeg = frame_storage("png"), frame_storage("jpeg")
    kinds = ["image", "audio", "video", "tiles"]
    assert [s.codec for s in frame_storages(sizes, kinds, png, jpeg)] == ["png"] + ["jpeg"] * 4 + ["png"] * 3
    assert frame_storages(sizes, [], jpeg, jpeg) == [jpeg] * 8  # one storage: kinds are not needed
    with pytest.raises(ValueError, match="2 visual media kinds for 3 media_sizes rows"):
        frame_storages(sizes, ["image", "video"], png, jpeg)
