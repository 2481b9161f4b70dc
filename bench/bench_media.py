"""Media cook throughput per core vs the bare libraries, and storage per media token (issue 4).

    /work/main/.venv/bin/python -m bench.run_all bench_media

Every figure is CPU seconds of this one process (``time.process_time``: all threads, i.e. per core),
the median of 3 runs, with cook and its baseline interleaved in the same run on the same inputs.

- **Images**: cook's ``process_media`` (header checks, decode, EXIF, resize, patchify to uint8 [P, 768])
  against the plain Pillow code a user writes for the same target size,
  ``np.asarray(Image.open(f).convert("RGB").resize(size, Image.BICUBIC))`` (plus the 512 px thumbnail
  in tiles mode). Inputs: photo-like JPEGs (gradients, waves and noise, quality 90) generated here.
- **Video**: cook's ``process_video`` (index, seek, decode, swscale to planar RGB at the frame grid,
  patchify) against bare PyAV decoding the same clip front to back and converting the same sampled
  frames with ``to_ndarray(format="rgb24")`` (no resize).
- **Audio**: cook's ``process_audio`` (soundfile decode, soxr resampling, 30 s clips, NumPy Parakeet
  log-mel, float16) against soundfile decode (+ mean and ``soxr.resample`` to 16 kHz when needed) and
  transformers' ``ParakeetFeatureExtractor(feature_size=128)`` on the same 30 s clips, torch limited
  to one thread.
- **Storage**: bytes of the pack members (``.npy`` bytes + 512 B tar header each, as the writer stores
  them) per media token, next to the encoded source bytes per token.
"""

from __future__ import annotations

import io
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cook import format as fmt
from cook.config import AudioConfig, ImageConfig, MediaConfig, VideoConfig
from cook.media import process_media
from cook.types import MediaItem, MediaRef

COMMAND = "/work/main/.venv/bin/python -m bench.run_all bench_media"
REPEATS = 3
N_PHOTOS = 50
N_BIG_PHOTOS = 12
N_VIDEOS = 3
N_AUDIO = 4
TAR_HEADER = 512
SINGLE_THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Row:
    """One cook-vs-bare comparison: units done per run and CPU seconds (median) of each side."""

    label: str
    units: float
    bare_s: float
    cook_s: float

    @property
    def ratio(self) -> float:
        return self.bare_s / self.cook_s


def paired(bare: Callable[[], Any], cook: Callable[[], Any], repeats: int = REPEATS) -> tuple[float, float]:
    """Median CPU seconds of ``bare`` and ``cook``, run alternately (drift on a shared machine hits both)."""
    bare_s, cook_s = [], []
    for _ in range(repeats):
        for fn, times in ((bare, bare_s), (cook, cook_s)):
            start = time.process_time()
            fn()
            times.append(time.process_time() - start)
    return statistics.median(bare_s), statistics.median(cook_s)


def each(inputs: Sequence[bytes], fn: Callable[[bytes], Any]) -> None:
    """``fn`` on every input, results dropped at once on both sides (no side pays for keeping outputs)."""
    for data in inputs:
        fn(data)


def media_config(image: dict | None = None, video: dict | None = None) -> MediaConfig:
    return MediaConfig(image=ImageConfig(**(image or {})), video=VideoConfig(**(video or {})), audio=AudioConfig())


