"""cook.packing.problem.stable_argsort: numpy's stable argsort, exactly, for every key width it takes
(radix passes below 2**16 and below 2**32, numpy itself beyond or for negative keys)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cook.packing.problem import stable_argsort


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2**33), max_size=300), st.sampled_from([4, 2**16, 2**16 + 1, 2**32, 2**34]))
def test_the_order_is_numpys_stable_argsort(values: list[int], bound: int) -> None:
    keys = np.array([v % bound for v in values], dtype=np.int64)  # many ties below small bounds
    got = stable_argsort(keys)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.argsort(keys, kind="stable"))


@pytest.mark.parametrize("high", [1, 2**16 - 1, 2**16, 2**20, 2**32 - 1, 2**32, 2**40])
def test_ties_keep_index_order_at_every_width(high: int) -> None:
    rng = np.random.default_rng(high % 1000)
    keys = rng.integers(0, 8, 50_000) * (high // 7)  # eight values spread up to ``high``: long runs of ties
    keys[rng.integers(0, len(keys), 100)] = high
    np.testing.assert_array_equal(stable_argsort(keys), np.argsort(keys, kind="stable"))


def test_negative_and_empty_keys() -> None:
    keys = np.array([3, -1, 3, -5, 0], dtype=np.int64)
    np.testing.assert_array_equal(stable_argsort(keys), [3, 1, 4, 0, 2])
    assert stable_argsort(np.zeros(0, dtype=np.int64)).tolist() == []
