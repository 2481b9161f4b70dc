"""Audio bytes (or a video's audio track) -> one audio ``MediaItem`` (SPEC §6).

    bytes -> decode (soundfile: WAV/AIFF/FLAC; PyAV: everything else) -> mono (mean of channels)
          -> soxr resampling to 16 kHz (streamed, chunk by chunk) -> 30 s clips (the last padded with
          zeros to at least 0.1 s) -> Parakeet log-mel per clip (mel.py)
          -> audio_features float16 [C, F, 128], audio_lengths int32 [C]
          -> one block <so_start><so_embedding>xN<so_end>, N = sum of audio_clip_tokens(clip samples)

The duration is checked against ``media.audio.max_duration_s`` from the header (``soundfile.info``, the
container/stream duration) before any sample is read; when the header has none, decoding stops as soon
as the running duration crosses the limit. A ``MediaRef`` clip window (``start_s``/``end_s``) trims the
decoded audio; the limit applies to the whole file.

Example: 45 s of audio -> clips of 480000 and 240000 samples -> audio_lengths [3000, 1500] (frames of
10 ms), tokens 375 + 188 = 563, features [2, 3000, 128] (the second clip zero after frame 1500).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any, Final

import numpy as np

from cook import format as fmt
from cook.config import MediaConfig
from cook.errors import Rejected, RejectReason
from cook.media.limits import check_duration, decoding, open_container, short_error, stream_duration_s
from cook.media.mel import log_mel
from cook.types import MediaItem, MediaRef, PlaceholderBlock

CLIP_SAMPLES: Final = fmt.AUDIO_CLIP_S * fmt.AUDIO_SAMPLE_RATE_HZ  # 480000
MIN_CLIP_SAMPLES: Final = round(fmt.AUDIO_MIN_CLIP_S * fmt.AUDIO_SAMPLE_RATE_HZ)  # 1600
MAX_SAMPLE_RATE_HZ: Final = 1_000_000  # a header claiming more is corrupt
_KNOB: Final = "media.audio.max_duration_s"
_SOUNDFILE_MAGIC: Final = (b"RIFF", b"RF64", b"fLaC", b"FORM")


def process_audio(ref: MediaRef, data: bytes, config: MediaConfig) -> tuple[MediaItem, ...]:
    """Audio bytes -> ``(MediaItem,)`` with ``audio_features``/``audio_lengths`` and one placeholder block."""
    samples = decode_audio(data, config.audio.max_duration_s, ref.start_s, ref.end_s)
    return (make_audio_item(samples),)


def decode_audio(
    data: bytes, max_duration_s: float, start_s: float | None = None, end_s: float | None = None
) -> np.ndarray:
    """Audio bytes -> float32 [S] mono at 16 kHz. WAV/AIFF/FLAC via soundfile, the rest via PyAV.

    A RIFF/FORM file libsndfile cannot open (e.g. a WAV holding MP3) is retried with PyAV.
    """
    if data[:4] in _SOUNDFILE_MAGIC:
        import soundfile as sf

        try:
            return _decode_soundfile(data, max_duration_s, start_s, end_s)
        except sf.LibsndfileError:
            if data[:4] == b"fLaC":
                raise Rejected(RejectReason.MEDIA_DECODE, "FLAC undecodable") from None
    return decode_container_audio(data, max_duration_s, start_s, end_s)


class _Resampler:
    """Mono chunks at ``rate_hz`` -> float32 [S] at 16 kHz (soxr HQ, streamed); checks finiteness."""

    def __init__(self, rate_hz: int) -> None:
        import soxr

        if not 0 < rate_hz <= MAX_SAMPLE_RATE_HZ:
            raise Rejected(RejectReason.MEDIA_DECODE, f"implausible sample rate {rate_hz} Hz")
        self.rate_hz = rate_hz
        self._stream = None
        if rate_hz != fmt.AUDIO_SAMPLE_RATE_HZ:
            self._stream = soxr.ResampleStream(rate_hz, fmt.AUDIO_SAMPLE_RATE_HZ, 1, dtype="float32", quality="HQ")
        self._chunks: list[np.ndarray] = []

    def push(self, mono: np.ndarray, last: bool = False) -> None:
        """mono: float32 [n] at ``rate_hz``."""
        if not np.isfinite(mono).all():
            raise Rejected(RejectReason.MEDIA_DECODE, "audio contains NaN or Inf samples")
        if self._stream is None:
            self._chunks.append(mono)
        else:
            self._chunks.append(self._stream.resample_chunk(np.ascontiguousarray(mono), last=last))

    def finish(self) -> np.ndarray:
        self.push(np.zeros(0, np.float32), last=True)
        samples = np.concatenate(self._chunks).astype(np.float32, copy=False)  # float32 [S]
        if samples.shape[0] == 0:
            raise Rejected(RejectReason.MEDIA_DECODE, "audio has no samples (after the clip window)")
        return samples


def _window_frames(rate_hz: int, start_s: float | None, end_s: float | None) -> tuple[int, int | None]:
    start = max(0, round((start_s or 0.0) * rate_hz))
    stop = None if end_s is None else max(start, round(end_s * rate_hz))
    return start, stop


def _decode_soundfile(data: bytes, max_duration_s: float, start_s: float | None, end_s: float | None) -> np.ndarray:
    import soundfile as sf

    try:
        info = sf.info(io.BytesIO(data))
    except sf.LibsndfileError:
        raise  # the caller retries with PyAV
    except (RuntimeError, ValueError, TypeError, OSError) as err:
        raise Rejected(RejectReason.MEDIA_DECODE, f"audio header unreadable: {short_error(err)}") from None
    if info.channels < 1 or info.frames < 1:
        raise Rejected(RejectReason.MEDIA_DECODE, f"audio has {info.frames} frames, {info.channels} channels")
    resampler = _Resampler(int(info.samplerate))
    check_duration(info.frames / info.samplerate, max_duration_s, _KNOB)
    start, stop = _window_frames(info.samplerate, start_s, end_s)
    for block in _soundfile_blocks(data, 10 * int(info.samplerate), start, stop):  # float32 [n, channels]
        resampler.push(block.mean(axis=1, dtype=np.float32))
    return resampler.finish()


def _soundfile_blocks(data: bytes, blocksize: int, start: int, stop: int | None) -> Iterator[np.ndarray]:
    """``soundfile.blocks`` over the bytes; libsndfile's errors are ``media_decode``. Only the library
    call is guarded: the caller's loop body runs outside this generator."""
    import soundfile as sf

    try:
        yield from sf.blocks(
            io.BytesIO(data), blocksize=blocksize, start=start, stop=stop, dtype="float32", always_2d=True
        )
    except (sf.LibsndfileError, RuntimeError, ValueError) as err:
        raise Rejected(RejectReason.MEDIA_DECODE, f"audio undecodable: {short_error(err)}") from None


