"""Pinned media arithmetic: patch and token counts for a table of image sizes in both modes, the stored
patches reassembled back into the resized image (dynamic, tiles, JPEG draft, EXIF, video frames), video
frame counts and timestamps across durations and frame rates, and audio token counts."""

from __future__ import annotations

import io
import math

import av
import numpy as np
import pytest
from PIL import Image, ImageOps

from cook import format as fmt
from cook.media import process_media
from cook.media.image import RESAMPLE, choose_grid
from cook.types import MediaRef

from .media_data import config, image_bytes, rgb_bytes, sine, sound_bytes, video_bytes

IMAGE = MediaRef(kind="image", ref="x.png")
VIDEO = MediaRef(kind="video", ref="clip.mp4")
AUDIO = MediaRef(kind="audio", ref="a.wav")
TILES = config(image={"mode": "tiles"})

# (width, height) -> dynamic (size, patches, tokens) and tiles ((cols, rows), tiles incl. thumbnail, tokens),
# at the defaults: min_patches 1024, max_patches 13312, max_tiles 12.
TABLE = {
    (97, 311): ((1, 928, 288), 1044, 261, (1, 3), 4, 1024),
    (640, 480): ((1, 480, 640), 1200, 300, (4, 3), 13, 3328),
    (1920, 1080): ((1, 1088, 1920), 8160, 2040, (4, 2), 9, 2304),
    (33, 33): ((1, 512, 512), 1024, 256, (1, 1), 1, 256),
    (4000, 100): ((1, 96, 4000), 1500, 375, (12, 1), 13, 3328),
    (1, 1): ((1, 512, 512), 1024, 256, (1, 1), 1, 256),
}


def pixels(width: int, height: int, seed: int = 0) -> np.ndarray:
    """uint8 [H, W, 3]: noise over a gradient (every patch differs)."""
    rng = np.random.default_rng(seed)
    ramp = np.linspace(0, 200, width, dtype=np.float32)[None, :, None]
    return np.clip(ramp + rng.integers(0, 56, (height, width, 3)), 0, 255).astype(np.uint8)


def unpatchify(patches: np.ndarray, height_px: int, width_px: int) -> np.ndarray:
    """uint8 [P, 768] (raster order, C x 16 x 16) -> uint8 [H, W, 3]: the inverse of the stored layout."""
    grid_h, grid_w = height_px // fmt.PATCH_SIZE, width_px // fmt.PATCH_SIZE
    blocks = patches.reshape(grid_h, grid_w, fmt.CHANNELS, fmt.PATCH_SIZE, fmt.PATCH_SIZE)
    return blocks.transpose(0, 3, 1, 4, 2).reshape(height_px, width_px, fmt.CHANNELS)


def resized(image: Image.Image, size: tuple[int, int]) -> np.ndarray:
    """What a plain Pillow user gets: the RGB image resized BICUBIC to ``size`` (W, H), as uint8 [H, W, 3]."""
    image = image.convert("RGB")
    return np.asarray(image if image.size == size else image.resize(size, RESAMPLE))


@pytest.mark.parametrize("size", sorted(TABLE))
def test_dynamic_counts(size: tuple[int, int]) -> None:
    width, height = size
    expected_size, n_patches, tokens = TABLE[size][:3]
    for data in (rgb_bytes(pixels(width, height)), rgb_bytes(pixels(width, height), "JPEG")):
        (item,) = process_media(IMAGE, data, config())
        assert (item.size, item.n_patches, item.n_embeddings) == (expected_size, n_patches, tokens)
        assert item.n_patches == 4 * item.n_embeddings == fmt.image_embeddings(*expected_size[1:]) * 4
        assert item.patches is not None and item.patches.shape == (n_patches, 768) and item.patches.dtype == np.uint8
        assert [(b.start, b.count, b.end) for b in item.blocks] == [(fmt.IMG_START, tokens, fmt.IMG_END)]


@pytest.mark.parametrize("size", sorted(TABLE))
def test_tiles_counts(size: tuple[int, int]) -> None:
    width, height = size
    _, _, _, (cols, rows), n_tiles, tokens = TABLE[size]
    assert n_tiles == cols * rows + (cols * rows > 1)
    (item,) = process_media(IMAGE, rgb_bytes(pixels(width, height)), TILES)
    assert item.visual_kind == "tiles" and item.size == (n_tiles, 512, 512)
    assert item.n_patches == 1024 * n_tiles and item.n_embeddings == tokens == fmt.tiles_embeddings(n_tiles)


