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
    media: I64 | None  # int64 [n]; None without a media budget
    budget: int  # media budget; _INF without one
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


# ---------------------------------------------------------------------------------------------------
# Placement loops: each fills ``bin_of[items]`` and numbers bins from ``first_bin``
# ---------------------------------------------------------------------------------------------------


def _runs(cost: I64, items: I64) -> list[tuple[int, I64]]:
    """Split ``items`` (sorted by cost) into runs of equal cost."""
    if not len(items):
        return []
    c = cost[items]
    starts = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
    ends = np.r_[starts[1:], len(c)]
    return [(int(c[a]), items[a:e]) for a, e in zip(starts.tolist(), ends.tolist(), strict=True)]


def _cut(take: I64, k: int) -> I64:
    """Shorten per-bin takes so that they sum to at most k: ``[3, 3, 3], k=7 -> [3, 3, 1]``."""
    cum = np.cumsum(take)
    j = int(np.searchsorted(cum, k))
    if j < len(take):
        take = take[: j + 1].copy()
        take[j] -= cum[j] - k
    return take


def _fresh(p: _Problem, s: int, k: int) -> I64:
    """Takes of the new bins for k items of cost s: each as full as allowed, the last one partial."""
    per = min(p.capacity // s, p.max_items)
    take = np.full(-(-k // per), per, dtype=np.int64)
    take[-1] = k - per * (len(take) - 1)
    return take


def _first_fit_batched(p: _Problem, items: I64, bin_of: I64, first_bin: int) -> int:
    """First fit of ``items`` (by decreasing cost, no media budget); returns the next bin number.

    A run of k items of cost s fills the leftmost bins with >= s free, each taking min(free // s,
    slots) items (a bin stays the leftmost fit until it is full), then opens fresh bins. Example,
    capacity 10, free [3, 5, 9], run of four 3s: bin 0 takes 1, bin 1 takes 1, bin 2 takes 2.
    """
    tree = _BatchTree(len(items))
    free = tree.free
    slots = np.full(len(free), p.max_items, dtype=np.int64)
    n_bins = 0
    for s, run in _runs(p.cost, items):
        bins = tree.leftmost(s, len(run))
        take = _cut(np.minimum(free[bins] // s, slots[bins]), len(run))
        bins = bins[: len(take)]
        done = int(take.sum())
        if done < len(run):
            extra = _fresh(p, s, len(run) - done)
            new = np.arange(n_bins, n_bins + len(extra), dtype=np.int64)
            free[new] = p.capacity
            bins, take, n_bins = np.r_[bins, new], np.r_[take, extra], n_bins + len(extra)
        bin_of[run] = np.repeat(bins + first_bin, take)
        free[bins] -= take * s
        slots[bins] -= take
        free[bins[slots[bins] == 0]] = -1
        tree.refresh(bins)
    return first_bin + n_bins


def _first_fit_each(p: _Problem, items: I64, bin_of: I64, first_bin: int) -> int:
    """First fit of ``items`` in the given order, one at a time; returns the next bin number."""
    tree = _FitTree(len(items), p.media is not None)
    slots = [p.max_items] * len(items)
    free = [p.capacity] * len(items)
    free_media = [p.budget] * len(items)
    out = []
    n_bins = 0
    for s, m in zip(p.cost[items].tolist(), p.media_of(items), strict=True):
        b = tree.first(s, m)
        if b < 0:
            b, n_bins = n_bins, n_bins + 1
        slots[b] -= 1
        free[b] -= s
        free_media[b] -= m
        tree.set(b, free[b] if slots[b] else -1, free_media[b])
        out.append(b + first_bin)
    bin_of[items] = out
    return first_bin + n_bins


def _buckets_needed(count: I64, s: int, need: int, top: int) -> I64:
    """Non-empty buckets s, s+1, ..., top, in order, until their bins could absorb ``need`` items."""
    width = 64
    while True:
        hi = min(top + 1, s + width)
        levels = np.flatnonzero(count[s:hi]) + s
        cum = np.cumsum(count[levels] * (levels // s))
        j = int(np.searchsorted(cum, need))
        if j < len(levels) or hi > top:
            return levels[: j + 1]
        width *= 8


def _into_buckets(buckets: list[list[int]], count: I64, bins: I64, levels: I64) -> None:
    """Put ``bins`` into the buckets named by ``levels``, keeping every bucket sorted by bin id."""
    if not len(bins):
        return
    order = np.lexsort((bins, levels))
    flat, levels = bins[order].tolist(), levels[order]
    starts = np.flatnonzero(np.r_[True, levels[1:] != levels[:-1]])
    ends = np.r_[starts[1:], len(levels)]
    count[levels[starts]] += ends - starts
    for r, a, e in zip(levels[starts].tolist(), starts.tolist(), ends.tolist(), strict=True):
        bucket = buckets[r]
        unsorted = bool(bucket) and bucket[-1] > flat[a]
        bucket += flat[a:e]
        if unsorted:
            bucket.sort()


def _best_fit_batched(p: _Problem, items: I64, bin_of: I64) -> None:
    """Best fit of ``items`` (by decreasing cost, no media budget).

    Bins sit in buckets by free tokens, each bucket sorted by bin id. A run of k items of cost s
    drains buckets s, s+1, ... in order; a bin with f free takes min(f // s, slots) items, since it
    stays the tightest fit until f < s. Example, capacity 10, free [4, 6, 4] (bins 0-2), three 2s:
    bucket 4 = [0, 2] -> bin 0 takes two, bin 2 takes one; bin 1 is untouched.
    """
    buckets: list[list[int]] = [[] for _ in range(p.capacity + 1)]
    count = np.zeros(p.capacity + 1, dtype=np.int64)
    free = np.zeros(len(items), dtype=np.int64)
    slots = np.full(len(items), p.max_items, dtype=np.int64)
    n_bins, top = 0, -1  # no bucket above ``top`` holds a bin
    for s, run in _runs(p.cost, items):
        done = 0
        while done < len(run) and s <= top:
            levels = _buckets_needed(count, s, len(run) - done, top)
            if not len(levels):
                top = s - 1
                break
            bins = np.fromiter((b for r in levels.tolist() for b in buckets[r]), dtype=np.int64)
            for r in levels.tolist():
                buckets[r] = []
            count[levels] = 0
            take = _cut(np.minimum(free[bins] // s, slots[bins]), len(run) - done)
            used = bins[: len(take)]
            bin_of[run[done : done + int(take.sum())]] = np.repeat(used, take)
            done += int(take.sum())
            free[used] -= take * s
            slots[used] -= take
            back = np.r_[bins[len(take) :], used[slots[used] > 0]]
            _into_buckets(buckets, count, back, free[back])
        if done < len(run):
            take = _fresh(p, s, len(run) - done)
            new = np.arange(n_bins, n_bins + len(take), dtype=np.int64)
            bin_of[run[done:]] = np.repeat(new, take)
            free[new], slots[new], n_bins = p.capacity - take * s, p.max_items - take, n_bins + len(take)
            live = new[slots[new] > 0]
            _into_buckets(buckets, count, live, free[live])
            top = max(top, int(free[new].max()))


def _fit_by_level(p: _Problem, items: I64, bin_of: I64, n_open: int, worst: bool) -> None:
    """Best (or, with ``worst``, emptiest) fit one item at a time under a media budget."""
    index = _LevelIndex(p.capacity, n_open + len(items))
    for b in range(n_open):
        index.add(b, p.capacity, p.budget)
    slots = [p.max_items] * (n_open + len(items))
    out = []
    n_bins = n_open
    for s, m in zip(p.cost[items].tolist(), p.media_of(items), strict=True):
        b = index.worst(s, m) if worst else index.best(s, m)
        if b < 0:
            b, free, free_media, n_bins = n_bins, p.capacity, p.budget, n_bins + 1
        else:
            free, free_media = index.free[b], index.free_media[b]
            index.remove(b)
        slots[b] -= 1
        if slots[b]:
            index.add(b, free - s, free_media - m)
        out.append(b)
    bin_of[items] = out


def _emptiest_fit(p: _Problem, items: I64, bin_of: I64, n_open: int) -> None:
    """Each item into the open bin with the most free tokens (lowest id on ties), via a heap."""
    heap = [(-p.capacity, b) for b in range(n_open)]  # (-free, bin): already a heap
    slots = [p.max_items] * (n_open + len(items))
    out = []
    n_bins = n_open
    for s in p.cost[items].tolist():
        if heap and -heap[0][0] >= s:
            neg_free, b = heap[0]
            slots[b] -= 1
            if slots[b]:
                heapq.heapreplace(heap, (neg_free + s, b))
            else:
                heapq.heappop(heap)
        else:
            b, n_bins = n_bins, n_bins + 1
            slots[b] -= 1
            if slots[b]:
                heapq.heappush(heap, (s - p.capacity, b))
        out.append(b)
    bin_of[items] = out


# ---------------------------------------------------------------------------------------------------
# Algorithms: _Problem -> int64 [n] bin number of each item
# ---------------------------------------------------------------------------------------------------


def _algorithm(core: Callable[[_Problem], I64]) -> PackFn:
    """Wrap ``core`` in the public signature: validate, place, canonicalize, split to the multiple."""

    def run(
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
    ) -> list[list[int]]:
        p = _problem(lengths, capacity, pad_multiple, max_sequences_per_pack, media, media_budget, seed, delta)
        if pack_count_multiple is not None and pack_count_multiple < 1:
            raise ValueError(f"pack_count_multiple must be >= 1, got {pack_count_multiple}")
        packs = _canonical(core(p)) if len(p.cost) else []
        return _split_to_multiple(packs, p.cost, pack_count_multiple or 1)

    run.__name__ = run.__qualname__ = core.__name__
    run.__doc__ = core.__doc__
    return run


@_algorithm
def concatenative(p: _Problem) -> I64:
    """In input order; a new pack starts when the next item does not fit (tokens, count or media)."""
    n = len(p.cost)
    bin_of = np.empty(n, dtype=np.int64)
    tokens = np.r_[0, np.cumsum(p.cost)]  # int64 [n + 1]
    patches = None if p.media is None else np.r_[0, np.cumsum(p.media)]
    i = b = 0
    while i < n:
        j = min(int(np.searchsorted(tokens, tokens[i] + p.capacity, "right")) - 1, i + p.max_items)
        if patches is not None:
            j = min(j, int(np.searchsorted(patches, patches[i] + p.budget, "right")) - 1)
        bin_of[i:j] = b
        i, b = j, b + 1
    return bin_of


@_algorithm
def first_fit_decreasing(p: _Problem) -> I64:
    """Items by decreasing cost, each into the first (oldest) bin where it fits."""
    bin_of = np.empty(len(p.cost), dtype=np.int64)
    place = _first_fit_each if p.media is not None else _first_fit_batched
    place(p, p.decreasing(), bin_of, 0)
    return bin_of


@_algorithm
def first_fit_shuffle(p: _Problem) -> I64:
    """Items in a seeded random order (PCG64(seed) permutation), each into the first bin where it fits."""
    bin_of = np.empty(len(p.cost), dtype=np.int64)
    order = np.random.Generator(np.random.PCG64(p.seed)).permutation(len(p.cost)).astype(np.int64)
    _first_fit_each(p, order, bin_of, 0)
    return bin_of


@_algorithm
def best_fit_decreasing(p: _Problem) -> I64:
    """Items by decreasing cost, each into the bin it leaves with the fewest free tokens."""
    bin_of = np.empty(len(p.cost), dtype=np.int64)
    if p.media is not None:
        _fit_by_level(p, p.decreasing(), bin_of, 0, worst=False)
    else:
        _best_fit_batched(p, p.decreasing(), bin_of)
    return bin_of


@_algorithm
def balanced_greedy_knapsack(p: _Problem) -> I64:
    """Open ceil(total / capacity) + delta packs (at least 1, at most n); items by decreasing cost,
    each into the emptiest pack where it fits; a new pack only when none fits. Unused packs vanish."""
    n = len(p.cost)
    n_open = min(n, max(1, -(-int(p.cost.sum()) // p.capacity) + p.delta))
    bin_of = np.empty(n, dtype=np.int64)
    if p.media is not None:
        _fit_by_level(p, p.decreasing(), bin_of, n_open, worst=True)
    else:
        _emptiest_fit(p, p.decreasing(), bin_of, n_open)
    return bin_of


@_algorithm
def greedy_knapsack(p: _Problem) -> I64:
    """One pack at a time: put in the largest remaining item that fits until none does.

    With these tie rules this yields the same packs as first_fit_decreasing (FFD fills bin 1 by
    scanning items largest first, which is exactly this greedy); it is kept as its own algorithm.
    """
    bin_of = np.empty(len(p.cost), dtype=np.int64)
    pool = _Pool(p, np.arange(len(p.cost), dtype=np.int64))
    b = 0
    while pool.alive:
        free, free_media, slots = p.capacity, p.budget, p.max_items
        while slots and (q := pool.largest(free, free_media)) >= 0:
            free, free_media, slots = free - pool.costs[q], free_media - pool.media[q], slots - 1
            bin_of[pool.take(q)] = b
        b += 1
    return bin_of


@_algorithm
def modified_first_fit_decreasing(p: _Problem) -> I64:
    """Johnson & Garey's MFFD (1985). Classes by cost: large > C/2, medium (C/3, C/2], small (C/6, C/3].

    1. each large item opens a bin, largest first;
    2. forward over those bins: put in the largest medium item that fits;
    3. backward over the bins without a medium item: if the two smallest small items fit together,
       put in the smallest, then the largest small item that still fits;
    4. forward over those bins: put in the largest remaining item that fits, until none does;
    5. first fit decreasing for the rest, in new bins.
    """
    c, order = p.capacity, p.decreasing()
    large = order[2 * p.cost[order] > c]
    bin_of = np.empty(len(p.cost), dtype=np.int64)
    bin_of[large] = np.arange(len(large))
    pool = _Pool(p, order[2 * p.cost[order] <= c])
    free = (c - p.cost[large]).tolist()
    free_media = [p.budget - m for m in p.media_of(large)]
    slots = [p.max_items - 1] * len(large)

    def put(b: int, q: int) -> None:
        free[b] -= pool.costs[q]
        free_media[b] -= pool.media[q]
        slots[b] -= 1
        bin_of[pool.take(q)] = b

    medium = [False] * len(large)
    for b in range(len(large)):
        if slots[b] and (q := pool.largest(min(free[b], c // 2), free_media[b], c // 3 + 1)) >= 0:
            put(b, q)
            medium[b] = True
    for b in reversed(range(len(large))):
        first = pool.smallest(c // 6 + 1)
        second = pool.smallest(c // 6 + 1, start=first) if first >= 0 else -1
        if second < 0 or pool.costs[second] > c // 3:
            break  # fewer than two small items remain
        pair_fits = pool.costs[first] + pool.costs[second] <= free[b]
        if medium[b] or slots[b] < 2 or not pair_fits or pool.media[first] + pool.media[second] > free_media[b]:
            continue
        put(b, first)
        put(b, pool.largest(min(free[b], c // 3), free_media[b], c // 6 + 1))
    for b in range(len(large)):
        while slots[b] and (q := pool.largest(free[b], free_media[b])) >= 0:
            put(b, q)
    rest = pool.remaining()
    rest = rest[np.argsort(-p.cost[rest], kind="stable")]
    (_first_fit_each if p.media is not None else _first_fit_batched)(p, rest, bin_of, len(large))
    return bin_of


ALGORITHMS: dict[str, PackFn] = {
    "concatenative": concatenative,
    "first_fit_decreasing": first_fit_decreasing,
    "first_fit_shuffle": first_fit_shuffle,
    "best_fit_decreasing": best_fit_decreasing,
    "modified_first_fit_decreasing": modified_first_fit_decreasing,
    "greedy_knapsack": greedy_knapsack,
    "balanced_greedy_knapsack": balanced_greedy_knapsack,
}


def pack(
    lengths: Sequence[int],
    capacity: int,
    algorithm: str = "best_fit_decreasing",
    *,
    pad_multiple: int = 1,
    max_sequences_per_pack: int | None = None,
    media: Sequence[int] | None = None,
    media_budget: int | None = None,
    pack_count_multiple: int | None = None,
    seed: int = 0,
    delta: int = 0,
) -> list[list[int]]:
    """Partition ``range(len(lengths))`` into packs with ``algorithm`` (a key of ``ALGORITHMS``).

    Raises ValueError for an unknown algorithm, a bad knob, or an item that cannot fit even alone
    (cost > capacity or media > media_budget); nothing is ever dropped. ``media`` only counts when
    ``media_budget`` is given. With ``pack_count_multiple=k`` the pack count is made a multiple of k
    by splitting multi-item packs; if there are too few items for that, the packs come back as they
    are (the caller checks ``len(packs) % k``).
    """
    fn = ALGORITHMS.get(algorithm)
    if fn is None:
        raise ValueError(f"unknown packing algorithm {algorithm!r}; valid: {', '.join(sorted(ALGORITHMS))}")
    return fn(
        lengths,
        capacity,
        pad_multiple=pad_multiple,
        max_sequences_per_pack=max_sequences_per_pack,
        media=media,
        media_budget=media_budget,
        pack_count_multiple=pack_count_multiple,
        seed=seed,
        delta=delta,
    )


# ---------------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------------


def _canonical(bin_of: I64) -> list[list[int]]:
    """Bin numbers -> packs, each sorted ascending, packs sorted by first index."""
    order = np.argsort(bin_of, kind="stable")  # by bin, then by index
    b = bin_of[order]
    starts = np.flatnonzero(np.r_[True, b[1:] != b[:-1]])
    ends = np.r_[starts[1:], len(b)]
    rank = np.argsort(order[starts])
    flat = order.tolist()
    return [flat[a:e] for a, e in zip(starts[rank].tolist(), ends[rank].tolist(), strict=True)]


def _halve(items: list[int], cost: I64) -> tuple[list[int], list[int]]:
    """Split by cost, largest first, each item into the lighter half (the first on ties)."""
    halves: tuple[list[int], list[int]] = ([], [])
    loads = [0, 0]
    for i in sorted(items, key=lambda i: (-int(cost[i]), i)):
        h = 0 if loads[0] <= loads[1] else 1
        halves[h].append(i)
        loads[h] += int(cost[i])
    return sorted(halves[0]), sorted(halves[1])


def _split_to_multiple(packs: list[list[int]], cost: I64, k: int) -> list[list[int]]:
    """Split packs until their number is a multiple of k; unchanged if there are too few items.

    The pack split next is the multi-item pack with the most tokens (then most items, then lowest
    first index), halved by ``_halve``. Example, k=4, costs [5, 1, 1, 3, 2], packs
    [[0, 1, 2], [3, 4]] -> split [0, 1, 2] into [0], [1, 2]; then [3, 4] into [3], [4].
    Halves of a valid pack are valid, and no pack is ever empty.
    """
    target = -(-len(packs) // k) * k
    if target == len(packs) or target > len(cost):
        return packs
    packs = list(packs)
    heap = [(-int(cost[q].sum()), -len(q), q[0], j) for j, q in enumerate(packs) if len(q) > 1]
    heapq.heapify(heap)
    while len(packs) < target:
        j = heapq.heappop(heap)[3]
        packs[j], half = _halve(packs[j], cost)
        packs.append(half)
        for idx in (j, len(packs) - 1):
            q = packs[idx]
            if len(q) > 1:
                heapq.heappush(heap, (-int(cost[q].sum()), -len(q), q[0], idx))
    return sorted(packs, key=lambda q: q[0])
