"""Test media generated on the fly: images from numpy via Pillow, video and compressed audio encoded
with PyAV, WAV/FLAC sines written with soundfile. Nothing is read from disk."""

from __future__ import annotations

import io
import struct
import zlib
from typing import Any

import numpy as np
from PIL import Image

from cook.config import AudioConfig, ImageConfig, MediaConfig, VideoConfig


def config(image: dict | None = None, video: dict | None = None, audio: dict | None = None, **top: int) -> MediaConfig:
    """A MediaConfig with some keys overridden."""
    return MediaConfig(
        image=ImageConfig(**(image or {})),
        video=VideoConfig(**(video or {})),
        audio=AudioConfig(**(audio or {})),
        **top,
    )


def image_bytes(image: Image.Image, fmt: str = "PNG", **save: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **save)
    return buffer.getvalue()


def rgb_bytes(array: np.ndarray, fmt: str = "PNG") -> bytes:
    """uint8 [H, W, 3] -> encoded image bytes."""
    return image_bytes(Image.fromarray(array.astype(np.uint8)), fmt)


def png_header_only(width: int, height: int) -> bytes:
    """A PNG whose IHDR claims ``width x height`` RGB but whose body is a few bytes."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 16)) + chunk(b"IEND", b"")


def sine(freq_hz: float, seconds: float, rate_hz: int, amplitude: float = 0.5) -> np.ndarray:
    """float32 [rate_hz * seconds]."""
    t = np.arange(round(seconds * rate_hz)) / rate_hz
    return (amplitude * np.sin(2 * np.pi * freq_hz * t)).astype(np.float32)


def sound_bytes(samples: np.ndarray, rate_hz: int, fmt: str = "WAV", subtype: str | None = None) -> bytes:
    """float32 [S] or [S, channels] -> WAV/FLAC bytes (soundfile)."""
    import soundfile as sf

    buffer = io.BytesIO()
    sf.write(buffer, samples, rate_hz, format=fmt, subtype=subtype)
    return buffer.getvalue()


def compressed_audio(samples: np.ndarray, rate_hz: int, container: str = "mp3", codec: str = "libmp3lame") -> bytes:
    """float32 [S] mono -> a compressed file encoded with PyAV (mp3 by default; "ipod"/"aac" for m4a)."""
    import av

    buffer = io.BytesIO()
    with av.open(buffer, "w", format=container) as out:
        stream = out.add_stream(codec, rate=rate_hz)
        stream.layout = "mono"
        fmt = stream.codec_context.codec.audio_formats[0].name
        size = stream.codec_context.frame_size or 1024
        for start in range(0, samples.shape[0], size):
            chunk = samples[start : start + size]
            frame = av.AudioFrame.from_ndarray(chunk[None, :].astype(np.float32), format="fltp", layout="mono")
            frame.sample_rate, frame.pts = rate_hz, start
            if fmt != "fltp":
                frame = av.AudioResampler(format=fmt, layout="mono", rate=rate_hz).resample(frame)[0]
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buffer.getvalue()


def grey_level(index: int) -> int:
    """The grey value of frame ``index`` in ``video_bytes(pattern="grey")``."""
    return 20 + (7 * index) % 220


def video_bytes(
    seconds: float = 3.0,
    fps: int = 10,
    width: int = 64,
    height: int = 48,
    codec: str = "mpeg4",
    gop: int = 12,
    pattern: str = "grey",
    audio: bool = False,
) -> bytes:
    """An mp4 encoded with PyAV. pattern "grey": frame i is uniformly ``grey_level(i)``; "ramp": a
    horizontal gradient shifting one pixel per frame (P-frames compress it, so ``gop`` holds)."""
    import av

    buffer = io.BytesIO()
    n_frames = round(seconds * fps)
    with av.open(buffer, "w", format="mp4") as out:
        stream = out.add_stream(codec, rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.codec_context.gop_size = gop
        audio_stream = _audio_stream(out, 16_000) if audio else None
        ramp = (np.arange(width * 4) * 255 // (width * 4)).astype(np.uint8)
        for i in range(n_frames):
            if pattern == "grey":
                pixels = np.full((height, width, 3), grey_level(i), np.uint8)
            else:
                row = np.roll(ramp, i)[:width]
                pixels = np.repeat(np.repeat(row[None, :, None], height, 0), 3, 2)
            for packet in stream.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
        if audio_stream is not None:
            _mux_audio(out, audio_stream, sine(440.0, seconds, 16_000, 0.3), 16_000)
    return buffer.getvalue()


def _audio_stream(out: Any, rate_hz: int) -> Any:
    stream = out.add_stream("aac", rate=rate_hz)
    stream.layout = "mono"
    return stream


def _mux_audio(out: Any, stream: Any, samples: np.ndarray, rate_hz: int) -> None:
    import av

    for start in range(0, samples.shape[0], 1024):
        frame = av.AudioFrame.from_ndarray(samples[None, start : start + 1024], format="fltp", layout="mono")
        frame.sample_rate, frame.pts = rate_hz, start
        for packet in stream.encode(frame):
            out.mux(packet)
    for packet in stream.encode(None):
        out.mux(packet)
