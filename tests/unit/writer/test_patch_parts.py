"""A pack whose patches stay in pieces writes the same bytes as one whose patches were joined."""

import numpy as np

from cook.packing.packer import build_pack
from cook.types import MediaItem, PlaceholderBlock, TokenizedSample
from cook.writer.members import member_pieces, pack_members


def _sample(i: int, rows: list[int]) -> TokenizedSample:
    block = (PlaceholderBlock("<img>", "<image>", 1, "</img>"),)
    rng = np.random.default_rng(i)
    media = tuple(
        MediaItem("image", block, rng.integers(0, 255, (r, 768), dtype=np.uint8), (1, 16, 16 * r), "image")
        for r in rows
    )
    return TokenizedSample(f"s#{i}", np.arange(7, dtype=np.int32) + i, np.ones(7, np.uint8), media)


def test_parts_write_the_joined_bytes_without_joining() -> None:
    samples = [_sample(0, [4, 12]), _sample(1, []), _sample(2, [1])]
    joined = build_pack(samples, 0, 8)
    parts = build_pack(samples, 0, 8, join_patches=False)
    assert parts.pixel_patches is None and len(parts.pixel_patch_parts) == 3
    assert pack_members(parts) == pack_members(joined)
    pieces = dict(member_pieces(parts))["pixel_patches.npy"]
    first = samples[0].media[0].patches
    assert any(np.shares_memory(np.frombuffer(p, np.uint8), first) for p in pieces[1:])  # no copy made
