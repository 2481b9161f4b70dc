"""cook.packing.metrics: the worked example, the padding identity, add/merge and JSON output."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cook.packing import PackingStats, pack, stats_for


def test_worked_example() -> None:
    s = stats_for([5, 2, 8], [[0, 1], [2]], capacity=12, pad_multiple=4)
    assert (s.packs, s.sequences, s.tokens) == (2, 3, 15)
    assert (s.pad_multiple_padding, s.tail_padding) == (5, 4)
    assert s.efficiency == pytest.approx(15 / 24)
    assert s.sequences_per_pack == ((1, 1), (2, 1))
    assert s.fill_histogram == (0, 0, 0, 0, 0, 1, 1, 0, 0, 0)


def test_to_dict_is_plain_json() -> None:
    d = stats_for([5, 2, 8], [[0, 1], [2]], capacity=12, pad_multiple=4).to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["sequences_per_pack"] == {"1": 1, "2": 1}
    assert d["fill_histogram"]["50-60%"] == 1 and d["fill_histogram"]["90-100%"] == 0
    assert list(d["fill_histogram"]) == [f"{10 * b}-{10 * b + 10}%" for b in range(10)]
    assert PackingStats(8).to_dict()["efficiency"] == 0.0


def test_full_pack_is_last_fill_bin() -> None:
    assert stats_for([4, 4], [[0, 1]], capacity=8).fill_histogram[-1] == 1
    assert stats_for([1], [[0]], capacity=8).fill_histogram[1] == 1  # 12.5%


def test_add_and_merge_agree_with_stats_for() -> None:
    lengths, packs = [5, 2, 8, 3], [[0, 1], [2], [3]]
    whole = stats_for(lengths, packs, 12, 4)
    folded = PackingStats(12, 4)
    for q in packs:
        folded = folded.merge(stats_for([lengths[i] for i in q], [list(range(len(q)))], 12, 4))  # one more pack
    assert folded == whole
    assert stats_for(lengths, packs[:1], 12, 4).merge(stats_for(lengths, packs[1:], 12, 4)) == whole
    assert PackingStats(12, 4).merge(whole) == whole
    with pytest.raises(ValueError, match="cannot merge"):
        whole.merge(PackingStats(16, 4))


def test_rejects_bad_packs() -> None:
    with pytest.raises(ValueError, match="pack 1 uses 12 padded tokens > capacity 8"):
        stats_for([5, 2, 8, 3], [[0], [1, 2]], capacity=8, pad_multiple=4)
    with pytest.raises(ValueError, match="pack 0 is empty"):
        stats_for([5], [[], [0]], capacity=8)
    assert stats_for([5], [], capacity=8) == PackingStats(8)


@settings(max_examples=50, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 64), max_size=60),
    pad=st.sampled_from([1, 2, 8]),
    name=st.sampled_from(["first_fit_decreasing", "concatenative", "balanced_greedy_knapsack"]),
)
def test_identity_on_real_packs(lengths: list[int], pad: int, name: str) -> None:
    packs = pack(lengths, 64, name, pad_multiple=pad)
    s = stats_for(lengths, packs, 64, pad)
    assert s.packs * s.capacity == s.tokens + s.pad_multiple_padding + s.tail_padding
    assert (s.packs, s.sequences, s.tokens) == (len(packs), len(lengths), sum(lengths))
    assert sum(s.fill_histogram) == s.packs == sum(n for _, n in s.sequences_per_pack)
    assert sum(k * n for k, n in s.sequences_per_pack) == s.sequences
