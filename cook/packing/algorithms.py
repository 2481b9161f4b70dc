"""Packing algorithms: sequence lengths -> packs of item indices (SPEC §7). Pure: no I/O, no globals.

``pack(lengths, capacity, algorithm, ...)`` returns a partition of ``range(len(lengths))``. Item ``i``
costs ``ceil(lengths[i] / pad_multiple) * pad_multiple`` tokens; a pack's costs sum to ``<= capacity``,
it holds at most ``max_sequences_per_pack`` items and, with ``media_budget``, at most that many media
patches. Output is canonical: each pack sorted ascending, packs sorted by their first index.

Worked example, ``capacity=6``, lengths ``[5, 4, 3, 2, 1]``, first_fit_decreasing::

    5 -> bin0 (1 free)   4 -> bin1 (2 free)   3 -> bin2 (3 free)
    2 -> bin1 (first bin with >= 2 free)      1 -> bin0
    => [[0, 4], [1, 3], [2]]

Ties: "decreasing" means by cost, then by ascending index; among equally good bins the one opened
first wins, except that best fit and balanced knapsack under a media budget prefer, among bins with
equal free tokens, the one with the most media room (then the one opened first).

Fast paths (no binding media budget) place a whole run of equal-cost items per numpy step: first
fit descends a 16-ary max tree over the bins' free tokens, best fit walks buckets of bins keyed by
free tokens. With a binding media budget the same rules run one item at a time on trees that also
track media room: exact, slower. ``greedy_knapsack`` and MFFD take items from an ordered multiset of
the remaining items (sorted list + union-find "previous alive"). Cost: O(n log n) plus O(capacity)
per distinct item cost.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

__all__ = ["ALGORITHMS", "PackFn", "pack"]

I64 = NDArray[np.int64]
_FAN = 16  # fan-out of the batched first-fit tree
_CHILD = np.arange(_FAN, dtype=np.int64)
_INF = 1 << 62


class PackFn(Protocol):
    def __call__(
        self,
        lengths: Sequence[int],
        capacity: int,
        *,
        pad_multiple: int = 1,
        max_sequences_per_pack: int | None = None,
        media: Sequence[int] | None = None,
        media_budget: int | None = None,
        pack_count_multiple: int | None = None,
        seed: int = 0,
        delta: int = 0,
    ) -> list[list[int]]: ...


@dataclass(frozen=True)
class _Problem:
    cost: I64  # int64 [n] padded lengths
    capacity: int
    max_items: int  # per pack; n when unlimited
    media: I64 | None  # int64 [n]; None when no media budget can bind
    budget: int  # media budget; _INF when none binds
    seed: int
    delta: int

    def decreasing(self) -> I64:
        """Item indices by decreasing cost, ties by ascending index."""
        return np.argsort(-self.cost, kind="stable")

    def media_of(self, items: I64) -> list[int]:
        return [0] * len(items) if self.media is None else self.media[items].tolist()


def _problem(
    lengths: Sequence[int],
    capacity: int,
    pad_multiple: int,
    max_items: int | None,
    media: Sequence[int] | None,
    budget: int | None,
    seed: int,
    delta: int,
) -> _Problem:
    raw = np.asarray(lengths, dtype=np.int64).reshape(-1)
    for name, value in (("capacity", capacity), ("pad_multiple", pad_multiple), ("max_seq", max_items)):
        if value is not None and value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if len(raw) and raw.min() < 1:
        raise ValueError(f"item {int(np.argmin(raw))} has length {raw.min()}; lengths must be >= 1")
    cost = -(-raw // pad_multiple) * pad_multiple
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
        if patches.sum() <= budget:  # the budget can never bind
            patches = None
    return _Problem(
        cost=cost,
        capacity=capacity,
        max_items=max_items or max(len(raw), 1),
        media=patches,
        budget=budget if patches is not None and budget is not None else _INF,
        seed=seed,
        delta=delta,
    )


# ---------------------------------------------------------------------------------------------------
# Structures
# ---------------------------------------------------------------------------------------------------


class _BatchTree:
    """16-ary max tree (numpy) over bins' free tokens; -1 marks unopened or closed bins.

    ``leftmost(s, k)`` returns up to k leftmost bins with >= s free, in order, by expanding the
    frontier one level at a time and keeping only its first k nodes (each holds >= 1 fitting bin).
    """

    def __init__(self, n_bins: int) -> None:
        depth = 1
        while _FAN**depth < n_bins:
            depth += 1
        self.levels = [np.full(_FAN**d, -1, dtype=np.int64) for d in range(depth + 1)]
        self.free = self.levels[-1]  # int64 [16**depth]

    def leftmost(self, s: int, k: int) -> I64:
        nodes = np.zeros(1 if self.levels[0][0] >= s else 0, dtype=np.int64)
        for level in self.levels[1:]:
            if not len(nodes):
                break
            children = (nodes[:, None] * _FAN + _CHILD).ravel()
            nodes = children[level[children] >= s][:k]
        return nodes

    def refresh(self, bins: I64) -> None:
        """Recompute the ancestors of ``bins`` (sorted ascending) after their free tokens changed."""
        nodes = bins
        for d in range(len(self.levels) - 2, -1, -1):
            nodes = nodes // _FAN
            nodes = nodes[np.r_[True, nodes[1:] != nodes[:-1]]]
            self.levels[d][nodes] = self.levels[d + 1].reshape(-1, _FAN)[nodes].max(axis=1)


class _FitTree:
    """Binary max trees (Python lists) over bins' free tokens and free media, for one-at-a-time fit."""

    def __init__(self, n_bins: int, with_media: bool) -> None:
        self.size = 1 << max(0, n_bins - 1).bit_length()
        self.tok = [-1] * (2 * self.size)
        self.med = [-1] * (2 * self.size) if with_media else None

    def first(self, s: int, m: int) -> int:
        """Leftmost bin with >= s free tokens and >= m free media, or -1."""
        tok, med, size = self.tok, self.med, self.size
        if med is None:
            if tok[1] < s:
                return -1
            i = 1
            while i < size:
                i <<= 1
                if tok[i] < s:
                    i += 1
            return i - size
        stack = [1]
        while stack:  # depth first, left child first; prunes on both maxima
            i = stack.pop()
            if tok[i] < s or med[i] < m:
                continue
            if i >= size:
                return i - size
            stack += (2 * i + 1, 2 * i)
        return -1

    def set(self, b: int, free: int, free_media: int) -> None:
        for tree, value in ((self.tok, free), (self.med, free_media)):
            if tree is None:
                continue
            i = b + self.size
            tree[i] = value
            while i > 1:
                i >>= 1
                best = max(tree[2 * i], tree[2 * i + 1])
                if tree[i] == best:
                    break
                tree[i] = best