# ---------------------------------------------------------------- inputs (deterministic)
def photo_jpeg(seed: int, width: int = 1280, height: int = 800) -> bytes:
    """A photo-like JPEG: colour gradients, smooth waves and sensor-like noise, quality 90."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    base = np.stack([x / width * 255, y / height * 255, (x + y) / (width + height) * 255], axis=-1)
    waves = np.sin(x[..., None] / (20 + 10 * rng.random(3)) + rng.random(3) * 6) * 40
    noise = rng.normal(0, 12, (height, width, 3))
    pixels = np.clip(base + waves + noise, 0, 255).astype(np.uint8)  # uint8 [H, W, 3]
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def video_mp4(seed: int, seconds: float = 10.0, fps: int = 24, width: int = 640, height: int = 360) -> bytes:
    """An h264 mp4 (GOP 2 s, veryfast, CRF 28) of moving gradients."""
    import av

    y, x = np.mgrid[0:height, 0:width]
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.codec_context.gop_size = 2 * fps
        stream.options = {"preset": "veryfast", "crf": "28"}
        for i in range(round(seconds * fps)):
            shift = i + 7 * seed
            frame = np.stack([(x + 3 * shift) % 256, (y + 2 * shift) % 256, ((x + y) // 2 + shift) % 256], axis=-1)
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame.astype(np.uint8), format="rgb24")):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buffer.getvalue()


def speech_like(seed: int, seconds: float, rate_hz: int, channels: int = 1) -> np.ndarray:
    """float32 [S, channels]: a few drifting harmonics plus noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(round(seconds * rate_hz)) / rate_hz
    pitch = 140 + 40 * np.sin(2 * np.pi * 0.3 * t)
    tone = sum(np.sin(2 * np.pi * k * np.cumsum(pitch) / rate_hz) / k for k in (1, 2, 3))
    mono = 0.2 * tone + 0.02 * rng.standard_normal(t.shape[0])
    return np.repeat(mono[:, None], channels, axis=1).astype(np.float32)


def flac_bytes(samples: np.ndarray, rate_hz: int) -> bytes:
    import soundfile as sf

    buffer = io.BytesIO()
    sf.write(buffer, samples, rate_hz, format="FLAC", subtype="PCM_16")
    return buffer.getvalue()


# ---------------------------------------------------------------- images
def bare_image(data: bytes, size: tuple[int, int], thumbnail: bool = False) -> None:
    """The plain Pillow path: decode, RGB, bicubic resize to the target (W, H), to an array."""
    from PIL import Image

    image = Image.open(io.BytesIO(data)).convert("RGB")
    np.asarray(image.resize(size, Image.Resampling.BICUBIC))
    if thumbnail:
        np.asarray(image.resize((fmt.TILE_SIZE, fmt.TILE_SIZE), Image.Resampling.BICUBIC))


def image_row(label: str, photos: Sequence[bytes], config: MediaConfig) -> Row:
    ref = MediaRef(kind="image", ref="photo.jpg")
    (item,) = process_media(ref, photos[0], config)
    assert item.size is not None
    frames, height_px, width_px = item.size
    tiles = item.visual_kind == "tiles"
    if tiles:  # the tile grid (without the thumbnail) at 512 px per tile
        cols, rows = _tile_grid(photos[0], config)
        size = (cols * fmt.TILE_SIZE, rows * fmt.TILE_SIZE)
    else:
        size = (width_px, height_px)
    bare_s, cook_s = paired(
        lambda: each(photos, lambda d: bare_image(d, size, thumbnail=tiles and frames > 1)),
        lambda: each(photos, lambda d: process_media(ref, d, config)),
    )
    return Row(label, len(photos), bare_s, cook_s)


def _tile_grid(data: bytes, config: MediaConfig) -> tuple[int, int]:
    from PIL import Image

    from cook.media.tiles import choose_tiles

    width, height = Image.open(io.BytesIO(data)).size
    return choose_tiles(width, height, config.image.max_tiles)


def image_rows() -> list[Row]:
    photos = [photo_jpeg(seed) for seed in range(N_PHOTOS)]
    big = [photo_jpeg(1000 + seed, 2560, 1600) for seed in range(N_BIG_PHOTOS)]
    return [
        image_row("1280x800, dynamic defaults (in range: no resize; 4000 patches)", photos, media_config()),
        image_row(
            "1280x800, dynamic `max_patches=1024` (shrink 1.9x -> 672x384)",
            photos,
            media_config(image={"max_patches": 1024}),
        ),
        image_row(
            "2560x1600, dynamic `max_patches=1024` (shrink 3.8x: JPEG draft at 1/2)",
            big,
            media_config(image={"max_patches": 1024}),
        ),
        image_row("1280x800, tiles (3x2 tiles of 512 + thumbnail)", photos, media_config(image={"mode": "tiles"})),
    ]


# ---------------------------------------------------------------- video
def bare_video(data: bytes, times_s: Sequence[float]) -> int:
    """Decode front to back; convert the first frame at/after each sampled time to an RGB array."""
    import av

    wanted = iter(sorted(times_s))
    target = next(wanted, None)
    kept = 0
    with av.open(io.BytesIO(data)) as container:
        for frame in container.decode(video=0):
            while target is not None and frame.time is not None and frame.time >= target - 1e-6:
                frame.to_ndarray(format="rgb24")
                kept += 1
                target = next(wanted, None)
    return kept


