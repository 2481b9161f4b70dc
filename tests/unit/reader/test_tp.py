"""The TP broadcast protocol in one process: the sender's broadcasts are replayed into a receiver
(``dist.broadcast`` stands in for by a queue), so variable sizes, media dedup and cache eviction are
checked exactly, without processes (tests/e2e/test_distributed_read.py runs it on gloo)."""

from __future__ import annotations

from collections import deque

import numpy as np
import torch

from cook import format as fmt
from cook.reader import collate_packs, decode_pack
from cook.reader.tp import TensorParallelBroadcast, batch_fingerprint, item_patches

from .reader_data import crude_pack


class _Wire:
    def __init__(self) -> None:
        self.sent: deque[torch.Tensor] = deque()

    def pair(self, cache_patches: int) -> tuple[TensorParallelBroadcast, TensorParallelBroadcast]:
        sender, receiver = (TensorParallelBroadcast(None, 0, cache_patches) for _ in range(2))
        sender._bcast = self._send  # type: ignore[method-assign]
        receiver._bcast = self._receive  # type: ignore[method-assign]
        return sender, receiver

    def _send(self, tensor: torch.Tensor) -> torch.Tensor:
        self.sent.append(tensor.clone())
        return tensor

    def _receive(self, tensor: torch.Tensor) -> torch.Tensor:
        sent = self.sent.popleft()
        assert sent.dtype == tensor.dtype and sent.shape == tensor.shape  # the receiver sized it right
        return tensor.copy_(sent)


def _image(seed: int, side_px: int) -> tuple[np.ndarray, list[int]]:
    patches = (side_px // fmt.PATCH_SIZE) ** 2
    return np.random.default_rng(seed).integers(0, 256, (patches, fmt.PATCH_VALUES), dtype=np.uint8), [
        1,
        side_px,
        side_px,
    ]


def _batch(images: list[tuple[np.ndarray, list[int]]], index: int, audio: bool = False):
    seqs = [([1, 2, 3, 4, 5 + index], [0, 0, 1, 1, 1]), ([6, 7, 8], [0, 1, 1])]
    extra = {
        fmt.PIXEL_PATCHES: np.concatenate([p for p, _ in images]),
        fmt.MEDIA_SIZES: np.array([s for _, s in images], dtype=np.int32),
    }
    if audio:
        extra[fmt.AUDIO_FEATURES] = np.full((1, 7, fmt.MEL_BINS), 0.5, dtype=np.float16)
        extra[fmt.AUDIO_LENGTHS] = np.array([7], dtype=np.int32)
    return collate_packs([decode_pack(crude_pack(seqs, 4, key=f"pack-{index}", **extra))])


def test_dedup_and_eviction_stay_in_step() -> None:
    a, b, c = _image(1, 64), _image(2, 64), _image(3, 32)  # 16, 16 and 4 patches
    batches = [_batch([a, a], 0), _batch([b], 1, audio=True), _batch([c, b], 2), _batch([a], 3)]
    wire = _Wire()
    sender, receiver = wire.pair(cache_patches=20)
    received = []
    for batch in batches:
        sender.send(batch)
        received.append(receiver.receive())
    sender.send(None)
    assert receiver.receive() is None and not wire.sent
    assert [batch_fingerprint(r) for r in received] == [batch_fingerprint(b) for b in batches]
    assert received[1].audio_features is not None and received[1].audio_features.dtype == torch.float16
    # sent: a (16), b (16; a evicted: 32 > 20), c (4; b kept, in use), a again (16) -> 52; cached: a's repeat, b
    assert sender.stats.patches_sent == receiver.stats.patches_sent == 16 + 16 + 4 + 16
    assert sender.stats.patches_cached == receiver.stats.patches_cached == 16 + 16
    assert set(receiver._held) == {item for item, _ in sender._ids.values()}


def test_item_patches_every_kind() -> None:
    sizes = torch.tensor([[1, 64, 32], [8, 32, 32], [3, 512, 512]], dtype=torch.int32)  # image, video, 3 tiles
    assert item_patches(sizes) == [8, 32, 3072]
