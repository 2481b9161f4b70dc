"""Video bytes -> a frames ``MediaItem`` (+ an audio item when ``media.video.use_audio``), SPEC §6.

    bytes -> PyAV container -> metadata checks (limits: duration, frame rate, frame size)
          -> packet index (demux only: keyframe timestamps, frame count; nothing decoded)
          -> n frames at evenly spaced times in the clip window -> seek + decode each
          -> swscale to planar RGB at the video patch grid (BICUBIC) -> patches uint8 [frames * gh * gw, 768]
          -> one block per pair of frames, each on its own line (SPEC §5):
             "Frame 1 sampled at X.XX seconds: <img><image>x(gh*gw/4)</img>\\nFrame 2 sampled at ..."

**Frame count.** ``window_s`` is the clip ``[start_s, end_s]`` of the ``MediaRef`` intersected with
``[0, duration]`` (the whole video by default). ``n = floor(window_s * fps)``, clamped to
``[min_frames, max_frames]``, then rounded DOWN to a multiple of ``TEMPORAL_PATCH`` (2), and at least 2.
Frames are sampled at the midpoints of ``n`` equal segments of the window:
``t_i = start + (i + 0.5) * window_s / n``; each sample is the first frame whose timestamp is at or
after ``t_i`` (the last frame when ``t_i`` is past the end). A short or low-frame-rate video may repeat
frames. Example: 3 s at 10 fps, ``fps = 2`` -> 6 -> clamped to 8 -> targets 0.1875, 0.5625, ... 2.8125 s
-> frames at 0.2, 0.6, 1.0, 1.4, 1.7, 2.1, 2.5, 2.9 s -> 4 groups prefixed "Frame 1 sampled at 0.20
seconds: ", "\\nFrame 2 sampled at 1.00 seconds: ", ... (the time of each group's first frame, relative
to the video's start, whatever the clip window). The ``\\n`` that puts each group after the first on its
own line is part of that group's prefix, so the text between ``</img>`` and the next ``<img>`` is one
string, ``"\\nFrame 2 sampled at 1.00 seconds: "``, tokenized as Hugging Face tokenizes it. Without
``media.video.frame_timestamps`` the prefixes are ``""``, ``"\\n"``, ``"\\n"``, ...

**Seeking, not scanning.** One demux pass (packets only, no decoding) lists the packet and keyframe
timestamps. For each target the decoder continues forward when it already stands at or after the last
keyframe before the target (decoding on is then never more work than seeking), or when at most
``SEEK_SKIPS_FRAMES`` (16) frames separate it from that keyframe (a seek flushes the decoder, which
costs about as much); otherwise it seeks (``container.seek``, backward, to that keyframe) and decodes
forward to the target. A long video therefore costs about one GOP (+16 frames) of decoding per
sampled frame, never the whole stream.

**Frame grid.** ``image.choose_grid(H, W, target_patches, target_patches)``: the image rule with
``min = max = target_patches``, i.e. an even x even grid of at most ``target_patches`` with the frame's
aspect, as close to it as the walk reaches (64x48 -> 28 x 36 = 1008 patches at the default 1024; a
square frame -> 32 x 32). Sample aspect ratio and rotation metadata are ignored.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from cook import format as fmt
from cook.config import MediaConfig, VideoConfig
from cook.errors import Rejected, RejectReason
from cook.frames import patchify_planes
from cook.media.image import choose_grid
from cook.media.limits import (
    check_duration,
    check_pixels,
    decoding,
    open_container,
    video_duration_s,
    video_fps,
    video_stream,
)
from cook.types import MediaItem, MediaRef, PlaceholderBlock

if TYPE_CHECKING:
    from av.container import InputContainer
    from av.video.stream import VideoStream

# A seek flushes the decoder (and its threads) and restarts at a keyframe: measured at about the cost of
# decoding 15-25 small h264 frames. Closer keyframes are reached by decoding on.
SEEK_SKIPS_FRAMES: Final = 16
RESAMPLE_SWS: Final = "BICUBIC"  # swscale's bicubic, the same kernel family as image.py's Pillow BICUBIC


def process_video(ref: MediaRef, data: bytes, config: MediaConfig) -> tuple[MediaItem, ...]:
    """Video bytes -> ``(frames item,)`` or ``(frames item, audio item)`` (``use_audio`` and a track)."""
    with open_container(data, "video") as container:
        item = _frames_item(ref, container, config)
        has_audio = bool(container.streams.audio)
    if not (config.video.use_audio and has_audio):
        return (item,)
    from cook.media.audio import decode_container_audio, make_audio_item

    samples = decode_container_audio(data, config.audio.max_duration_s, ref.start_s, ref.end_s)
    return item, make_audio_item(samples)


def _frames_item(ref: MediaRef, container: InputContainer, config: MediaConfig) -> MediaItem:
    vcfg = config.video
    stream = video_stream(container)
    if stream.codec_context is None:
        raise Rejected(RejectReason.MEDIA_DECODE, "no decoder for the video stream (unknown or corrupt codec)")
    width, height = stream.codec_context.width, stream.codec_context.height
    if width < 1 or height < 1:
        raise Rejected(RejectReason.MEDIA_DECODE, f"video frame size {width}x{height}")
    check_pixels(width, height, config.image.max_pixels)
    video_fps(stream)  # rejects an absurd frame rate
    duration = video_duration_s(container, stream)
    if duration is not None:
        check_duration(duration, vcfg.max_duration_s, "media.video.max_duration_s")
    index = PacketIndex.build(container, stream)
    if duration is None:
        duration = index.duration_s
        check_duration(duration, vcfg.max_duration_s, "media.video.max_duration_s")
    window = clip_window(ref, duration)
    n_frames = frame_count(window[1] - window[0], vcfg)
    targets = sample_times(window, n_frames)
    grid_h, grid_w = choose_grid(height, width, vcfg.target_patches, vcfg.target_patches)
    frames, times, _ = decode_frames_at(container, stream, index, targets)
    size = (grid_w * fmt.PATCH_SIZE, grid_h * fmt.PATCH_SIZE)
    patches = frame_patches(frames, size)  # uint8 [frames*gh*gw, 768]
    per_group = fmt.image_embeddings(size[1], size[0])
    blocks = tuple(
        PlaceholderBlock(
            prefix=frame_prefix(group, times[group * fmt.TEMPORAL_PATCH], vcfg.frame_timestamps),
            start=fmt.IMG_START,
            token=fmt.IMAGE_TOKEN,
            count=per_group,
            end=fmt.IMG_END,
        )
        for group in range(n_frames // fmt.TEMPORAL_PATCH)
    )
    assert sum(b.count for b in blocks) == fmt.video_embeddings(n_frames, size[1], size[0])
    return MediaItem(
        kind="video",
        blocks=blocks,
        patches=patches,
        size=(n_frames, size[1], size[0]),
        visual_kind="video",
    )


def frame_prefix(group: int, seconds: float, timestamps: bool) -> str:
    """The text before frame group ``group``'s ``<img>``: each group after the first starts a new line.

    >>> frame_prefix(0, 0.2, True), frame_prefix(1, 1.0, True), frame_prefix(1, 1.0, False)
    ('Frame 1 sampled at 0.20 seconds: ', '\\nFrame 2 sampled at 1.00 seconds: ', '\\n')
    """
    return ("\n" if group else "") + (fmt.video_frame_line(group, seconds) if timestamps else "")


def frame_patches(frames: list[Any], size: tuple[int, int]) -> np.ndarray:
    """Decoded frames -> uint8 [frames * (H/16)(W/16), 768], each resized to ``size`` (W, H).

    One swscale pass per distinct frame converts to planar RGB and resizes (BICUBIC, antialiased
    when shrinking); a frame sampled twice is converted once.
    """
    from av.video.reformatter import VideoReformatter

    reformatter = VideoReformatter()
    width, height = size
    converted: dict[int, np.ndarray] = {}
    for frame in frames:
        if id(frame) not in converted:
            with decoding("video frame"):
                planar = reformatter.reformat(frame, width, height, format="gbrp", interpolation=RESAMPLE_SWS)
            green, blue, red = (_plane(plane, height, width) for plane in planar.planes)
            converted[id(frame)] = patchify_planes([red, green, blue])
    return np.concatenate([converted[id(frame)] for frame in frames])


def _plane(plane: Any, height: int, width: int) -> np.ndarray:
    """A PyAV video plane -> uint8 [H, W] view (rows may carry padding up to ``line_size``)."""
    return np.frombuffer(plane, np.uint8).reshape(height, plane.line_size)[:, :width]


def clip_window(ref: MediaRef, duration_s: float) -> tuple[float, float]:
    """``[start_s, end_s]`` of the ref intersected with ``[0, duration_s]``; ``MEDIA_DECODE`` if empty."""
    start = max(0.0, ref.start_s or 0.0)
    end = duration_s if ref.end_s is None else min(duration_s, ref.end_s)
    if not end > start:
        raise Rejected(
            RejectReason.MEDIA_DECODE,
            f"clip window [{ref.start_s}, {ref.end_s}] is empty for a {duration_s:.2f} s medium",
        )
    return start, end


def frame_count(window_s: float, config: VideoConfig) -> int:
    """``floor(window_s * fps)`` clamped to ``[min_frames, max_frames]``, rounded down to even, >= 2.

    >>> frame_count(3.0, VideoConfig()), frame_count(10.0, VideoConfig()), frame_count(600.0, VideoConfig())
    (8, 20, 32)
    """
    n = min(max(math.floor(window_s * config.fps), config.min_frames), config.max_frames)
    return max(fmt.TEMPORAL_PATCH, n - n % fmt.TEMPORAL_PATCH)


def sample_times(window: tuple[float, float], n_frames: int) -> list[float]:
    """Midpoints of ``n_frames`` equal segments of the window, in seconds from the video's start."""
    start, end = window
    step = (end - start) / n_frames
    return [start + (i + 0.5) * step for i in range(n_frames)]


