"""``collate_packs`` against a per-token reference of the documented semantics (cook/reader/batch.py):
random packs of random sequences (any length from 1, any pad multiple, targets anywhere, stored mask
values above 1), one to three packs per batch. Every array, dtype and count must match exactly."""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from cook.reader import IGNORE_INDEX, collate_packs, decode_pack

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