def video_rows() -> tuple[Row, float, int]:
    from cook.media.video import frame_count, sample_times

    videos = [video_mp4(seed) for seed in range(N_VIDEOS)]
    config = media_config()
    ref = MediaRef(kind="video", ref="clip.mp4")
    n_frames = frame_count(10.0, config.video)
    times = sample_times((0.0, 10.0), n_frames)
    assert all(bare_video(v, times) == n_frames for v in videos)

    def decode_all() -> None:
        import av

        for data in videos:
            with av.open(io.BytesIO(data)) as container:
                for _ in container.decode(video=0):
                    pass

    bare_s, cook_s = paired(
        lambda: each(videos, lambda v: bare_video(v, times)),
        lambda: each(videos, lambda v: process_media(ref, v, config)),
    )
    decode_s, _ = paired(decode_all, lambda: None)
    label = f"10 s 640x360 h264 at 24 fps: {n_frames} sampled frames each, 672x384 grid"
    return Row(label, N_VIDEOS * n_frames, bare_s, cook_s), N_VIDEOS * 240 / decode_s, n_frames


# ---------------------------------------------------------------- audio
def bare_audio(data: bytes) -> None:
    """soundfile decode -> mono -> soxr to 16 kHz (when needed) -> Parakeet features per 30 s clip."""
    import soundfile as sf
    import soxr

    samples, rate_hz = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    mono = samples.mean(axis=1)
    if rate_hz != fmt.AUDIO_SAMPLE_RATE_HZ:
        mono = soxr.resample(mono, rate_hz, fmt.AUDIO_SAMPLE_RATE_HZ, quality="HQ")
    clip = fmt.AUDIO_CLIP_S * fmt.AUDIO_SAMPLE_RATE_HZ
    for start in range(0, mono.shape[0], clip):
        _extractor()(mono[start : start + clip], sampling_rate=fmt.AUDIO_SAMPLE_RATE_HZ, return_tensors="np")


_EXTRACTOR: list[Any] = []


def _extractor() -> Any:
    if not _EXTRACTOR:
        import torch
        from transformers import ParakeetFeatureExtractor

        torch.set_num_threads(1)
        _EXTRACTOR.append(ParakeetFeatureExtractor(feature_size=128))
    return _EXTRACTOR[0]


def audio_rows() -> list[Row]:
    seconds = 60.0
    ref = MediaRef(kind="audio", ref="a.flac")
    config = media_config()
    rows = []
    for label, rate_hz, channels in (("60 s FLAC, 16 kHz mono", 16_000, 1), ("60 s FLAC, 44.1 kHz stereo", 44_100, 2)):
        clips = [flac_bytes(speech_like(seed, seconds, rate_hz, channels), rate_hz) for seed in range(N_AUDIO)]
        bare_audio(clips[0])  # load the extractor outside the timing
        bare_s, cook_s = paired(
            lambda clips=clips: each(clips, bare_audio),
            lambda clips=clips: each(clips, lambda c: process_media(ref, c, config)),
        )
        rows.append(Row(label, N_AUDIO * seconds, bare_s, cook_s))
    return rows