@dataclass(frozen=True)
class PacketIndex:
    """Keyframe timestamps of a video stream from one demux pass (no decoding), in stream time_base."""

    keyframes: list[int]  # sorted pts of keyframe packets
    packets: list[int]  # sorted pts of all packets that have one
    n_packets: int
    start_pts: int
    time_base: Fraction
    duration_s: float

    @classmethod
    def build(cls, container: InputContainer, stream: VideoStream) -> PacketIndex:
        keyframes: list[int] = []
        packets: list[int] = []
        n_packets, end_pts = 0, 0
        start_pts = stream.start_time or 0
        for packet in _demuxed(container, stream):
            if packet.size == 0:  # the flush packet at EOF
                continue
            n_packets += 1
            if packet.pts is not None:
                end_pts = max(end_pts, packet.pts + (packet.duration or 0))
                packets.append(packet.pts)
                if packet.is_keyframe:
                    keyframes.append(packet.pts)
        if n_packets == 0:
            raise Rejected(RejectReason.MEDIA_DECODE, "video stream has no frames")
        if not stream.time_base:
            raise Rejected(RejectReason.MEDIA_DECODE, "video stream has no time base")
        keyframes.sort()
        packets.sort()
        duration_s = float((end_pts - start_pts) * stream.time_base)
        return cls(keyframes, packets, n_packets, start_pts, stream.time_base, duration_s)

    def keyframe_before(self, pts: int) -> int | None:
        """The last keyframe pts ``<= pts``, None when there is none (or no timestamps were stored)."""
        i = bisect.bisect_right(self.keyframes, pts)
        return self.keyframes[i - 1] if i else None

    def frames_between(self, after: int, before: int) -> int:
        """Packets (frames) with ``after < pts < before``."""
        return max(0, bisect.bisect_left(self.packets, before) - bisect.bisect_right(self.packets, after))

    def to_pts(self, seconds: float) -> int:
        """Seconds from the stream start -> the smallest pts at or after that time (1e-6 s tolerance)."""
        return self.start_pts + math.ceil((seconds - 1e-6) / float(self.time_base))

    def to_seconds(self, pts: int) -> float:
        return float((pts - self.start_pts) * self.time_base)


