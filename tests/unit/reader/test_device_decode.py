"""``decode="cuda"``'s bookkeeping, run on the CPU: JPEG frames left as bytes by the workers
(``decode_pack(defer_jpeg=True)``), carried through ``collate_packs`` (many packs per batch, png and
jpeg frames interleaved) and decoded by ``to_device``, give exactly the patches of ``decode="cpu"``
(on the CPU both paths decode with Pillow; on CUDA nvJPEG replaces it, which gpu_check compares)."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cook import format as fmt
from cook.contract import FrameStorage
from cook.errors import ConfigError
from cook.frames import encode_frame, patchify_image
from cook.reader import PackFormatError, collate_packs, decode_pack, to_device
from cook.reader.device import patchify
from cook.reader.loader import check_decode
from cook.reader.tp import batch_fingerprint

from .reader_data import crude_pack

STORAGES = {"png": FrameStorage("png", png_compress_level=fmt.PNG_COMPRESS_LEVEL), "jpeg": FrameStorage("jpeg", 95)}


def _frame(rng: np.random.Generator, grid_h: int, grid_w: int) -> np.ndarray:
    """Random-ish patches of a grid_h x grid_w frame: a smooth gradient plus noise (JPEG-friendly)."""
    y, x = np.mgrid[0 : grid_h * 16, 0 : grid_w * 16]
    pixels = np.stack([x * 3, y * 5, (x + y) * 2], axis=-1) + rng.integers(0, 40, (grid_h * 16, grid_w * 16, 3))
    from PIL import Image

    return patchify_image(Image.fromarray((pixels % 256).astype(np.uint8), "RGB"))


def _pack(key: str, frames: list[tuple[str, int, int]], seed: int) -> dict:
    """A crude pack of one sequence and these frames ``(codec, grid h, grid w)``, each one image item."""
    rng = np.random.default_rng(seed)
    sizes = np.array([[1, h * 16, w * 16] for _, h, w in frames], dtype=np.int32).reshape(-1, 3)
    crude = crude_pack([([1, 2, 3, 4, 5], [0, 0, 1, 1, 1])], 4, key=key, **{fmt.MEDIA_SIZES: sizes})
    for k, (codec, h, w) in enumerate(frames):
        crude[fmt.frame_member(k, codec)] = encode_frame(_frame(rng, h, w), h * 16, w * 16, STORAGES[codec])
    meta = json.loads(crude[fmt.META])
    crude[fmt.META] = json.dumps({**meta, "schema_version": 2}).encode()
    return crude


FRAMES = st.lists(st.tuples(st.sampled_from(["png", "jpeg"]), st.integers(1, 3), st.integers(1, 3)), max_size=4)


@settings(max_examples=40, deadline=None)
@given(packs=st.lists(FRAMES, min_size=1, max_size=4), seed=st.integers(0, 2**16))
def test_deferred_frames_decode_to_the_cpu_patches(packs: list[list[tuple[str, int, int]]], seed: int) -> None:
    crudes = [_pack(f"pack-{i:09d}", frames, seed + i) for i, frames in enumerate(packs)]
    host = collate_packs([decode_pack(c) for c in crudes])
    samples = [decode_pack(c, defer_jpeg=True) for c in crudes]
    deferred = collate_packs(samples)
    jpegs = sum(codec == "jpeg" for frames in packs for codec, _, _ in frames)
    assert (0 if deferred.jpeg_frames is None else len(deferred.jpeg_frames)) == jpegs
    assert all(s.jpeg_frames is None or s.pixel_patches is None or s.jpeg_data is not None for s in samples)
    deferred = pickle.loads(pickle.dumps(deferred))  # as a loader worker sends it
    expected, got = to_device(host, "cpu"), to_device(deferred, "cpu")
    if expected.pixel_patches is None:
        assert got.pixel_patches is None
        return
    assert got.pixel_patches is not None and got.jpeg_frames is None and got.jpeg_data is None
    assert torch.equal(got.pixel_patches, expected.pixel_patches)
    assert got.pixel_values is not None and torch.equal(got.pixel_values, expected.pixel_values)


def test_patchify_is_the_stored_layout() -> None:
    frame = _frame(np.random.default_rng(3), 2, 3)  # patches [6, 768] in cook.frames' layout
    pixels = np.ascontiguousarray(frame.reshape(2, 3, 3, 16, 16).transpose(2, 0, 3, 1, 4).reshape(3, 32, 48))
    assert torch.equal(patchify(torch.from_numpy(pixels)), torch.from_numpy(frame))


def test_a_deferred_frame_is_checked_from_its_header() -> None:
    crude = _pack("pack-000000000", [("jpeg", 2, 2)], 0)
    crude[fmt.MEDIA_SIZES] = fmt.npy_bytes(np.array([[1, 32, 48]], dtype=np.int32))  # the member is 32x32
    with pytest.raises(PackFormatError, match=r"frame\.0\.jpg.*expected RGB 48x32"):
        decode_pack(crude, defer_jpeg=True)


def test_a_frame_that_fails_to_decode_on_the_device_is_a_format_error() -> None:
    crude = _pack("pack-000000000", [("jpeg", 2, 2)], 0)
    member = fmt.frame_member(0, "jpeg")
    crude[member] = crude[member][: len(crude[member]) // 2]  # the header reads, the scan is cut
    batch = collate_packs([decode_pack(crude, defer_jpeg=True)])
    with pytest.raises(PackFormatError, match="JPEG frame does not decode"):
        to_device(batch, "cpu")


@pytest.mark.parametrize(
    ("decode", "message"),
    [("gpu", r"make_loader\(decode='gpu'\): valid: cpu, cuda"), ("cuda", "torch sees no CUDA device")],
)
def test_decode_settings_are_one_line_config_errors(decode: str, message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match=message) as caught:
        check_decode(decode)
    assert "\n" not in str(caught.value)
    check_decode("cpu")


@settings(max_examples=25, deadline=None)
@given(packs=st.lists(FRAMES, min_size=1, max_size=3), seed=st.integers(0, 2**16), repeat=st.booleans())
def test_tp_broadcast_carries_frames_left_to_the_device(
    packs: list[list[tuple[str, int, int]]], seed: int, repeat: bool
) -> None:
    """TP rank 0 reads with decode="cuda": the receivers get the JPEG bytes (bitwise the sender's batch) and
    decode them as rank 0 does; png frames still go through the patch cache (a batch sent twice hits it)."""
    from tests.unit.reader.test_tp import _Wire

    crudes = [_pack(f"pack-{i:09d}", frames, seed + i) for i, frames in enumerate(packs)]
    host = collate_packs([decode_pack(c) for c in crudes])
    deferred = collate_packs([decode_pack(c, defer_jpeg=True) for c in crudes])
    sender, receiver = _Wire().pair(cache_patches=1 << 20)
    for _ in range(2 if repeat else 1):
        sender.send(deferred)
        received = receiver.receive()
        assert received is not None and batch_fingerprint(received) == batch_fingerprint(deferred)
        got, expected = to_device(received, "cpu"), to_device(host, "cpu")
        assert (got.pixel_patches is None) == (expected.pixel_patches is None)
        if expected.pixel_patches is not None:
            assert torch.equal(got.pixel_patches, expected.pixel_patches)
    jpeg_rows = sum(fmt.frame_patches(16 * h, 16 * w) for f in packs for codec, h, w in f if codec == "jpeg")
    png_rows = sum(fmt.frame_patches(16 * h, 16 * w) for f in packs for codec, h, w in f if codec == "png")
    assert sender.stats.patches_sent == receiver.stats.patches_sent == png_rows  # JPEG frames never as patches
    assert sender.stats.patches_cached == (png_rows if repeat else 0)
    assert jpeg_rows == 0 or deferred.jpeg_frames is not None
