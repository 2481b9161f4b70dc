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
import json
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

from bench.common import WORK
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
WORK_DIR = WORK / "media_storage"


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


def video_mp4(
    seed: int, seconds: float = 10.0, fps: int = 24, width: int = 640, height: int = 360, audio_hz: int | None = None
) -> bytes:
    """An h264 mp4 (GOP 2 s, veryfast, CRF 28) of moving gradients; with ``audio_hz`` also a mono AAC
    track of ``speech_like`` sound at that rate."""
    import av

    y, x = np.mgrid[0:height, 0:width]
    planes = np.stack([x, y, (x + y) // 2], axis=-1).astype(np.uint8)  # uint8 [H, W, 3]: the gradients mod 256
    steps = np.array([3, 2, 1], np.int64)  # each channel's shift per step
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.codec_context.gop_size = 2 * fps
        stream.options = {"preset": "veryfast", "crf": "28"}
        sound = out.add_stream("aac", rate=audio_hz, layout="mono") if audio_hz else None
        for i in range(round(seconds * fps)):
            frame = planes + ((i + 7 * seed) * steps % 256).astype(np.uint8)  # uint8 adds wrap: mod 256
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
        if sound is not None and audio_hz:
            pcm = speech_like(seed, seconds, audio_hz)[:, 0]  # float32 [S]
            step = 1024  # AAC's frame
            for start in range(0, len(pcm), step):
                chunk = av.AudioFrame.from_ndarray(pcm[None, start : start + step], format="fltp", layout="mono")
                chunk.sample_rate, chunk.pts = audio_hz, start
                for packet in sound.encode(chunk):
                    out.mux(packet)
            for packet in sound.encode(None):
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


# ---------------------------------------------------------------- stored frames (issue 30)
STORAGE_MODES = fmt.FRAME_STORAGE  # raw, png, jpeg
STORAGE_COMMAND = ".venv/bin/python -m bench.run_all bench_media"
ENCODE_TARGET = 0.30  # encoding adds at most this share of the in-process image job's CPU


@dataclass
class PatchError:
    """Absolute error of decoded frames against raw patches, accumulated over every value."""

    count: int = 0
    total: int = 0
    squares: int = 0
    max: int = 0

    def add(self, decoded: np.ndarray, raw: np.ndarray) -> None:
        diff = np.abs(decoded.astype(np.int32) - raw).ravel()
        self.count += diff.size
        self.total += int(diff.sum())
        self.squares += int(np.dot(diff, diff))
        self.max = max(self.max, int(diff.max(initial=0)))

    def cell(self) -> str:
        if self.max == 0:
            return "identical"
        mse = self.squares / self.count
        return f"MAE {self.total / self.count:.2f}/255, max {self.max}, PSNR {10 * np.log10(255**2 / mse):.1f} dB"


def photo_video_mp4(seed: int, seconds: float = 10.0, fps: int = 24, width: int = 1280, height: int = 720) -> bytes:
    """A 720p h264 mp4 (x264 defaults: CRF 23, preset medium; GOP 2 s) of a photo-like scene (the
    gradients, waves and noise of ``photo_jpeg``, twice the frame) that pans, plus light per-frame noise."""
    import av

    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0 : 2 * height, 0 : 2 * width].astype(np.float32)
    base = np.stack([x / width * 127, y / height * 127, (x + y) / (width + height) * 127], axis=-1)
    waves = np.sin(x[..., None] / (20 + 10 * rng.random(3)) + rng.random(3) * 6) * 40
    scene = np.clip(base + waves + rng.normal(0, 12, base.shape), 0, 255).astype(np.float32)
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.codec_context.gop_size = 2 * fps
        for i in range(round(seconds * fps)):
            top, left = i * height // (2 * round(seconds * fps)), i * width // round(seconds * fps)
            view = scene[top : top + height, left : left + width] + rng.normal(0, 2, (height, width, 3))
            frame = av.VideoFrame.from_ndarray(np.clip(view, 0, 255).astype(np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buffer.getvalue()


def _frames_of(item: MediaItem) -> list[tuple[np.ndarray, int, int]]:
    """(patches, H, W) of each frame of a visual item."""
    assert item.patches is not None and item.size is not None
    frames, height_px, width_px = item.size
    per = (height_px // fmt.PATCH_SIZE) * (width_px // fmt.PATCH_SIZE)
    return [(item.patches[i * per : (i + 1) * per], height_px, width_px) for i in range(frames)]


def _stored(frames: Sequence[tuple[np.ndarray, int, int]], mode: str) -> tuple[int, list[np.ndarray]]:
    """(member bytes, the patches a reader decodes) of these frames stored in ``mode``."""
    from cook.contract import frame_storage
    from cook.frames import decode_frame, encode_frame

    if mode == "raw":
        patches = np.concatenate([p for p, _, _ in frames])
        return len(fmt.npy_bytes(patches)), [p for p, _, _ in frames]
    storage = frame_storage(mode)
    data = [encode_frame(p, h, w, storage) for p, h, w in frames]
    return sum(map(len, data)), [decode_frame(d, mode, h, w) for d, (_, h, w) in zip(data, frames, strict=True)]


def video_storage_rows(label: str, clips: Sequence[bytes]) -> tuple[str, dict[str, tuple[float, str, float]]]:
    """(label, mode -> (stored / source bytes, error vs raw, stored bytes per token)) of clips cooked at
    omni_sft's video settings."""
    items = [process_media(MediaRef("video", "v.mp4"), clip, media_config())[0] for clip in clips]
    frames = [f for item in items for f in _frames_of(item)]
    tokens = sum(item.n_embeddings for item in items)
    source = sum(map(len, clips))
    raw = [p for p, _, _ in frames]
    rows = {}
    for mode in STORAGE_MODES:
        size, decoded = _stored(frames, mode)
        error = PatchError()
        for got, want in zip(decoded, raw, strict=True):
            error.add(got, want)
        rows[mode] = (size / source, error.cell(), size / tokens)
    _, height_px, width_px = frames[0]
    label += f", {source / len(clips) / 1e6:.2f} MB each: {len(frames) // len(clips)} frames at {width_px}x{height_px}"
    return label, rows


def _image_job(mode: str, n_images: int, out: Path) -> float:
    """Job CPU (user+sys of the process tree) of an in-process ``cook run`` of bench_job's photo set."""
    from bench.bench_job import IMAGE_SETS, image_dataset
    from bench.job_run import run_job

    args = ["run", "pipelines/omni_sft.yaml", "--input", str(image_dataset(n_images)), "--output", str(out)]
    args += [*IMAGE_SETS, "--set", f"media.image.storage={mode}", "--set", f"media.video.storage={mode}"]
    args += ["--workers", "0", "--overwrite", "--quiet"]
    stats = run_job(args, REPO, {**os.environ, "TOKENIZERS_PARALLELISM": "false"}, WORK_DIR / "scratch")
    if stats.rc != 0:
        raise RuntimeError(f"cook {' '.join(args)} exited {stats.rc}:\n{stats.stderr[-3000:]}")
    return stats.tree_cpu_s


def _bare_images(photos: Sequence[bytes], mode: str) -> None:
    """Pillow decode to RGB, the uint8 [P, 768] patch copy (bench_job's baseline), then, unless ``raw``,
    the frame encoded as the writer encodes it."""
    from PIL import Image

    from bench.bench_job import PATCH_PX
    from cook.contract import frame_storage
    from cook.frames import encode_frame

    storage = frame_storage(mode)
    for data in photos:
        pixels = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))  # uint8 [H, W, 3]
        height, width, channels = pixels.shape
        grid = pixels.reshape(height // PATCH_PX, PATCH_PX, width // PATCH_PX, PATCH_PX, channels)
        patches = np.ascontiguousarray(grid.transpose(0, 2, 4, 1, 3).reshape(-1, channels * PATCH_PX * PATCH_PX))
        if storage.stores_frames:
            encode_frame(patches, height, width, storage)


@dataclass(frozen=True)
class ImageFigures:
    job_cpu_ms: dict[str, float]  # marginal in-process job CPU per image, by mode (median)
    bare_cpu_ms: dict[str, float]  # bare decode + patchify (+ encode), per image, by mode (median)
    ratio: dict[str, float]  # stored / source bytes, by mode
    per_token: dict[str, float]  # stored bytes per image token, by mode
    error: dict[str, str]
    source_mb: float
    images: int


def image_figures(n_big: int, n_small: int, repeats: int) -> ImageFigures:
    """Marginal CPU of the in-process image job in each mode (big - small run, interleaved, median of
    ``repeats``), the bare baselines in this process, and the big runs' stored bytes and patch error."""
    from bench.bench_job import marginal_cpu, photo
    from cook.validate.stats import compute_stats, summarize

    marginals: dict[str, list[float]] = {mode: [] for mode in STORAGE_MODES}
    for _ in range(repeats):
        for mode in STORAGE_MODES:
            big = _image_job(mode, n_big, WORK_DIR / f"images_{mode}")
            marginals[mode].append(big - _image_job(mode, n_small, WORK_DIR / "images_small"))
    photos = [photo(seed) for seed in range(n_big)]
    bare = {
        mode: marginal_cpu(
            lambda m=mode: _bare_images(photos, m), lambda m=mode: _bare_images(photos[:n_small], m), repeats
        )
        for mode in STORAGE_MODES
    }
    source = sum(map(len, photos))
    stored = {mode: summarize(compute_stats(str(WORK_DIR / f"images_{mode}"))).stored_bytes for mode in STORAGE_MODES}
    errors = {mode: _pack_error(WORK_DIR / "images_raw", WORK_DIR / f"images_{mode}") for mode in STORAGE_MODES}
    per_image = 1e3 / (n_big - n_small)
    return ImageFigures(
        job_cpu_ms={mode: statistics.median(values) * per_image for mode, values in marginals.items()},
        bare_cpu_ms={mode: value * per_image for mode, value in bare.items()},
        ratio={mode: stored[mode].image / source for mode in STORAGE_MODES},
        per_token={mode: stored[mode].image_per_token for mode in STORAGE_MODES},
        error={mode: error.cell() for mode, error in errors.items()},
        source_mb=source / 1e6,
        images=n_big,
    )


def _pack_error(raw_dir: Path, mode_dir: Path) -> PatchError:
    """The patches the reader yields from ``mode_dir`` against ``raw_dir``'s, pack by pack (same packs)."""
    from cook.packfiles import iter_packs
    from cook.reader.pack import decode_pack

    error = PatchError()
    for (_, raw), (_, stored) in zip(iter_packs(str(raw_dir)), iter_packs(str(mode_dir)), strict=True):
        assert raw.key == stored.key
        want, got = (
            decode_pack({**p.members, "__key__": p.key, "__restore_key__": ("Webdataset", 0)}).pixel_patches
            for p in (raw, stored)
        )
        assert want is not None and got is not None
        error.add(got.numpy(), want.numpy())
    return error


def reader_figures() -> tuple[dict[str, Any], Any, int]:
    """bench_reader's multimodal corpus (demo images, video with sound, audio x 40) cooked in each mode:
    the reader's marginal CPU per training token in each, and online loading's (bench_reader.marginal)."""
    from bench import bench_reader as br
    from bench.online_loader import write_raw_wds

    br.ROOT.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in (br.DEMO / "chat-media.jsonl").read_text().splitlines()] * 40
    corpus = br.ROOT / "storage.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cooked, pipelines = {}, {}
    for mode in STORAGE_MODES:
        pipelines[mode] = br._pipeline(f"storage_{mode}", corpus, br.demo_media(mode))
        argv = [sys.executable, "-m", "cook.cli.main", "run", str(pipelines[mode]), "--workers", "0", "--quiet"]
        subprocess.run([*argv, "--overwrite"], check=True, capture_output=True, cwd=REPO)
        cooked[mode] = br.ROOT / f"storage_{mode}_cooked"
    rejects = (cooked["raw"] / "rejects.jsonl").open()
    rejected = {int(json.loads(line)["source"].rsplit("#", 1)[1]) for line in rejects}
    write_raw_wds(
        [r for i, r in enumerate(rows, start=1) if i not in rejected], br.DEMO / "media", br.ROOT / "storage_raw_wds"
    )
    reader = {mode: br.marginal("reader", cooked[mode], 20, 1020) for mode in STORAGE_MODES}
    online = br.marginal("online", br.ROOT / "storage_raw_wds", 3, 23, pipeline=pipelines["raw"])
    return reader, online, br.REPEATS


def _verdict(ok: bool) -> str:
    return "met" if ok else "**not met**"


def storage_report() -> str:
    """The stored-frames section (issue 30)."""
    from bench.job_run import become_subreaper

    become_subreaper()
    WORK_DIR.mkdir(parents=True, exist_ok=True)
    n_big, n_small = int(os.environ.get("BENCH_STORAGE_IMAGES", 96)), 16
    repeats = int(os.environ.get("BENCH_STORAGE_REPEATS", REPEATS))
    img = image_figures(n_big, n_small, repeats)
    videos = [
        video_storage_rows("2 x 10 s 1280x720 h264, CRF 23 (photo_video_mp4)", [photo_video_mp4(s) for s in (3, 4)]),
        video_storage_rows(
            "3 x 10 s 640x360 h264, CRF 28 (video_mp4: the issue's 71x)", [video_mp4(s) for s in (7, 8, 9)]
        ),
    ]
    reader, online, reader_repeats = reader_figures()
    raw_job, raw_bare = img.job_cpu_ms["raw"], img.bare_cpu_ms["raw"]
    adds = {mode: img.job_cpu_ms[mode] / raw_job - 1 for mode in STORAGE_MODES}
    image_lines = "\n".join(
        f"| {mode} | **{img.ratio[mode]:.2f}x** | {img.per_token[mode]:,.0f} | {img.error[mode]} | {img.job_cpu_ms[mode]:.2f} "
        f"| {adds[mode]:+.0%} | {img.bare_cpu_ms[mode]:.2f} | {img.bare_cpu_ms[mode] / raw_bare - 1:+.0%} |"
        for mode in STORAGE_MODES
    )
    video_lines = "\n".join(
        f"| {label} | {mode} | **{rows[mode][0]:.1f}x** | {rows[mode][2]:,.0f} | {rows[mode][1]} |"
        for label, rows in videos
        for mode in rows
    )
    reader_lines = "\n".join(
        f"| {mode} | {m.cpu_per_mtok:,.2f} | {m.cpu_per_pack_ms:,.3f} | **{online.cpu_per_mtok / m.cpu_per_mtok:,.1f}x** |"
        for mode, m in reader.items()
    )
    video_jpeg = [rows["jpeg"][0] for _, rows in videos]
    worst_reader = min(online.cpu_per_mtok / m.cpu_per_mtok for m in reader.values())
    return f"""## Stored frames: bytes, error, encode cost and reader cost per storage mode (issue 30)

`{STORAGE_COMMAND}` (this section: `BENCH_STORAGE_IMAGES={n_big}`, repeats {repeats})

- jpeg images (q95, 4:4:4): **{img.ratio["jpeg"]:.2f}x** the source JPEG bytes, {img.error["jpeg"]} (target <= 2x and
  MAE <= 2/255: {_verdict(img.ratio["jpeg"] <= 2.0)})
- png images: {img.error["png"]}, **{img.ratio["png"]:.2f}x** the source (target identical and <= 8x:
  {_verdict(img.error["png"] == "identical" and img.ratio["png"] <= 8.0)})
- jpeg video: **{video_jpeg[0]:.1f}x** the 720p h264 source and **{video_jpeg[1]:.1f}x** the low-bitrate 640x360 clip
  the issue's 71x came from (target <= 15x: {_verdict(video_jpeg[0] <= 15.0)} and {_verdict(video_jpeg[1] <= 15.0)})
- reader vs online loading, multimodal: **{worst_reader:,.1f}x** less CPU per training token in the costliest
  mode (target >= 10x: {_verdict(worst_reader >= 10.0)})
- encoding adds **{adds["jpeg"]:+.0%}** (jpeg) and **{adds["png"]:+.0%}** (png) to the in-process image job's CPU
  (target <= +{ENCODE_TARGET:.0%}: jpeg {_verdict(adds["jpeg"] <= ENCODE_TARGET)})

**Images**: bench_job's photo-like set (`bench_job.photo`, seeds 0..{n_big - 1}: 640x480 .. 1600x1184, each at its
native grid, {img.source_mb:.1f} MB of JPEG q90), a LLaVA WebDataset cooked in-process (`cook run
pipelines/omni_sft.yaml --workers 0` with bench_job's sets and `media.image.storage` / `media.video.storage`
set to the mode). Job CPU: user+sys of the job's process tree (`bench/job_run.py`), **marginal** ({n_big} - {n_small}
images: start-up cancels), median of {repeats}, the modes interleaved. Stored bytes: `cook stats`' image member
bytes (frames or `pixel_patches.npy` rows) over the source JPEG bytes. Error: every pack's patches as the
reader yields them (`decode_pack`) against the raw job's. Bare: in this process, Pillow decode to RGB and the
uint8 [P, 768] patch copy (bench_job's baseline), then the frame encoded as the writer does
(`cook.frames.encode_frame`), marginal and median likewise.

| mode | stored / source | stored B / token | error vs raw | job CPU ms / image | vs raw job | bare decode + patchify (+ encode) ms / image | vs bare |
| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |
{image_lines}

**Video**: clips cooked by `process_media` at omni_sft's video settings (2 fps, 8..32 frames, 1024-patch
frames), each frame stored as the writer stores it; stored bytes over the mp4 bytes, error of the decoded frames
against the raw patches. The 720p clips are a panning photo-like scene (bench_media's photo texture) with light
noise per frame, encoded by x264 at its default CRF 23; the 640x360 clips are the moving gradients of the storage
table above (CRF 28, ~0.2 MB for 10 s). The ratio is mostly the source's bitrate: h264 spends its bits on motion
and noise across 240 frames, cook stores 20 sampled frames as stills.

| clips | mode | stored / source | stored B / token | error vs raw |
| --- | --- | ---: | ---: | --- |
{video_lines}

**Reader**: bench_reader's multimodal corpus (the demo's images, video with sound and audio x 40, demo.yaml's
media settings) cooked once per mode; `bench_reader.marginal` (CPU of the read loop's process tree, 20 -> 1020
packs for the reader, 3 -> 23 for online loading, median of {reader_repeats}; loader workers 0, batch 1). Online loading
(decode + patchify + tokenize + pack in the loader): {online.cpu_per_mtok:,.2f} CPU-s per M training tokens.

| mode | reader CPU-s per M training tokens | CPU ms per pack | online / reader |
| --- | ---: | ---: | ---: |
{reader_lines}

Encoding cost: in the bare path a JPEG encode (q95 4:4:4, with the unpatchify copy in front of it) adds
{img.bare_cpu_ms["jpeg"] - raw_bare:.2f} ms per image to {raw_bare:.2f} ms of decode + patchify; +{ENCODE_TARGET:.0%} of the raw job's
{raw_job:.2f} ms per image allows {ENCODE_TARGET * raw_job:.2f} ms. Pillow (libjpeg-turbo {_turbo_version()}) has no faster setting that keeps
the declared bytes: its encoder takes no DCT method, and 4:2:0 chroma would change the contract. What could
reach the cap (not measured here): libjpeg-turbo's fast integer DCT (`TJFLAG_FASTDCT`, through PyTurboJPEG or
simplejpeg, not installed here; a new encoder in the contract), nvJPEG encode on a GPU, or storing the source
JPEG as it is where it already is the frame (native grid, baseline, RGB, no EXIF turn): no encode at all, and
exactly raw's patches under the same decoder.
"""


def _turbo_version() -> str:
    from PIL import features

    return str(features.version_feature("libjpeg_turbo"))


if __name__ == "__main__":
    print(report(), end="")
    print()
    print(storage_report(), end="")
