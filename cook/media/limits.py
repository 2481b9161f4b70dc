"""Checks that protect the machine, done from headers and metadata BEFORE any pixel or sample is decoded.

    image bytes  -> open_image_header  -> an unloaded Pillow image whose width x height was checked
    video stream -> video_duration_s   -> seconds (metadata only), checked against max_duration_s
    audio bytes  -> check_duration     -> after soundfile.info / stream_duration_s (the container header)

PyAV's and Pillow's own failures on bad input (``av_errors``, ``PIL_DECODE_ERRORS``) live here too,
so image, video and audio share one list each, and ``decoding`` / ``open_container`` guard PyAV calls.

Every crossing raises ``Rejected(MEDIA_LIMIT)`` whose detail names the knob that moves the limit;
implausible metadata (no stream, zero frames, absurd frame rate) raises ``Rejected(MEDIA_DECODE)``.

Pillow's own decompression-bomb guard is aligned with ours: ``open_image_header`` sets
``PIL.Image.MAX_IMAGE_PIXELS`` (a process global) to ``media.image.max_pixels`` and turns both
``DecompressionBombWarning`` and ``DecompressionBombError`` into ``MEDIA_LIMIT``, so an image over the
limit is refused by Pillow inside ``Image.open`` (it never allocates the raster) and, should anyone
reset the global, by our own width x height check right after.
"""

from __future__ import annotations

import contextlib
import io
import math
import struct
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from PIL import Image, UnidentifiedImageError

from cook.errors import Rejected, RejectReason

if TYPE_CHECKING:
    from av.container import InputContainer
    from av.stream import Stream
    from av.video.stream import VideoStream

MAX_SOURCE_FPS: Final = 1000.0  # a stream claiming more frames per second than this is corrupt

# What Pillow raises on corrupt input at open/load/convert time (plugins raise SyntaxError, EOFError,
# struct.error, IndexError, KeyError, ... on malformed headers and bodies). Caught ONLY around a
# Pillow call (open, getexif, draft, load, exif_transpose, convert): the same exception from cook's own
# code is a bug, and a bug must stop the run (exit 1), not reject every image.
PIL_DECODE_ERRORS: Final = (
    OSError,
    ValueError,
    SyntaxError,
    EOFError,
    struct.error,
    IndexError,
    KeyError,
    TypeError,
    ZeroDivisionError,
)


def av_errors() -> tuple[type[BaseException], ...]:
    """What PyAV raises on corrupt, truncated or unsupported input. Caught ONLY around a PyAV call
    (``decoding``): the same exception from cook's own code is a bug and must stop the run."""
    import av

    return (av.error.FFmpegError, OSError, ValueError, EOFError, IndexError, ZeroDivisionError)


@contextlib.contextmanager
def decoding(what: str) -> Iterator[None]:
    """Wrap one PyAV call (open, demux, seek, decode, reformat): its ``av_errors()`` become
    ``Rejected(media_decode)``. Never wrap cook's own code in it."""
    try:
        yield
    except av_errors() as err:
        raise Rejected(RejectReason.MEDIA_DECODE, f"{what} undecodable: {short_error(err)}") from None


def open_container(data: bytes, what: str) -> InputContainer:
    """Bytes -> an open PyAV input container (header parsed, nothing decoded)."""
    import av

    with decoding(what):
        return av.open(io.BytesIO(data), mode="r")


# Signatures of formats we know and do not decode as images: refused as MEDIA_UNSUPPORTED, not DECODE.
_UNSUPPORTED_SIGNATURES: Final = (
    (b"%PDF", "PDF"),
    (b"<svg", "SVG"),
    (b"<?xml", "XML/SVG"),
    (b"\x1a\x45\xdf\xa3", "Matroska/WebM video"),
    (b"RIFF", "RIFF (WAV/AVI)"),
    (b"fLaC", "FLAC audio"),
    (b"OggS", "Ogg"),
    (b"ID3", "MP3 audio"),
)


