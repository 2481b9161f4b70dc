"""Limits are enforced from headers and metadata, BEFORE anything is decoded."""

from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageFile

from cook.errors import Rejected, RejectReason
from cook.media import process_media
from cook.media.limits import video_fps
from cook.types import MediaRef

from .media_data import compressed_audio, config, png_header_only, rgb_bytes, sine, sound_bytes, video_bytes

IMAGE = MediaRef(kind="image", ref="x.png")
VIDEO = MediaRef(kind="video", ref="x.mp4")
AUDIO = MediaRef(kind="audio", ref="x.wav")


def _reason(ref: MediaRef, data: bytes, **overrides: dict) -> RejectReason:
    with pytest.raises(Rejected) as err:
        process_media(ref, data, config(**overrides))
    return err.value.reason


@pytest.fixture
def no_image_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: ImageFile.ImageFile) -> None:
        raise AssertionError("the raster was decoded")

    monkeypatch.setattr(ImageFile.ImageFile, "load", refuse)


@pytest.mark.parametrize("mode", ["dynamic", "tiles"])
def test_png_header_claiming_30000_squared_is_a_limit(no_image_decoding: None, mode: str) -> None:
    data = png_header_only(30_000, 30_000)
    assert len(data) < 100
    assert _reason(IMAGE, data, image={"mode": mode}) == RejectReason.MEDIA_LIMIT


@pytest.mark.parametrize("max_pixels", [100 * 100 - 1, 1000])
def test_own_pixel_check_before_decode(no_image_decoding: None, max_pixels: int) -> None:
    data = rgb_bytes(np.zeros((100, 100, 3), np.uint8))
    assert _reason(IMAGE, data, image={"max_pixels": max_pixels}) == RejectReason.MEDIA_LIMIT


def test_pixel_check_survives_pillow_guard_being_off(no_image_decoding: None, monkeypatch: pytest.MonkeyPatch) -> None:
    from cook.media import limits

    # Pillow's global guard off, and open_image_header's assignment to it redirected to a stand-in
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", None)
    monkeypatch.setattr(limits, "Image", SimpleNamespace(**vars(Image)))
    data = rgb_bytes(np.zeros((100, 100, 3), np.uint8))
    assert _reason(IMAGE, data, image={"max_pixels": 5000}) == RejectReason.MEDIA_LIMIT


def test_config_limit_above_pillow_default_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    # 200x200 = 40000 px: over a small Pillow default, under our limit -> accepted, not a bomb warning
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 30_000)
    (item,) = process_media(IMAGE, rgb_bytes(np.zeros((200, 200, 3), np.uint8)), config(image={"max_pixels": 50_000}))
    assert item.size == (1, 512, 512)


def test_media_bytes_limit_checked_first() -> None:
    data = png_header_only(10, 10)
    assert _reason(IMAGE, data, max_media_bytes=10) == RejectReason.MEDIA_LIMIT


def test_video_duration_from_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    from cook.media import video

    def refuse(*args: object) -> None:
        raise AssertionError("frames were decoded")

    monkeypatch.setattr(video, "decode_frames_at", refuse)
    data = video_bytes(seconds=10.0, fps=10, width=32, height=32)
    assert _reason(VIDEO, data, video={"max_duration_s": 5.0}) == RejectReason.MEDIA_LIMIT


def test_video_frame_size_is_limited() -> None:
    data = video_bytes(seconds=1.0, fps=10, width=64, height=48)
    assert _reason(VIDEO, data, image={"max_pixels": 64 * 48 - 1}) == RejectReason.MEDIA_LIMIT


def test_absurd_frame_rate_is_rejected() -> None:
    stream = SimpleNamespace(average_rate=Fraction(10**6), guessed_rate=None)
    with pytest.raises(Rejected) as err:
        video_fps(stream)  # type: ignore[arg-type]
    assert err.value.reason == RejectReason.MEDIA_DECODE
    assert video_fps(SimpleNamespace(average_rate=None, guessed_rate=None)) is None  # type: ignore[arg-type]


def test_audio_duration_before_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    import soundfile

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("samples were read")

    monkeypatch.setattr(soundfile, "blocks", refuse)
    for fmt_name in ("WAV", "FLAC"):
        data = sound_bytes(sine(440.0, 3.0, 16_000), 16_000, fmt_name)
        assert _reason(AUDIO, data, audio={"max_duration_s": 2.0}) == RejectReason.MEDIA_LIMIT


@pytest.mark.parametrize(("container", "codec"), [("mp3", "libmp3lame"), ("ipod", "aac")])
def test_compressed_audio_duration(container: str, codec: str) -> None:
    data = compressed_audio(sine(440.0, 3.0, 16_000), 16_000, container, codec)
    assert _reason(AUDIO, data, audio={"max_duration_s": 2.0}) == RejectReason.MEDIA_LIMIT


def test_video_audio_track_uses_the_audio_limit() -> None:
    data = video_bytes(seconds=3.0, audio=True)
    overrides = {"video": {"use_audio": True}, "audio": {"max_duration_s": 1.0}}
    assert _reason(VIDEO, data, **overrides) == RejectReason.MEDIA_LIMIT


def _valid_media() -> dict[str, tuple[MediaRef, bytes]]:
    pixels = np.random.default_rng(3).integers(0, 256, (40, 56, 3), dtype=np.uint8)
    return {
        "png": (IMAGE, rgb_bytes(pixels)),
        "jpeg": (IMAGE, rgb_bytes(pixels, "JPEG")),
        "wav": (AUDIO, sound_bytes(sine(440.0, 0.5, 8_000), 8_000)),
        "flac": (AUDIO, sound_bytes(sine(440.0, 0.5, 8_000), 8_000, "FLAC")),
        "mp3": (AUDIO, compressed_audio(sine(440.0, 0.5, 16_000), 16_000)),
        "mp4": (VIDEO, video_bytes(seconds=1.0, fps=4, width=32, height=32)),
    }


VALID = _valid_media()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(sorted(VALID)),
    cut=st.floats(0.0, 1.0),
    flips=st.lists(st.tuples(st.floats(0.0, 1.0), st.integers(0, 255)), max_size=8),
)
def test_corrupted_media_only_ever_rejects(kind: str, cut: float, flips: list[tuple[float, int]]) -> None:
    ref, data = VALID[kind]
    damaged = bytearray(data[: max(1, int(len(data) * (0.3 + 0.7 * cut)))])
    for where, value in flips:
        damaged[int(where * (len(damaged) - 1))] = value
    try:
        items = process_media(ref, bytes(damaged), config())
    except Rejected as err:
        assert err.reason in set(RejectReason)  # only Rejected may escape the media stage
        return
    for item in items:
        assert item.n_embeddings > 0
