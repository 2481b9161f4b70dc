"""The packing problem after validation: padded item costs and the limits every pack obeys.

``make_problem`` checks the knobs of ``pack`` (a ``PackRequest``) and turns lengths into costs (``ceil(length /
pad_multiple) * pad_multiple``); it raises ValueError for a bad knob or an item that cannot fit even
alone. ``Problem`` is what the placement routines and algorithms read. ``stable_argsort`` is their
stable sort of integer keys (costs, bin numbers): 16-bit radix passes, O(n), for windows of millions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from cook import format as fmt

__all__ = ["I64", "INF", "PackRequest", "Problem", "make_problem"]

I64 = NDArray[np.int64]
INF = 1 << 62  # "no limit" / "removed" in budgets and min trees


@dataclass(frozen=True)
class PackRequest:
    """Every knob of a packing run but the items: ``pack``'s keywords, once (SPEC §7).

    Items cost their length rounded up to ``pad_multiple``; a pack holds costs summing to at most
    ``capacity``, at most ``max_sequences_per_pack`` items and, with ``media_budget``, at most that
    many media patches; ``pack_count_multiple`` asks for a pack count that is a multiple of it;
    ``seed`` drives the randomized algorithms and ``delta`` adds packs to balanced_greedy_knapsack.
    """

    capacity: int
    pad_multiple: int = 1
    max_sequences_per_pack: int | None = None
    media_budget: int | None = None
    pack_count_multiple: int | None = None
    seed: int = 0
    delta: int = 0


def stable_argsort(keys: I64) -> I64:
    """``np.argsort(keys, kind="stable")``, the same int64 order, for integer keys: numpy sorts 16-bit
    keys by radix (O(n)) and wider ones by merge sort, so keys in [0, 2**32) (a window's costs, at most
    its capacity; its bin numbers) go by their low 16 bits, then, stably, by their high 16 bits. Other
    keys go to numpy as they are."""
    if not len(keys):
        return np.zeros(0, dtype=np.int64)
    low, high = int(keys.min()), int(keys.max())
    if low < 0 or high >= 2**32:
        return np.argsort(keys, kind="stable")
    order = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
    if high >= 2**16:
        order = order[np.argsort((keys[order] >> 16).astype(np.uint16), kind="stable")]
    return order.astype(np.int64, copy=False)


@dataclass(frozen=True)
class Problem:
    cost: I64  # int64 [n] padded lengths
    capacity: int
    max_items: int  # per pack; n when unlimited
    media: I64 | None  # int64 [n]; None without a media budget
    budget: int  # media budget; INF without one
    seed: int
    delta: int

    def decreasing(self) -> I64:
        """Item indices by decreasing cost, ties by ascending index."""
        return stable_argsort(self.capacity - self.cost)  # every cost fits: keys in [0, capacity]

    def media_of(self, items: I64) -> list[int]:
        return [0] * len(items) if self.media is None else self.media[items].tolist()


def make_problem(
    lengths: Sequence[int] | np.ndarray, request: PackRequest, media: Sequence[int] | np.ndarray | None = None
) -> Problem:
    """Validate ``request`` and the items; ``media`` only counts when ``request.media_budget`` is set."""
    capacity, pad_multiple, max_items = request.capacity, request.pad_multiple, request.max_sequences_per_pack
    budget = request.media_budget
    raw = np.asarray(lengths, dtype=np.int64).reshape(-1)
    for name in ("capacity", "pad_multiple", "max_sequences_per_pack", "pack_count_multiple"):
        if (value := getattr(request, name)) is not None and value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if len(raw) and raw.min() < 1:
        raise ValueError(f"item {int(np.argmin(raw))} has length {raw.min()}; lengths must be >= 1")
    cost = fmt.padded_lengths(raw, pad_multiple)
    big = np.flatnonzero(cost > capacity)
    if len(big):
        i = int(big[0])
        raise ValueError(f"item {i} costs {cost[i]} tokens (pad_multiple={pad_multiple}) > capacity {capacity}")
    patches = None
    if media is not None and budget is not None:
        patches = np.asarray(media, dtype=np.int64).reshape(-1)
        if len(patches) != len(raw):
            raise ValueError(f"media has {len(patches)} entries for {len(raw)} lengths")
        bad = np.flatnonzero((patches < 0) | (patches > budget))
        if len(bad):
            i = int(bad[0])
            raise ValueError(f"item {i} has {patches[i]} media patches; must be in [0, media_budget={budget}]")
    return Problem(
        cost=cost,
        capacity=capacity,
        max_items=max_items or max(len(raw), 1),
        media=patches,
        budget=budget if patches is not None and budget is not None else INF,
        seed=request.seed,
        delta=request.delta,
    )
