"""Issue 13 item 9: cook's own bugs are not rejects. The media code catches a library's errors only
around the library call (open, decode, load); the same exception raised by cook's code (a planted
bug here) propagates out of ``process_media``, and a run that hits it exits 1 instead of rejecting
every record. Corrupt data is still rejected (test_image/test_video/test_audio)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

import cook.media.audio
import cook.media.image
import cook.media.video
from cook.errors import Rejected, RejectReason
from cook.media import process_media
from cook.types import MediaRef
from tests.conftest import REPO, pipeline_dict, write_jsonl

from .media_data import compressed_audio, config, rgb_bytes, sine, sound_bytes, video_bytes


def _raise(error: type[BaseException]):
    def planted(*args: object, **kwargs: object) -> object:
        raise error("planted bug in cook's own code")

    return planted


@pytest.fixture(scope="module")
def png() -> bytes:
    return rgb_bytes(np.full((48, 64, 3), 120, np.uint8))


@pytest.fixture(scope="module")
def mp4() -> bytes:
    return video_bytes(seconds=1.0, fps=8, width=32, height=32)


@pytest.mark.parametrize("error", [TypeError, KeyError, IndexError, ZeroDivisionError, ValueError, OSError])
@pytest.mark.parametrize("mode", ["dynamic", "tiles"])
def test_image_to_rgb_bug_propagates(monkeypatch, png: bytes, error: type[BaseException], mode: str) -> None:
    monkeypatch.setattr(cook.media.image, "to_rgb", _raise(error))
    with pytest.raises(error, match="planted bug"):
        process_media(MediaRef("image", "a.png"), png, config(image={"mode": mode}))


def test_image_conversion_bug_propagates(monkeypatch, png: bytes) -> None:
    monkeypatch.setattr(cook.media.image, "patchify_image", _raise(IndexError))
    with pytest.raises(IndexError, match="planted bug"):
        process_media(MediaRef("image", "a.png"), png, config())


@pytest.mark.parametrize("function", ["choose_grid", "decode_frames_at", "patchify_planes", "frame_count", "_plane"])
def test_video_bug_propagates(monkeypatch, mp4: bytes, function: str) -> None:
    monkeypatch.setattr(cook.media.video, function, _raise(IndexError))
    with pytest.raises(IndexError, match="planted bug"):
        process_media(MediaRef("video", "a.mp4"), mp4, config(video={"target_patches": 16}))


def test_video_packet_index_bug_propagates(monkeypatch, mp4: bytes) -> None:
    monkeypatch.setattr(cook.media.video.PacketIndex, "keyframe_before", _raise(ValueError))
    with pytest.raises(ValueError, match="planted bug"):
        process_media(MediaRef("video", "a.mp4"), mp4, config(video={"target_patches": 16}))


def test_compressed_audio_bug_propagates(monkeypatch) -> None:
    """``_decode_stream`` (cook's windowing and resampling) runs outside PyAV's guard."""
    mp3 = compressed_audio(sine(440.0, 1.0, 16_000), 16_000)
    assert process_media(MediaRef("audio", "a.mp3"), mp3, config())  # the data itself is fine
    monkeypatch.setattr(cook.media.audio, "_window_frames", _raise(IndexError))
    with pytest.raises(IndexError, match="planted bug"):
        process_media(MediaRef("audio", "a.mp3"), mp3, config())


def test_wav_resampler_bug_propagates(monkeypatch) -> None:
    """The soundfile path guards ``soundfile.blocks`` only, not the resampler fed from it."""
    wav = sound_bytes(sine(440.0, 1.0, 22_050), 22_050)
    monkeypatch.setattr(cook.media.audio._Resampler, "push", _raise(ValueError))
    with pytest.raises(ValueError, match="planted bug"):
        process_media(MediaRef("audio", "a.wav"), wav, config())


def test_corrupt_video_is_still_a_reject(mp4: bytes) -> None:
    with pytest.raises(Rejected) as err:
        process_media(MediaRef("video", "a.mp4"), mp4[: len(mp4) // 3], config(video={"target_patches": 16}))
    assert err.value.reason == RejectReason.MEDIA_DECODE


PLANTED_RUN = """
import sys
import cook.media.image

def planted(*args, **kwargs):
    raise IndexError("planted bug in to_rgb")

cook.media.image.to_rgb = planted
from cook.cli.main import entrypoint

sys.argv = ["cook", "run", sys.argv[1], "--workers", "0", "--quiet"]
entrypoint()
"""


def test_run_with_a_planted_bug_exits_1(tmp_path: Path, png: bytes) -> None:
    """The whole CLI, in a child process (``--workers 0`` cooks there): exit 1 with the traceback,
    not exit 0 with every image record rejected ``media_decode``."""
    (tmp_path / "media").mkdir()
    (tmp_path / "media" / "a.png").write_bytes(png)
    row = {
        "messages": [
            {"role": "user", "content": [{"type": "image", "image": "a.png"}, {"type": "text", "text": "what?"}]},
            {"role": "assistant", "content": "grey"},
        ]
    }
    write_jsonl(tmp_path / "a.jsonl", [row, row])
    data = pipeline_dict(
        str(tmp_path / "a.jsonl"), str(tmp_path / "out"), input={"media_root": str(tmp_path / "media")}
    )
    data["media"] = {"image": {"min_patches": 4, "max_patches": 64}}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(data))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [sys.executable, "-c", PLANTED_RUN, str(tmp_path / "p.yaml")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 1, run.stderr[-2000:]
    assert "IndexError: planted bug in to_rgb" in run.stderr
    rejects = tmp_path / "out" / "rejects.jsonl"
    assert not rejects.exists() or all(json.loads(line)["reason"] != "media_decode" for line in rejects.open())