@pytest.mark.parametrize("size", sorted(TABLE))
def test_dynamic_round_trip(size: tuple[int, int]) -> None:
    source = pixels(*size, seed=1)
    (item,) = process_media(IMAGE, rgb_bytes(source), config())
    assert item.patches is not None and item.size is not None
    _, height_px, width_px = item.size
    stored = unpatchify(item.patches, height_px, width_px)
    np.testing.assert_array_equal(stored, resized(Image.fromarray(source), (width_px, height_px)))


@pytest.mark.parametrize("size", [(97, 311), (640, 480), (1920, 1080), (4000, 100)])
def test_tiles_round_trip(size: tuple[int, int]) -> None:
    source = Image.fromarray(pixels(*size, seed=2))
    _, _, _, (cols, rows), n_tiles, _ = TABLE[size]
    (item,) = process_media(IMAGE, image_bytes(source), TILES)
    assert item.patches is not None
    tiles = [unpatchify(item.patches[i * 1024 : (i + 1) * 1024], 512, 512) for i in range(n_tiles)]
    grid = np.concatenate([np.concatenate(tiles[r * cols : (r + 1) * cols], axis=1) for r in range(rows)])
    np.testing.assert_array_equal(grid, resized(source, (cols * 512, rows * 512)))
    np.testing.assert_array_equal(tiles[-1], resized(source, (512, 512)))  # the thumbnail


def test_jpeg_draft_round_trip() -> None:
    """Shrinking a JPEG 4x decodes at 1/4 scale in the IDCT (draft), then resizes once."""
    data = rgb_bytes(pixels(1280, 800, seed=3), "JPEG")
    (item,) = process_media(IMAGE, data, config(image={"max_patches": 256}))
    assert item.size == (1, 192, 320) and item.patches is not None  # grid 12 x 20 = 240 patches
    reference = Image.open(io.BytesIO(data))
    reference.draft("RGB", (320, 192))
    assert reference.size == (320, 200)  # 1/4 scale: the smallest that still covers the target
    np.testing.assert_array_equal(unpatchify(item.patches, 192, 320), resized(reference, (320, 192)))
    assert not np.array_equal(unpatchify(item.patches, 192, 320), resized(Image.open(io.BytesIO(data)), (320, 192)))


def test_jpeg_draft_with_exif_rotation() -> None:
    """The grid comes from the upright size; draft is asked for the stored (unrotated) orientation."""
    exif = Image.Exif()
    exif[0x0112] = 6  # stored landscape 1600x1200, displayed portrait 1200x1600
    data = image_bytes(Image.fromarray(pixels(1600, 1200, seed=4)), "JPEG", exif=exif.tobytes(), quality=90)
    (item,) = process_media(IMAGE, data, config(image={"max_patches": 256}))
    grid_h, grid_w = choose_grid(1600, 1200, 1024, 256)
    assert item.size == (1, grid_h * 16, grid_w * 16) and grid_h > grid_w
    reference = Image.open(io.BytesIO(data))
    reference.draft("RGB", (grid_h * 16, grid_w * 16))  # stored orientation: width and height swapped
    reference = ImageOps.exif_transpose(reference)
    assert item.patches is not None
    np.testing.assert_array_equal(
        unpatchify(item.patches, grid_h * 16, grid_w * 16), resized(reference, (grid_w * 16, grid_h * 16))
    )


