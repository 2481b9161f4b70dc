"""Audio: decoding paths, mono, resampling, clips and tokens, Parakeet features, errors, no torch."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from cook import format as fmt
from cook.errors import Rejected, RejectReason
from cook.media import process_media
from cook.media.audio import decode_audio, make_audio_item
from cook.media.mel import log_mel, mel_filters
from cook.types import MediaItem, MediaRef

from .media_data import compressed_audio, config, sine, sound_bytes

AUDIO = MediaRef(kind="audio", ref="a.wav")
RATE = fmt.AUDIO_SAMPLE_RATE_HZ


def _item(seconds: float, rate_hz: int = RATE, fmt_name: str = "WAV") -> MediaItem:
    (item,) = process_media(AUDIO, sound_bytes(sine(440.0, seconds, rate_hz), rate_hz, fmt_name), config())
    return item


@pytest.mark.parametrize(("seconds", "tokens"), [(1.0, 13), (30.0, 375), (0.05, 2), (2.5, 32)])
def test_single_clip_tokens(seconds: float, tokens: int) -> None:
    item = _item(seconds)
    assert item.kind == "audio" and item.patches is None and item.size is None
    (block,) = item.blocks
    assert (block.start, block.token, block.end, block.count) == (
        fmt.AUDIO_START,
        fmt.AUDIO_TOKEN,
        fmt.AUDIO_END,
        tokens,
    )
    assert item.audio_lengths is not None and item.audio_lengths.dtype == np.int32
    assert item.audio_lengths.tolist() == [max(round(seconds * RATE), 1600) // 160]
    assert item.audio_features is not None and item.audio_features.dtype == np.float16
    assert item.audio_features.shape == (1, item.audio_lengths[0], fmt.MEL_BINS)


def test_45_seconds_is_two_clips() -> None:
    item = _item(45.0, fmt_name="FLAC")
    assert item.audio_lengths is not None and item.audio_features is not None
    assert item.audio_lengths.tolist() == [3000, 1500]
    assert item.audio_features.shape == (2, 3000, 128)
    assert item.n_embeddings == 375 + 188 == fmt.audio_clip_tokens(480_000) + fmt.audio_clip_tokens(240_000)
    assert not item.audio_features[1, 1500:].any() and item.audio_features[1, :1500].any()
    assert np.isfinite(item.audio_features.astype(np.float32)).all()


def test_last_clip_padded_to_a_tenth_of_a_second() -> None:
    item = make_audio_item(np.ones(30 * RATE + 5, np.float32) * 0.1)
    assert item.audio_lengths is not None and item.audio_lengths.tolist() == [3000, 10]
    assert item.n_embeddings == 375 + fmt.audio_clip_tokens(1600)


def test_mel_filters_match_transformers() -> None:
    from transformers.audio_utils import mel_filter_bank

    reference = mel_filter_bank(
        num_frequency_bins=257,
        num_mel_filters=128,
        min_frequency=0.0,
        max_frequency=8000.0,
        sampling_rate=16_000,
        norm="slaney",
        mel_scale="slaney",
    )
    np.testing.assert_allclose(mel_filters(), reference, atol=1e-7)


@pytest.mark.parametrize("samples", [1600, 2 * RATE + 37, 30 * RATE])
def test_features_match_parakeet_feature_extractor(samples: int) -> None:
    from transformers import ParakeetFeatureExtractor

    rng = np.random.default_rng(samples)
    t = np.arange(samples) / RATE
    signal = (0.3 * np.sin(2 * np.pi * 440 * t) + 0.05 * rng.standard_normal(samples)).astype(np.float32)
    out = ParakeetFeatureExtractor(feature_size=128)(signal, sampling_rate=RATE, return_tensors="np")
    valid = int(out["attention_mask"][0].sum())
    assert valid == samples // 160
    reference = out["input_features"][0, :valid]  # float32 [L, 128]
    ours = log_mel(signal)
    assert ours.shape == reference.shape
    np.testing.assert_allclose(ours, reference, atol=1e-3)
    stored = make_audio_item(signal).audio_features
    assert stored is not None
    np.testing.assert_allclose(stored[0].astype(np.float32), reference, atol=2e-2)  # float16 storage


@pytest.mark.parametrize("rate_hz", [44_100, 8_000, 48_000])
def test_resampling_keeps_the_frequency(rate_hz: int) -> None:
    samples = decode_audio(sound_bytes(sine(1000.0, 2.0, rate_hz), rate_hz), 3600.0)
    assert samples.dtype == np.float32 and abs(samples.shape[0] - 2 * RATE) <= 2
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(samples.shape[0])))
    peak_hz = np.argmax(spectrum) * RATE / samples.shape[0]
    assert abs(peak_hz - 1000.0) <= 1.0
    assert 0.45 < np.abs(samples[RATE // 2 : -RATE // 2]).max() < 0.55  # amplitude kept


def test_stereo_is_the_mean_of_channels() -> None:
    left = sine(500.0, 1.0, RATE, 0.8)
    stereo = np.stack([left, np.zeros_like(left)], axis=1)  # float32 [S, 2]
    samples = decode_audio(sound_bytes(stereo, RATE, "FLAC"), 3600.0)
    np.testing.assert_allclose(samples, left / 2, atol=1e-4)


@pytest.mark.parametrize(("container", "codec"), [("mp3", "libmp3lame"), ("ipod", "aac"), ("ogg", "libopus")])
def test_compressed_formats_via_pyav(container: str, codec: str) -> None:
    rate_hz = 48_000 if codec == "libopus" else 44_100
    data = compressed_audio(sine(1000.0, 2.0, rate_hz), rate_hz, container, codec)
    samples = decode_audio(data, 3600.0)
    assert abs(samples.shape[0] - 2 * RATE) < 0.1 * RATE  # codec delay and padding
    spectrum = np.abs(np.fft.rfft(samples))
    assert abs(np.argmax(spectrum) * RATE / samples.shape[0] - 1000.0) <= 2.0
    (item,) = process_media(AUDIO, data, config())
    assert item.n_embeddings in range(24, 28)


def test_clip_window_trims() -> None:
    data = sound_bytes(sine(440.0, 3.0, 22_050), 22_050)
    assert decode_audio(data, 3600.0, 1.0, 2.0).shape[0] == pytest.approx(RATE, abs=2)
    (item,) = process_media(MediaRef(kind="audio", ref="a.wav", start_s=1.0, end_s=2.0), data, config())
    assert item.n_embeddings == 13
    data = compressed_audio(sine(440.0, 3.0, 44_100), 44_100)
    assert decode_audio(data, 3600.0, 1.0, 2.0).shape[0] == pytest.approx(RATE, abs=2)
    with pytest.raises(Rejected) as err:
        decode_audio(sound_bytes(sine(440.0, 1.0, RATE), RATE), 3600.0, 5.0, None)
    assert err.value.reason == RejectReason.MEDIA_DECODE


def test_nan_zero_and_corrupt_audio_are_decode_errors() -> None:
    nan = sine(440.0, 1.0, RATE)
    nan[100] = np.nan
    cases = {
        "nan": sound_bytes(nan, RATE, "WAV", "FLOAT"),
        "inf": sound_bytes(np.full(RATE, np.inf, np.float32), RATE, "WAV", "FLOAT"),
        "zero samples": sound_bytes(np.zeros(0, np.float32), RATE),
        "garbage": b"\x13\x37garbage" * 100,
        "bad riff": b"RIFF\x00\x00\x00\x00WAVEjunk" * 10,
        "bad flac": b"fLaC" + b"\x00" * 60,
        "empty": b"",
    }
    for name, data in cases.items():
        with pytest.raises(Rejected) as err:
            process_media(AUDIO, data, config())
        assert err.value.reason == RejectReason.MEDIA_DECODE, name


def test_per_record_path_does_not_import_torch() -> None:
    code = (
        "import sys, numpy as np\n"
        "from cook.media import process_media\n"
        "from cook.media.audio import make_audio_item\n"
        "make_audio_item(np.sin(np.arange(16000, dtype=np.float32)))\n"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
