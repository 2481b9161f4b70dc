"""``collate_packs`` against a per-token reference of the documented semantics (cook/reader/batch.py):
random packs of random sequences (any length from 1, any pad multiple, targets anywhere, stored mask
values above 1), one to three packs per batch. Every array, dtype and count must match exactly."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cook import format as fmt
from cook.reader import IGNORE_INDEX, collate_packs, decode_pack
from cook.reader.batch import PackedBatch, _collate_one, _collate_stream

from .reader_data import crude_pack

Sequence = tuple[list[int], list[int]]


@st.composite
def packs(draw: st.DrawFn) -> tuple[list[list[Sequence]], int]:
    pad_multiple = draw(st.sampled_from([1, 2, 4, 8]))
    sequence = st.integers(1, 12).flatmap(
        lambda n: st.tuples(
            st.lists(st.integers(1, 999), min_size=n, max_size=n), st.lists(st.integers(0, 3), min_size=n, max_size=n)
        )
    )
    return draw(st.lists(st.lists(sequence, min_size=1, max_size=6), min_size=1, max_size=3)), pad_multiple


def _reference(batch_packs: list[list[Sequence]], pad_multiple: int) -> dict[str, list]:
    """Token by token: a label is the next token of the same sequence, padding continues the count."""
    out: dict[str, list] = {k: [] for k in ("ids", "labels", "loss", "pos", "pad", "per_seq", "max")}
    for sequences in batch_packs:
        for ids, stored in sequences:
            padded = -(-len(ids) // pad_multiple) * pad_multiple
            targets = 0
            for t in range(padded):
                real_next = t + 1 < len(ids)
                out["ids"].append(ids[t] if t < len(ids) else 0)
                out["labels"].append(ids[t + 1] if real_next else IGNORE_INDEX)
                out["loss"].append(float(real_next and stored[t + 1] != 0))
                targets += int(real_next and stored[t + 1] != 0)
                out["pos"].append(t)
                out["pad"].append(t >= len(ids))
            out["per_seq"].append(targets)
            out["max"].append(padded)
    return out


@settings(max_examples=150, deadline=None)
@given(packs())
def test_collate_matches_the_per_token_reference(drawn: tuple[list[list[Sequence]], int]) -> None:
    batch_packs, pad_multiple = drawn
    samples = [decode_pack(crude_pack(seqs, pad_multiple, key=f"pack-{i}")) for i, seqs in enumerate(batch_packs)]
    batch = collate_packs(samples)
    want = _reference(batch_packs, pad_multiple)
    assert batch.input_ids.tolist() == [want["ids"]]
    assert batch.labels.tolist() == [want["labels"]]
    assert batch.loss_mask.tolist() == [want["loss"]]
    assert batch.position_ids.tolist() == [want["pos"]]
    assert batch.padding_mask.tolist() == [want["pad"]]
    assert batch.sequence_targets.tolist() == want["per_seq"]
    assert batch.target_tokens == sum(want["per_seq"]) == int(batch.loss_mask.sum())
    assert batch.max_seqlen == max(want["max"])
    assert batch.cu_packs.tolist() == [0, *np.cumsum([s.num_tokens for s in samples]).tolist()]
    assert batch.__key__ == [f"pack-{i}" for i in range(len(batch_packs))]
    assert (batch.input_ids.dtype, batch.labels.dtype, batch.position_ids.dtype) == (torch.int64,) * 3
    assert (batch.loss_mask.dtype, batch.padding_mask.dtype) == (torch.float32, torch.bool)
    assert batch.sequence_targets.dtype == batch.cu_seqlens.dtype == batch.cu_packs.dtype == torch.int32
    assert all(t.is_contiguous() for t in (batch.labels, batch.loss_mask, batch.position_ids, batch.padding_mask))


@settings(max_examples=100, deadline=None)
@given(packs(), st.booleans(), st.booleans(), st.booleans())
def test_one_pack_fast_path_equals_the_stream_path(
    drawn: tuple[list[list[Sequence]], int], media: bool, subflavors: bool, sources: bool
) -> None:
    """``collate_packs([s])`` takes ``_collate_one``; every field, dtype and shape must be what the general
    (stream) path builds for the same single pack, and only ``input_ids`` and the boundaries may share
    the pack's memory."""
    batch_packs, pad_multiple = drawn
    extra = {}
    if media:
        extra = {
            fmt.PIXEL_PATCHES: np.arange(2 * 768, dtype=np.uint8).reshape(2, 768),
            fmt.MEDIA_SIZES: np.array([[1, 16, 32]], dtype=np.int32),
            fmt.AUDIO_FEATURES: np.ones((1, 5, fmt.MEL_BINS), dtype=np.float16),
            fmt.AUDIO_LENGTHS: np.array([5], dtype=np.int32),
        }
    decoded = decode_pack(crude_pack(batch_packs[0], pad_multiple, key="pack-1", **extra))
    sample = dataclasses.replace(
        decoded,
        __subflavors__={"cook": "packed_v1"} if subflavors else None,
        __sources__=("shard-0.tar",) if sources else None,
    )
    assert decoded.arrays is not None and sample.arrays is None  # replace drops decode_pack's NumPy views
    for pack in (decoded, sample):  # the views, and the tensors' own .numpy()
        _assert_same_batch(_collate_one(pack), _collate_stream([pack]))
    assert collate_packs([sample]).labels.tolist() == _collate_one(sample).labels.tolist()
    fast, general = _collate_one(sample), _collate_stream([sample])
    assert fast.__sources__ == (("shard-0.tar",) if sources else None)
    assert fast.__subflavors__ == ([{"cook": "packed_v1"}] if subflavors else None)
    assert fast.input_ids.data_ptr() == sample.input_ids.data_ptr()  # the pack's own tokens, uncopied
    assert fast.labels.data_ptr() != general.labels.data_ptr()  # derived arrays are fresh per batch


def _assert_same_batch(fast: PackedBatch, general: PackedBatch) -> None:
    for field in dataclasses.fields(general):
        want, got = getattr(general, field.name), getattr(fast, field.name)
        if isinstance(want, torch.Tensor):
            assert isinstance(got, torch.Tensor), field.name
            assert (got.dtype, got.shape) == (want.dtype, want.shape), field.name
            assert torch.equal(got, want) and got.is_contiguous(), field.name
        else:
            assert got == want, field.name
