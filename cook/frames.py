"""The patch layout of visual frames, and frames stored as image members (SPEC §6, §8).

    RGB frame uint8 [H, W, 3] -patchify-> uint8 [(H/16)(W/16), 768] -unpatchify-> the same frame
    patches + (H, W) + FrameStorage -encode_frame-> PNG/JPEG bytes (member frame.<k>.png / .jpg)
    member bytes -frame_header-> (codec, W, H) without decoding;  -decode_frame-> uint8 [P, 768]

**Patch layout.** Patch ``k = row * grid_w + col`` (raster order) holds the 16x16 block at
``(row*16, col*16)``, flattened channel-major: ``patch[c*256 + y*16 + x] = pixel[row*16+y, col*16+x, c]``.
``unpatchify(patchify(a)) == a`` bit for bit.

**Stored frames.** In ``png``/``jpeg`` storage a frame is encoded by Pillow with fixed options
(PNG: ``compress_level = format.PNG_COMPRESS_LEVEL``; JPEG: ``quality``, ``subsampling=0`` (4:4:4),
``optimize=False``, baseline), and no metadata, so the same patches always give the same bytes. It is
decoded at its stored size: no resize, no draft mode. PNG round-trips exactly; JPEG within its codec
error (about 1/255 mean absolute error at quality 95). Each frame follows its medium's storage
(``frame_storages``: images and tiles ``media.image.storage``, video frames ``media.video.storage``).

Used by the media stage (patchify), the writer (encode), the reader, validate and the views (decode,
headers). numpy, Pillow and ``format`` only.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator, Sequence
from typing import Final

import numpy as np
from PIL import Image

from cook import format as fmt
from cook.contract import FrameStorage

_RUN: Final = np.dtype((np.void, fmt.PATCH_SIZE))  # 16 bytes: one row of one channel of one patch
FRAME_ERRORS: Final = (OSError, ValueError, SyntaxError, Image.DecompressionBombError)  # Pillow on bad bytes


def rgb_planes(image: Image.Image) -> list[np.ndarray]:
    """RGB image -> its R, G, B planes, uint8 [H, W] each (Pillow's ``split``, read without a copy)."""
    return [_plane(band) for band in image.split()]


def _plane(band: Image.Image) -> np.ndarray:
    """Mode-L image -> uint8 [H, W]: zero-copy through the Arrow C data interface where Pillow offers
    it (Pillow >= 11.2, single-block images), else ``np.asarray`` (one copy)."""
    import pyarrow as pa

    try:
        flat: np.ndarray = pa.array(band).to_numpy(zero_copy_only=True)  # uint8 [H*W]
    except (TypeError, ValueError, pa.ArrowException):
        return np.asarray(band, dtype=np.uint8)
    return flat.reshape(band.height, band.width)


def patchify_image(image: Image.Image) -> np.ndarray:
    """RGB image (sides multiples of 16) -> uint8 [(H/16)(W/16), 768], raster order, each patch C x 16 x 16
    (the layout of the reshape-and-transpose oracle in ``tests/unit/media/oracles.py``)."""
    return patchify_planes(rgb_planes(image))


def patchify_planes(planes: Sequence[np.ndarray]) -> np.ndarray:
    """C planes uint8 [H, W] (H, W multiples of 16; each row contiguous) -> uint8 [(H/16)(W/16), C*256].

    Same layout as ``patchify_image``; the copy moves 16-byte runs (one patch row of one channel) at a time.
    """
    p = fmt.PATCH_SIZE
    height_px, width_px = planes[0].shape
    grid_h, grid_w = height_px // p, width_px // p
    out = np.empty((grid_h, grid_w, len(planes), p), _RUN)  # [gh, gw, C, y] of 16-byte x runs
    for c, plane in enumerate(planes):
        runs = plane.view(_RUN).reshape(grid_h, p, grid_w)  # [gh, y, gw]
        np.copyto(out[:, :, c].transpose(0, 2, 1), runs)  # iterating in source order is ~2x faster
    return out.view(np.uint8).reshape(grid_h * grid_w, len(planes) * p * p)


def unpatchify(patches: np.ndarray, height_px: int, width_px: int) -> np.ndarray:
    """uint8 [(H/16)(W/16), 768] raster-order patches -> uint8 [H, W, 3]; the inverse of ``patchify_image``."""
    p, c = fmt.PATCH_SIZE, fmt.CHANNELS
    grid = patches.reshape(height_px // p, width_px // p, c, p, p)  # [gh, gw, C, y, x]
    return np.ascontiguousarray(grid.transpose(0, 3, 1, 4, 2).reshape(height_px, width_px, c))


def encode_frame(patches: np.ndarray, height_px: int, width_px: int, storage: FrameStorage) -> bytes:
    """uint8 [(H/16)(W/16), 768] -> the frame's PNG or JPEG bytes (deterministic: fixed options, no metadata)."""
    image = Image.fromarray(unpatchify(patches, height_px, width_px), "RGB")
    buffer = io.BytesIO()
    if storage.codec == "png":
        image.save(buffer, "PNG", compress_level=storage.png_compress_level, optimize=False)
    elif storage.codec == "jpeg":
        image.save(buffer, "JPEG", quality=storage.jpeg_quality, subsampling=0, optimize=False, progressive=False)
    else:
        raise ValueError(f"frames are not encoded in {storage.codec!r} storage")
    return buffer.getvalue()


def frame_header(data: bytes | memoryview) -> tuple[str | None, str, int, int]:
    """``(codec or None, Pillow mode, width px, height px)`` of a frame member, from its header alone.

    Raises one of ``FRAME_ERRORS`` on bytes Pillow cannot identify."""
    with Image.open(io.BytesIO(data)) as image:
        codec = next((c for c, name in fmt.FRAME_PIL_FORMATS.items() if name == image.format), None)
        return codec, image.mode, image.width, image.height


@contextlib.contextmanager
def _open_frame(data: bytes | memoryview, codec: str, height_px: int, width_px: int) -> Iterator[Image.Image]:
    """The member opened as a ``codec`` image (header only), checked to be RGB ``width_px`` x ``height_px``."""
    with Image.open(io.BytesIO(data), formats=[fmt.FRAME_PIL_FORMATS[codec]]) as image:
        if image.mode != "RGB" or image.size != (width_px, height_px):
            raise ValueError(f"a {image.mode} {image.width}x{image.height} image, expected RGB {width_px}x{height_px}")
        yield image


def check_frame(data: bytes | memoryview, codec: str, height_px: int, width_px: int) -> None:
    """What ``decode_frame`` checks before it decodes, from the header alone: the same errors."""
    with _open_frame(data, codec, height_px, width_px):
        pass


def decode_frame(data: bytes | memoryview, codec: str, height_px: int, width_px: int) -> np.ndarray:
    """A frame member -> uint8 [(H/16)(W/16), 768], decoded at its stored size (no resize, no draft).

    Raises ``ValueError`` naming what differs when the bytes are not an RGB ``codec`` image of exactly
    ``width_px`` x ``height_px``, and one of ``FRAME_ERRORS`` when Pillow cannot decode them."""
    with _open_frame(data, codec, height_px, width_px) as image:
        image.load()
        return patchify_image(image)


def frame_sizes(media_sizes: np.ndarray) -> list[tuple[int, int]]:
    """``(H, W)`` of every visual frame in placeholder order: row ``(frames, H, W)`` gives ``frames`` entries."""
    return [(height, width) for frames, height, width in media_sizes.tolist() for _ in range(frames)]


def frame_media(media_sizes: np.ndarray, kinds: Sequence[str]) -> list[str]:
    """``"video"`` or ``"image"`` (images and tiles) for every visual frame in placeholder order. ``kinds``:
    the pack's media kinds in placeholder order (meta.json's ``media`` of each sequence, one after another;
    ``"audio"`` items have no ``media_sizes`` row and are skipped). Raises ``ValueError`` when the visual
    kinds and the rows differ in number.

    >>> frame_media(np.array([[1, 32, 32], [2, 16, 16]], np.int32), ["tiles", "audio", "video"])
    ['image', 'video', 'video']
    """
    visual = [kind for kind in kinds if kind != "audio"]
    if len(visual) != len(media_sizes):
        raise ValueError(f"{len(visual)} visual media kinds for {len(media_sizes)} media_sizes rows")
    rows = media_sizes[:, 0].tolist()
    return [
        "video" if kind == "video" else "image"
        for kind, frames in zip(visual, rows, strict=True)
        for _ in range(frames)
    ]


def frame_storages(
    media_sizes: np.ndarray, kinds: Sequence[str], image: FrameStorage, video: FrameStorage
) -> list[FrameStorage]:
    """The storage of every visual frame in placeholder order: ``video`` for a video's frames, ``image`` for
    images and tiles (``frame_media``; ``kinds`` are not needed when both are the same).

    >>> sizes = np.array([[1, 32, 32], [2, 16, 16]], np.int32)
    >>> [s.codec for s in frame_storages(sizes, ["image", "audio", "video"], FrameStorage("png"), FrameStorage("jpeg"))]
    ['png', 'jpeg', 'jpeg']
    """
    if image == video:
        return [image] * int(media_sizes[:, 0].sum())
    return [video if medium == "video" else image for medium in frame_media(media_sizes, kinds)]