def test_video_round_trip() -> None:
    """Each stored frame is the decoded frame converted and resized by swscale (planar RGB, BICUBIC)."""
    data = video_bytes(seconds=2.0, fps=10, width=64, height=48, pattern="ramp")
    (item,) = process_media(VIDEO, data, config(video={"target_patches": 64}))
    n_frames, height_px, width_px = item.size or (0, 0, 0)
    assert (n_frames, height_px, width_px) == (8, 96, 160) and item.patches is not None  # grid 6 x 10
    per_frame = (height_px // 16) * (width_px // 16)
    with av.open(io.BytesIO(data)) as container:
        decoded = list(container.decode(video=0))
    # 8 targets at the midpoints of 0.25 s segments -> first frames at/after 0.125, 0.375, ... s
    sampled = [min(math.ceil((i + 0.5) * 2.0 / 8 * 10 - 1e-6), len(decoded) - 1) for i in range(8)]
    for slot, index in enumerate(sampled):
        planar = decoded[index].reformat(width_px, height_px, format="gbrp", interpolation="BICUBIC")
        green, blue, red = (
            np.frombuffer(p, np.uint8).reshape(height_px, p.line_size)[:, :width_px] for p in planar.planes
        )
        expected = np.stack([red, green, blue], axis=-1)
        stored = unpatchify(item.patches[slot * per_frame : (slot + 1) * per_frame], height_px, width_px)
        np.testing.assert_array_equal(stored, expected)


def expected_frame_times(seconds: float, source_fps: int, n_frames: int) -> list[float]:
    """Times of the first source frame at/after each segment midpoint (the last frame past the end); the
    window is the stream's duration, ``frames / fps`` (9.7 s at 24 fps holds 233 frames: 9.708 s)."""
    frames = round(seconds * source_fps)
    targets = [(i + 0.5) * frames / source_fps / n_frames for i in range(n_frames)]
    return [min(math.ceil(t * source_fps - 1e-6), frames - 1) / source_fps for t in targets]


@pytest.mark.parametrize(
    ("seconds", "source_fps", "sample_fps", "n_frames"),
    [
        (1.0, 10, 2.0, 8),  # floor(2) -> clamped up to min_frames
        (3.0, 25, 2.0, 8),
        (7.3, 30, 2.0, 14),  # floor(14.6) = 14
        (9.7, 24, 2.0, 18),  # floor(19.4) = 19 -> rounded down to even
        (20.0, 5, 2.0, 32),  # floor(40) -> clamped down to max_frames
        (5.0, 24, 4.0, 20),
        (4.0, 12, 0.5, 8),
    ],
)
def test_video_frame_count_and_timestamps(seconds: float, source_fps: int, sample_fps: float, n_frames: int) -> None:
    data = video_bytes(seconds=seconds, fps=source_fps, width=32, height=32, gop=source_fps)
    (item,) = process_media(VIDEO, data, config(video={"fps": sample_fps, "target_patches": 16}))
    assert item.size == (n_frames, 64, 64) and item.n_patches == n_frames * 16
    assert item.n_embeddings == fmt.video_embeddings(n_frames, 64, 64) == n_frames // 2 * 4
    times = expected_frame_times(seconds, source_fps, n_frames)
    assert [b.prefix for b in item.blocks] == [
        ("\n" if g else "") + fmt.video_frame_line(g, times[2 * g]) for g in range(n_frames // 2)
    ]
    assert all(b.count == 4 for b in item.blocks)


def test_video_timestamps_pinned() -> None:
    (item,) = process_media(VIDEO, video_bytes(seconds=1.0, fps=10, width=32, height=32), config())
    assert [b.prefix for b in item.blocks] == [
        "Frame 1 sampled at 0.10 seconds: ",
        "\nFrame 2 sampled at 0.40 seconds: ",
        "\nFrame 3 sampled at 0.60 seconds: ",
        "\nFrame 4 sampled at 0.90 seconds: ",
    ]


@pytest.mark.parametrize(
    ("seconds", "lengths", "tokens"),
    [
        (0.05, [10], 2),  # 800 samples, padded to 0.1 s (1600 samples, 10 frames)
        (1.0, [100], 13),
        (2.5, [250], 32),
        (30.0, [3000], 375),
        (70.0, [3000, 3000, 1000], 375 + 375 + 125),
    ],
)
def test_audio_tokens(seconds: float, lengths: list[int], tokens: int) -> None:
    rate_hz = fmt.AUDIO_SAMPLE_RATE_HZ
    (item,) = process_media(AUDIO, sound_bytes(sine(440.0, seconds, rate_hz), rate_hz), config())
    assert item.audio_lengths is not None and item.audio_features is not None
    assert item.audio_lengths.tolist() == lengths and item.n_embeddings == tokens
    assert sum(fmt.audio_clip_tokens(n * fmt.AUDIO_HOP) for n in lengths) == tokens
    assert item.audio_features.shape == (len(lengths), max(lengths), 128)
    assert [(b.start, b.count, b.end) for b in item.blocks] == [(fmt.AUDIO_START, tokens, fmt.AUDIO_END)]