def decode_container_audio(
    data: bytes, max_duration_s: float, start_s: float | None = None, end_s: float | None = None
) -> np.ndarray:
    """The first audio stream of any container PyAV reads (mp3, ogg, m4a, a video's track) -> float32 [S]."""
    with open_container(data, "audio") as container:
        if not container.streams.audio:
            raise Rejected(RejectReason.MEDIA_DECODE, "no audio stream")
        stream = container.streams.audio[0]
        duration_s = stream_duration_s(container, stream)
        if duration_s is not None:
            check_duration(duration_s, max_duration_s, _KNOB)
        return _decode_stream(_planar_float_frames(container, stream), max_duration_s, start_s, end_s)


def _planar_float_frames(container: Any, stream: Any) -> Iterator[tuple[int, np.ndarray]]:
    """Yield (sample rate, float32 [channels, n]) per decoded frame, channels and rate unchanged.

    Only PyAV's calls (decode, resample, to_ndarray) are guarded (``decoding``); ``_decode_stream``,
    which consumes this, runs outside the guard, so a bug there propagates.
    """
    import av

    with decoding("audio"):
        resampler = av.AudioResampler(format="fltp")
        for frame in container.decode(stream):
            for converted in resampler.resample(frame):
                yield converted.sample_rate, converted.to_ndarray()
        for converted in resampler.resample(None):
            yield converted.sample_rate, converted.to_ndarray()


def _decode_stream(
    frames: Iterator[tuple[int, np.ndarray]], max_duration_s: float, start_s: float | None, end_s: float | None
) -> np.ndarray:
    resampler: _Resampler | None = None
    position = 0  # input samples seen so far
    start, stop = 0, None
    for rate_hz, planar in frames:
        if resampler is None:
            resampler = _Resampler(rate_hz)
            start, stop = _window_frames(rate_hz, start_s, end_s)
        mono = planar.mean(axis=0, dtype=np.float32)  # float32 [n]
        begin, position = position, position + mono.shape[0]
        check_duration(position / resampler.rate_hz, max_duration_s, _KNOB)
        lo = max(start - begin, 0)
        hi = mono.shape[0] if stop is None else min(stop - begin, mono.shape[0])
        if hi > lo:
            resampler.push(mono[lo:hi])
        if stop is not None and position >= stop:
            break
    if resampler is None:
        raise Rejected(RejectReason.MEDIA_DECODE, "audio stream has no decodable frames")
    return resampler.finish()


def make_audio_item(samples: np.ndarray) -> MediaItem:
    """float32 [S] mono 16 kHz -> the audio ``MediaItem`` (clips, features, lengths, one block)."""
    clips = [samples[i : i + CLIP_SAMPLES] for i in range(0, samples.shape[0], CLIP_SAMPLES)]
    if not clips:
        raise Rejected(RejectReason.MEDIA_DECODE, "audio has no samples")
    if clips[-1].shape[0] < MIN_CLIP_SAMPLES:
        clips[-1] = np.pad(clips[-1], (0, MIN_CLIP_SAMPLES - clips[-1].shape[0]))
    lengths = np.array([clip.shape[0] // fmt.AUDIO_HOP for clip in clips], dtype=np.int32)  # int32 [C]
    features = np.zeros((len(clips), int(lengths.max()), fmt.MEL_BINS), dtype=np.float16)  # float16 [C, F, 128]
    for i, clip in enumerate(clips):
        features[i, : lengths[i]] = log_mel(clip)
    count = sum(fmt.audio_clip_tokens(clip.shape[0]) for clip in clips)
    block = PlaceholderBlock(start=fmt.AUDIO_START, token=fmt.AUDIO_TOKEN, count=count, end=fmt.AUDIO_END)
    return MediaItem(kind="audio", blocks=(block,), audio_features=features, audio_lengths=lengths)