def unsupported_image_format(data: bytes) -> str | None:
    """Name a known non-image (or unsupported image) format from its first bytes, else None."""
    head = data[:16].lstrip()
    for signature, name in _UNSUPPORTED_SIGNATURES:
        if head.startswith(signature):
            return name
    if data[4:8] == b"ftyp":  # ISO BMFF: mp4/mov video or HEIC/AVIF stills Pillow cannot open
        return f"ISO media ({data[8:12].decode('ascii', 'replace')})"
    return None


def open_image_header(data: bytes, max_pixels: int) -> Image.Image:
    """Open an image from bytes WITHOUT decoding it, and check its size against ``max_pixels``.

    Returns the lazily-loaded Pillow image (header parsed, raster not allocated).

    >>> open_image_header(png_header_claiming(30000, 30000), 178_956_970)  # doctest: +SKIP
    Rejected: media_limit: image 30000x30000 = 900000000 px > media.image.max_pixels=178956970
    """
    Image.MAX_IMAGE_PIXELS = max_pixels
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as err:
        raise Rejected(RejectReason.MEDIA_LIMIT, f"{short_error(err)} (media.image.max_pixels={max_pixels})") from None
    except UnidentifiedImageError:
        known = unsupported_image_format(data)
        if known is not None:
            raise Rejected(RejectReason.MEDIA_UNSUPPORTED, f"{known} is not a supported image format") from None
        raise Rejected(RejectReason.MEDIA_DECODE, "cannot identify image data") from None
    except PIL_DECODE_ERRORS as err:
        raise Rejected(RejectReason.MEDIA_DECODE, f"image header unreadable: {short_error(err)}") from None
    width, height = image.size
    if width < 1 or height < 1:
        raise Rejected(RejectReason.MEDIA_DECODE, f"image has an empty size {width}x{height}")
    check_pixels(width, height, max_pixels)
    return image


def check_pixels(width: int, height: int, max_pixels: int) -> None:
    if width * height > max_pixels:
        raise Rejected(
            RejectReason.MEDIA_LIMIT,
            f"image {width}x{height} = {width * height} px > media.image.max_pixels={max_pixels}",
        )


def check_duration(duration_s: float, max_duration_s: float, knob: str) -> None:
    """``MEDIA_LIMIT`` when the duration from metadata exceeds the limit ``knob`` (its config path)."""
    if not math.isfinite(duration_s) or duration_s > max_duration_s:
        raise Rejected(RejectReason.MEDIA_LIMIT, f"duration {duration_s:.2f} s > {knob}={max_duration_s:g}")


def video_stream(container: InputContainer) -> VideoStream:
    if not container.streams.video:
        raise Rejected(RejectReason.MEDIA_DECODE, "no video stream")
    return container.streams.video[0]


def video_fps(stream: VideoStream) -> float | None:
    """The stream's average (else guessed) frame rate; ``MEDIA_DECODE`` when it is absurd, None if unknown."""
    rate = stream.average_rate or stream.guessed_rate
    if rate is None:
        return None
    fps = float(rate)
    if not (0.0 < fps <= MAX_SOURCE_FPS):
        raise Rejected(RejectReason.MEDIA_DECODE, f"implausible frame rate {fps:g} fps")
    return fps


def stream_duration_s(container: InputContainer, stream: Stream) -> float | None:
    """Duration from headers only (the stream's, then the container's); None if neither has one."""
    if stream.duration and stream.time_base:
        return float(stream.duration * stream.time_base)
    if container.duration and container.duration > 0:
        return container.duration / 1_000_000  # av.time_base
    return None


def video_duration_s(container: InputContainer, stream: VideoStream) -> float | None:
    """Duration from metadata only (stream, then container header, then frames / fps); None if unknown."""
    duration = stream_duration_s(container, stream)
    if duration is not None:
        return duration
    fps = video_fps(stream)
    if stream.frames and fps:
        return stream.frames / fps
    return None


def short_error(err: BaseException) -> str:
    """First line of an exception message (at most 200 characters), for a reject detail."""
    return str(err).splitlines()[0][:200] if str(err) else type(err).__name__