class _MinTree:
    """Binary min tree (Python lists) with "nearest position at/after or at/before p with value <= v"."""

    def __init__(self, values: Sequence[int]) -> None:
        self.size = 1 << max(0, len(values) - 1).bit_length()
        t = [_INF] * (2 * self.size)
        t[self.size : self.size + len(values)] = values
        for i in range(self.size - 1, 0, -1):
            t[i] = min(t[2 * i], t[2 * i + 1])
        self.t = t

    def set(self, p: int, value: int) -> None:
        t, i = self.t, p + self.size
        t[i] = value
        while i > 1:
            i >>= 1
            t[i] = min(t[2 * i], t[2 * i + 1])

    def after(self, p: int, v: int) -> int:
        """Smallest position >= p with value <= v, or -1."""
        t, size = self.t, self.size
        if p >= size:
            return -1
        i = p + size
        while t[i] > v:
            while i & 1:  # climb while a right child; then step to the right neighbour
                i >>= 1
            if i == 0:
                return -1
            i += 1
        while i < size:
            i = 2 * i if t[2 * i] <= v else 2 * i + 1
        return i - size

    def before(self, p: int, v: int) -> int:
        """Largest position <= p with value <= v, or -1."""
        t, size = self.t, self.size
        if p < 0:
            return -1
        i = p + size
        while t[i] > v:
            while not i & 1:  # climb while a left child; then step to the left neighbour
                i >>= 1
            if i == 1:
                return -1
            i -= 1
        while i < size:
            i = 2 * i + 1 if t[2 * i + 1] <= v else 2 * i
        return i - size