def _demuxed(container: InputContainer, stream: VideoStream) -> Iterator[Any]:
    """``container.demux(stream)``: packets, nothing decoded; PyAV's errors are ``media_decode``."""
    with decoding("video"):
        yield from container.demux(stream)


def _decoded(container: InputContainer, stream: VideoStream) -> Iterator[Any]:
    """``container.decode(stream)`` from where the demuxer stands; PyAV's errors are ``media_decode``.
    (The caller's loop body runs outside this generator, so its errors are not caught here.)"""
    with decoding("video"):
        yield from container.decode(stream)


def _seek(container: InputContainer, stream: VideoStream, pts: int) -> Iterator[Any]:
    """Seek back to ``pts`` (a keyframe) and return a fresh frame iterator from there."""
    with decoding("video"):
        container.seek(pts, stream=stream, backward=True)
    return _decoded(container, stream)


def _worth_seeking(index: PacketIndex, position: int, keyframe: int) -> bool:
    """Seek to ``keyframe`` only when more than ``SEEK_SKIPS_FRAMES`` frames lie between it and the decoder."""
    return position < keyframe and index.frames_between(position, keyframe) > SEEK_SKIPS_FRAMES


def decode_frames_at(
    container: InputContainer, stream: VideoStream, index: PacketIndex, targets_s: list[float]
) -> tuple[list[Any], list[float], int]:
    """Decode the first frame at/after each target time, seeking between targets when it saves work.

    Returns (decoded PyAV frames, their times in seconds from the video start, frames decoded in all);
    a frame that serves two targets appears twice (the same object).
    """
    frames: list[Any] = []
    times: list[float] = []
    decoded = 0
    iterator = None
    current = None  # the last decoded frame
    exhausted = False
    for target_s in targets_s:
        target = index.to_pts(target_s)
        position: int | None = None if current is None else current.pts
        if current is not None and (exhausted or position is None or position >= target):
            frames.append(frames[-1])  # the current frame is already the first at/after this target
            times.append(times[-1])
            continue
        keyframe = index.keyframe_before(target)
        if iterator is None or position is None or keyframe is None or _worth_seeking(index, position, keyframe):
            iterator = _seek(container, stream, target if keyframe is None else keyframe)
        for frame in iterator:
            decoded += 1
            current = frame
            if frame.pts is None or frame.pts >= target:
                break
        else:
            exhausted = True
        if current is None:
            raise Rejected(RejectReason.MEDIA_DECODE, "no frame could be decoded")
        frames.append(current)
        times.append(0.0 if current.pts is None else index.to_seconds(current.pts))
    return frames, times, decoded