# ---------------------------------------------------------------- storage
def stored_bytes(arrays: Sequence[np.ndarray]) -> int:
    """Bytes of the pack members holding these arrays: .npy bytes + tar header, padded to 512."""
    return sum(TAR_HEADER + -(-len(fmt.npy_bytes(a)) // TAR_HEADER) * TAR_HEADER for a in arrays)


def storage_rows() -> list[tuple[str, int, int, int]]:
    """(label, source bytes, stored bytes, media tokens) for one item of each kind."""
    config = media_config()
    image_data, video_data = photo_jpeg(7), video_mp4(7)
    audio_data = flac_bytes(speech_like(7, 60.0, 16_000), 16_000)
    cases: list[tuple[str, bytes, MediaRef]] = [
        ("image: 1280x800 JPEG q90 (dynamic: 4000 patches)", image_data, MediaRef("image", "a.jpg")),
        ("video: 10 s 640x360 h264 (20 frames on a 24x42 grid)", video_data, MediaRef("video", "v.mp4")),
        ("audio: 60 s 16 kHz FLAC (2 clips)", audio_data, MediaRef("audio", "a.flac")),
    ]
    rows = []
    for label, data, ref in cases:
        (item,) = process_media(ref, data, config)
        rows.append((label, len(data), stored_bytes(_arrays(item)), item.n_embeddings))
    return rows


def _arrays(item: MediaItem) -> list[np.ndarray]:
    if item.patches is not None:
        assert item.size is not None
        return [item.patches, np.array([item.size], dtype=np.int32)]
    assert item.audio_features is not None and item.audio_lengths is not None
    return [item.audio_features, item.audio_lengths]


# ---------------------------------------------------------------- report
def _table(rows: Sequence[Row], unit: str) -> str:
    lines = [
        f"| input | {unit} per run | bare CPU s | cook CPU s | bare {unit}/s per core | cook {unit}/s per core "
        "| cook / bare |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r.label} | {r.units:,.0f} | {r.bare_s:.3f} | {r.cook_s:.3f} | {r.units / r.bare_s:,.1f} "
            f"| {r.units / r.cook_s:,.1f} | **{r.ratio:.2f}** |"
        )
    return "\n".join(lines)


def run() -> str:
    """The section, measured in a fresh process whose BLAS/OpenMP/torch use one thread each: per core,
    as in a Ray actor with one CPU (Ray sets ``OMP_NUM_THREADS`` to the actor's CPUs)."""
    env = {**os.environ, **{name: "1" for name in SINGLE_THREAD_ENV}}
    done = subprocess.run(
        [sys.executable, "-m", "bench.bench_media"], env=env, cwd=REPO, check=True, capture_output=True, text=True
    )
    return done.stdout


def report() -> str:
    images = image_rows()
    sampled, decode_rate, n_frames = video_rows()
    audio = audio_rows()
    storage = storage_rows()
    storage_lines = "\n".join(
        f"| {label} | {src / tokens:,.0f} | {stored / tokens:,.0f} | {tokens:,} | {stored / src:.1f}x |"
        for label, src, stored, tokens in storage
    )
    return f"""## Media cook throughput per core and storage per token (issue 4)

`{COMMAND}`

CPU seconds of one process (per core), median of {REPEATS}, cook and the bare library interleaved on the
same inputs in the same run; each output is dropped as soon as it is made, on both sides (keeping 50
outputs alive would charge fresh-page faults to whichever side keeps them). Targets: images >= 0.90 of
bare Pillow, video and audio >= 0.70 of bare.

**Images** (photo-like JPEGs, quality 90). Bare: `np.asarray(Image.open(f).convert("RGB").resize(size,
BICUBIC))` to cook's target size (plus the 512 px thumbnail in tiles mode). cook: `process_media` to
uint8 patches `[P, 768]` (header checks, decode, EXIF, resize, patchify). When the target is at most
half the JPEG's size in both directions, cook decodes in JPEG draft mode (DCT scaling) before its one
resize; the bare path decodes at full size.

{_table(images, "images")}

**Video.** Bare: PyAV decodes each clip front to back and converts the {n_frames} sampled frames with
`to_ndarray(format="rgb24")` (no resize). cook: `process_video` (packet index, seeks, decode, swscale to
planar RGB at the 1024-patch grid, patchify).

{_table([sampled], "frames")}

Bare PyAV decoding every frame of the same clips (no conversion): {decode_rate:,.0f} frames/s per core.

**Audio.** Bare: soundfile decode (+ channel mean and `soxr.resample` HQ to 16 kHz for 44.1 kHz) and
`ParakeetFeatureExtractor(feature_size=128)` per 30 s clip, torch on one thread. cook: `process_audio`
(soundfile, soxr stream, 30 s clips, NumPy Parakeet log-mel, float16).

{_table(audio, "audio seconds")}

**Storage per media token**, as the writer stores the members (`.npy` + tar header): patches are raw
uint8 (768 B per patch, 4 patches per image token, 8 per video token), audio features float16 (8 frames
of 128 per token).

| medium | source bytes / token | stored bytes / token | tokens | stored / source |
| --- | ---: | ---: | ---: | ---: |
{storage_lines}

Machine: {os.cpu_count()} cores (shared; figures are CPU time, not wall time); one thread per library
(`OMP_NUM_THREADS=1` etc.).
"""


if __name__ == "__main__":
    print(report(), end="")
