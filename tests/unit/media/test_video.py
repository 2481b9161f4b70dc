"""Video: frame count, sampled timestamps, seeking, frame grid, placeholders, audio track, errors."""

from __future__ import annotations

import io

import av
import numpy as np
import pytest

from cook import format as fmt
from cook.config import VideoConfig
from cook.errors import Rejected, RejectReason
from cook.media import process_media
from cook.media.video import PacketIndex, decode_frames_at, frame_count, frame_prefix, sample_times
from cook.types import MediaRef

from .media_data import compressed_audio, config, grey_level, sine, video_bytes

VIDEO = MediaRef(kind="video", ref="clip.mp4")


@pytest.fixture(scope="module")
def three_seconds() -> bytes:
    return video_bytes(seconds=3.0, fps=10)


@pytest.mark.parametrize(
    ("window_s", "fps", "min_frames", "max_frames", "expected"),
    [
        (3.0, 2.0, 8, 32, 8),
        (10.0, 2.0, 8, 32, 20),
        (600.0, 2.0, 8, 32, 32),
        (7.9, 2.0, 8, 32, 14),
        (4.6, 2.0, 3, 32, 8),
        (1.0, 2.0, 3, 32, 2),
        (0.1, 1.0, 2, 2, 2),
        (10.0, 2.0, 8, 9, 8),
    ],
)
def test_frame_count(window_s: float, fps: float, min_frames: int, max_frames: int, expected: int) -> None:
    vcfg = VideoConfig(fps=fps, min_frames=min_frames, max_frames=max_frames)
    assert frame_count(window_s, vcfg) == expected


def test_three_second_video(three_seconds: bytes) -> None:
    (item,) = process_media(VIDEO, three_seconds, config())
    assert item.kind == "video" and item.visual_kind == "video"
    assert item.size == (8, 28 * 16, 36 * 16)  # 64x48 -> 28 x 36 = 1008 <= 1024 patches
    assert item.patches is not None and item.patches.shape == (8 * 1008, 768) and item.patches.dtype == np.uint8
    assert [b.count for b in item.blocks] == [252] * 4
    assert item.n_embeddings == fmt.video_embeddings(8, 448, 576) == 1008
    assert [b.prefix for b in item.blocks] == [
        "Frame 1 sampled at 0.20 seconds: ",
        "\nFrame 2 sampled at 1.00 seconds: ",
        "\nFrame 3 sampled at 1.70 seconds: ",
        "\nFrame 4 sampled at 2.50 seconds: ",
    ]
    assert all((b.start, b.token, b.end) == (fmt.IMG_START, fmt.IMAGE_TOKEN, fmt.IMG_END) for b in item.blocks)
    # frames are the ones at/after the segment midpoints, patches frame-major
    sampled = [2, 6, 10, 14, 17, 21, 25, 29]
    for slot, index in enumerate(sampled):
        frame = item.patches[slot * 1008 : (slot + 1) * 1008].astype(float)
        assert abs(frame.mean() - grey_level(index)) < 4, (slot, index, frame.mean())


def test_without_timestamps(three_seconds: bytes) -> None:
    (item,) = process_media(VIDEO, three_seconds, config(video={"frame_timestamps": False}))
    assert [b.prefix for b in item.blocks] == ["", "\n", "\n", "\n"]  # still one line per frame group


def test_ten_seconds_and_square_target() -> None:
    data = video_bytes(seconds=10.0, fps=10, width=32, height=32)
    (item,) = process_media(VIDEO, data, config())
    assert item.size == (20, 512, 512) and len(item.blocks) == 10
    assert all(b.count == 256 for b in item.blocks)
    (item,) = process_media(VIDEO, data, config(video={"target_patches": 64, "max_frames": 8}))
    assert item.size == (8, 128, 128) and [b.count for b in item.blocks] == [16] * 4


def test_clip_window(three_seconds: bytes) -> None:
    ref = MediaRef(kind="video", ref="clip.mp4", start_s=1.0, end_s=2.0)
    (item,) = process_media(ref, three_seconds, config())
    assert item.size[0] == 8
    # targets 1.0625 + k * 0.125 -> frames 1.1 1.2 1.4 1.5 1.6 1.7 1.9 2.0; times from the video start
    expected = [frame_prefix(i, t, True) for i, t in enumerate((1.1, 1.4, 1.6, 1.9))]
    assert expected[1] == "\nFrame 2 sampled at 1.40 seconds: "
    assert [b.prefix for b in item.blocks] == expected
    with pytest.raises(Rejected) as err:
        process_media(MediaRef(kind="video", ref="clip.mp4", start_s=5.0), three_seconds, config())
    assert err.value.reason == RejectReason.MEDIA_DECODE and "clip window" in err.value.detail


def _decode_count(data: bytes, targets: list[float]) -> tuple[list[float], int, PacketIndex]:
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.video[0]
        index = PacketIndex.build(container, stream)
        _, times, decoded = decode_frames_at(container, stream, index, targets)
    return times, decoded, index


def test_seeking_decodes_a_fraction_of_a_long_video() -> None:
    data = video_bytes(seconds=120.0, fps=10, width=32, height=32, gop=10, pattern="ramp")
    targets = sample_times((0.0, 120.0), 32)
    times, decoded, index = _decode_count(data, targets)
    assert index.n_packets == 1200 and len(index.keyframes) <= 130  # the GOP held: ~1 keyframe in 10
    assert times == pytest.approx([np.ceil(t * 10 - 1e-6) / 10 for t in targets])
    assert decoded <= 32 * 10 < 1200 // 2  # at most one GOP per sampled frame


def test_one_keyframe_never_decodes_more_than_the_stream() -> None:
    data = video_bytes(seconds=10.0, fps=10, width=32, height=32, codec="libx264", gop=1000, pattern="ramp")
    targets = sample_times((0.0, 10.0), 20)
    times, decoded, index = _decode_count(data, targets)
    assert len(index.keyframes) == 1
    assert decoded <= 100  # decodes on instead of seeking back to the only keyframe for every target
    assert times == pytest.approx([np.ceil(t * 10 - 1e-6) / 10 for t in targets])


def test_audio_track_as_second_item() -> None:
    data = video_bytes(seconds=3.0, audio=True)
    video_item, audio_item = process_media(VIDEO, data, config(video={"use_audio": True}))
    assert video_item.kind == "video" and audio_item.kind == "audio"
    assert audio_item.audio_lengths is not None and abs(int(audio_item.audio_lengths[0]) - 300) <= 2
    assert audio_item.n_embeddings == fmt.audio_clip_tokens(int(audio_item.audio_lengths[0]) * fmt.AUDIO_HOP)
    assert len(process_media(VIDEO, data, config())) == 1  # use_audio off
    assert len(process_media(VIDEO, video_bytes(seconds=3.0), config(video={"use_audio": True}))) == 1


@pytest.mark.parametrize("cut", ["garbage", "truncated", "audio_only", "empty"])
def test_undecodable_videos(three_seconds: bytes, cut: str) -> None:
    data = {
        "garbage": b"\x00\x01garbage" * 100,
        "truncated": three_seconds[: len(three_seconds) // 3],
        "audio_only": compressed_audio(sine(440.0, 1.0, 16_000), 16_000),
        "empty": b"",
    }[cut]
    with pytest.raises(Rejected) as err:
        process_media(VIDEO, data, config())
    assert err.value.reason == RejectReason.MEDIA_DECODE
