"""Data structures behind the placement routines; n is the number of bins (or items, for ``Pool``).

- ``runs_of(values)``: where do the runs of equal adjacent values start and end? O(n), numpy.
- ``BatchTree``: 16-ary max tree (numpy) over bins' free tokens. ``leftmost(s, k)``: the up to k
  leftmost bins with >= s free, O(k * 16 * log16 n) numpy work; ``refresh(bins)``: O(len(bins) *
  log16 n). Used by batched first fit (no media budget).
- ``FitTree``: binary max trees over bins' free tokens and free media. ``first(s, m)``: the leftmost
  bin with >= s free tokens and >= m free media, O(log n) when one bin holds both maxima of a
  subtree, more when they sit apart; ``set``: O(log n). First fit under a media budget.
- ``_MinTree``: binary min tree. ``after(p, v)`` / ``before(p, v)``: the nearest position at/after
  (at/before) p with value <= v; ``set``: O(log n) each.
- ``_find``: union-find root with path halving, amortized O(log n).
- ``Pool``: the remaining items as an ordered multiset by cost. ``largest(max_cost, max_media,
  min_cost)`` / ``smallest(min_cost)``: the largest (smallest) alive item in range, O(log n)
  (amortized); ``take``: O(1), O(log n) with media. Greedy knapsack and MFFD.
- ``LevelIndex``: open bins bucketed by free tokens. ``best(s, m)`` / ``worst(s, m)``: the bin with
  the least (most) free tokens >= s among those with media room >= m, most media room then lowest
  id first, O(log capacity); ``add`` / ``remove``: O(log capacity + log bucket), amortized. Best fit
  and balanced knapsack under a media budget.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Sequence

import numpy as np

from cook.packing.problem import I64, INF, Problem

__all__ = ["BatchTree", "FitTree", "LevelIndex", "Pool", "runs_of"]

_FAN = 16  # fan-out of the batched first-fit tree
_CHILD = np.arange(_FAN, dtype=np.int64)


def runs_of(values: I64) -> tuple[I64, I64]:
    """Start and end offsets of the runs of equal adjacent values: ``[7, 7, 3] -> [0, 2], [2, 3]``."""
    new = np.empty(len(values), dtype=bool)
    new[:1] = True
    np.not_equal(values[1:], values[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    return starts, np.append(starts[1:], len(values))


class BatchTree:
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
            nodes = nodes[runs_of(nodes)[0]]
            self.levels[d][nodes] = self.levels[d + 1].reshape(-1, _FAN)[nodes].max(axis=1)


class FitTree:
    """Binary max trees (Python lists) over bins' free tokens and free media, for first fit one item
    at a time under a media budget (``placement._first_fit_plain`` inlines it without media)."""

    def __init__(self, n_bins: int) -> None:
        self.size = 1 << max(0, n_bins - 1).bit_length()
        self.tok = [-1] * (2 * self.size)
        self.med = [-1] * (2 * self.size)

    def first(self, s: int, m: int) -> int:
        """Leftmost bin with >= s free tokens and >= m free media, or -1."""
        tok, med, size = self.tok, self.med, self.size
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
        t = [INF] * (2 * self.size)
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


class Pool:
    """The remaining items as an ordered multiset by cost.

    Positions sort by (cost, -index), so the rightmost alive position <= p is the largest item that
    costs <= cost[p], ties going to the lowest index. Without media, "previous alive" is a union-find
    over positions; with media, a min tree of media (removed = inf) answers "largest with media <= m".
    """

    def __init__(self, p: Problem, items: I64) -> None:
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
        q = _find(self._next, lo) if self._tree is None else self._tree.after(lo, INF - 1)
        return q if 0 <= q < n else -1

    def take(self, q: int) -> int:
        self._prev[q + 1] = q
        self._next[q] = q + 1
        if self._tree is not None:
            self._tree.set(q, INF)
        self.alive -= 1
        return self.items[q]

    def remaining(self) -> I64:
        alive = [i for q, i in enumerate(self.items) if _find(self._next, q) == q]
        return np.array(sorted(alive), dtype=np.int64)


class LevelIndex:
    """Open bins bucketed by free tokens, for best/worst fit one item at a time under a media budget.

    Each bucket is a heap of (-free media, bin); a min tree over buckets holds each bucket's best
    -free media (inf when empty), so "smallest free >= s with some bin having media room >= m" is
    ``after(s, -m)``. Heap entries go stale when a bin moves; stale tops are dropped on removal.
    """

    def __init__(self, capacity: int, n_bins: int) -> None:
        self.tree = _MinTree([INF] * (capacity + 1))
        self.capacity = capacity
        self.heaps: dict[int, list[tuple[int, int]]] = {}  # free tokens -> heap
        self.free = [-1] * n_bins
        self.free_media = [0] * n_bins

    def add(self, b: int, free: int, free_media: int) -> None:
        self.free[b], self.free_media[b] = free, free_media
        heapq.heappush(self.heaps.setdefault(free, []), (-free_media, b))
        if -free_media < self.tree.t[free + self.tree.size]:
            self.tree.set(free, -free_media)

    def remove(self, b: int) -> None:
        level, self.free[b] = self.free[b], -1
        heap = self.heaps[level]
        while heap and self.free[heap[0][1]] != level:
            heapq.heappop(heap)
        self.tree.set(level, heap[0][0] if heap else INF)

    def best(self, s: int, m: int) -> int:
        level = self.tree.after(s, -m)
        return self.heaps[level][0][1] if level >= 0 else -1

    def worst(self, s: int, m: int) -> int:
        level = self.tree.before(self.capacity, -m)
        return self.heaps[level][0][1] if level >= s else -1