def _find(parent: list[int], x: int) -> int:
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


class _Pool:
    """The remaining items as an ordered multiset by cost.

    Positions sort by (cost, -index), so the rightmost alive position <= p is the largest item that
    costs <= cost[p], ties going to the lowest index. Without media, "previous alive" is a union-find
    over positions; with media, a min tree of media (removed = inf) answers "largest with media <= m".
    """

    def __init__(self, p: _Problem, items: I64) -> None:
        order = np.lexsort((-items, p.cost[items]))
        self.items: list[int] = items[order].tolist()
        self.costs: list[int] = p.cost[items][order].tolist()
        self.media = p.media_of(items[order])
        self.alive = len(self.items)
        self._prev = list(range(self.alive + 1))  # slot q + 1 is position q; slot 0 is the sentinel
        self._next = list(range(self.alive + 1))  # slot q is position q; slot n is the sentinel
        self._tree = _MinTree(self.media) if p.media is not None else None

    def largest(self, max_cost: int, max_media: int, min_cost: int = 0) -> int:
        """Position of the largest alive item with cost in [min_cost, max_cost], media <= max_media; -1."""
        hi = bisect_right(self.costs, max_cost) - 1
        q = _find(self._prev, hi + 1) - 1 if self._tree is None else self._tree.before(hi, max_media)
        return q if q >= 0 and self.costs[q] >= min_cost else -1

    def smallest(self, min_cost: int, start: int = -1) -> int:
        """Position of the smallest alive item with cost >= min_cost (after ``start``), or -1."""
        lo = max(start + 1, bisect_right(self.costs, min_cost - 1))
        n = len(self.items)
        q = _find(self._next, lo) if self._tree is None else self._tree.after(lo, _INF - 1)
        return q if 0 <= q < n else -1

    def take(self, q: int) -> int:
        self._prev[q + 1] = q
        self._next[q] = q + 1
        if self._tree is not None:
            self._tree.set(q, _INF)
        self.alive -= 1
        return self.items[q]

    def remaining(self) -> I64:
        alive = [i for q, i in enumerate(self.items) if _find(self._next, q) == q]
        return np.array(sorted(alive), dtype=np.int64)


class _LevelIndex:
    """Open bins bucketed by free tokens, for best/worst fit one item at a time under a media budget.

    Each bucket is a heap of (-free media, bin); a min tree over buckets holds each bucket's best
    -free media (inf when empty), so "smallest free >= s with some bin having media room >= m" is
    ``after(s, -m)``. Heap entries go stale when a bin moves; stale tops are dropped on removal.
    """

    def __init__(self, capacity: int, n_bins: int) -> None:
        self.tree = _MinTree([_INF] * (capacity + 1))
        self.heaps: list[list[tuple[int, int]]] = [[] for _ in range(capacity + 1)]
        self.free = [-1] * n_bins
        self.free_media = [0] * n_bins

    def add(self, b: int, free: int, free_media: int) -> None:
        self.free[b], self.free_media[b] = free, free_media
        heapq.heappush(self.heaps[free], (-free_media, b))
        if -free_media < self.tree.t[free + self.tree.size]:
            self.tree.set(free, -free_media)

    def remove(self, b: int) -> None:
        level, self.free[b] = self.free[b], -1
        heap = self.heaps[level]
        while heap and self.free[heap[0][1]] != level:
            heapq.heappop(heap)
        self.tree.set(level, heap[0][0] if heap else _INF)

    def best(self, s: int, m: int) -> int:
        level = self.tree.after(s, -m)
        return self.heaps[level][0][1] if level >= 0 else -1

    def worst(self, s: int, m: int) -> int:
        level = self.tree.before(len(self.heaps) - 1, -m)
        return self.heaps[level][0][1] if level >= s else -1
