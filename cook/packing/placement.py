"""Placement loops: each fills ``bin_of[items]`` (int64 bin numbers) for a ``Problem``.

- ``first_fit_batched``: first fit by decreasing cost, a run of equal-cost items per numpy step
  (``BatchTree``); no media budget.
- ``first_fit_each``: first fit in the given order, one item at a time (flat max tree without media,
  ``FitTree`` with it).
- ``best_fit_batched``: best fit by decreasing cost, a run per step over buckets of bins keyed by
  free tokens; no media budget.
- ``fit_by_level``: best or emptiest fit one item at a time under a media budget (``LevelIndex``).
- ``emptiest_fit``: each item into the open bin with the most free tokens (a heap); no media budget.

The first fit routines number bins from ``first_bin``; the others number them from 0, where
``n_open`` bins start open and empty.
"""

from __future__ import annotations

import heapq

import numpy as np

from cook.packing.problem import I64, Problem
from cook.packing.structures import BatchTree, FitTree, LevelIndex, runs_of

__all__ = ["best_fit_batched", "emptiest_fit", "first_fit_batched", "first_fit_each", "fit_by_level"]


def _runs(cost: I64, items: I64) -> list[tuple[int, I64]]:
    """Split ``items`` (sorted by cost) into runs of equal cost."""
    if not len(items):
        return []
    c = cost[items]
    starts, ends = runs_of(c)
    return [(int(c[a]), items[a:e]) for a, e in zip(starts.tolist(), ends.tolist(), strict=True)]


def _cut(take: I64, k: int) -> I64:
    """Shorten per-bin takes so that they sum to at most k: ``[3, 3, 3], k=7 -> [3, 3, 1]``."""
    cum = np.cumsum(take)
    j = int(np.searchsorted(cum, k))
    if j < len(take):
        take = take[: j + 1].copy()
        take[j] -= cum[j] - k
    return take


def _fresh(p: Problem, s: int, k: int) -> I64:
    """Takes of the new bins for k items of cost s: each as full as allowed, the last one partial."""
    per = min(p.capacity // s, p.max_items)
    take = np.full(-(-k // per), per, dtype=np.int64)
    take[-1] = k - per * (len(take) - 1)
    return take


def first_fit_batched(p: Problem, items: I64, bin_of: I64, first_bin: int) -> None:
    """First fit of ``items`` (by decreasing cost, no media budget).

    A run of k items of cost s fills the leftmost bins with >= s free, each taking min(free // s,
    slots) items (a bin stays the leftmost fit until it is full), then opens fresh bins. Example,
    capacity 10, free [3, 5, 9], run of four 3s: bin 0 takes 1, bin 1 takes 1, bin 2 takes 2.
    """
    tree = BatchTree(len(items))
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
            bins, take, n_bins = np.concatenate((bins, new)), np.concatenate((take, extra)), n_bins + len(extra)
        bin_of[run] = np.repeat(bins + first_bin, take)
        free[bins] -= take * s
        slots[bins] -= take
        free[bins[slots[bins] == 0]] = -1
        tree.refresh(bins)


def _first_fit_plain(capacity: int, costs: list[int], slots: list[int]) -> list[int]:
    """``first_fit_each`` without media, inlined: the max tree as a flat list (-1 = unopened/closed)."""
    size = 1 << max(0, len(costs) - 1).bit_length()
    tree = [-1] * (2 * size)
    out = []
    n_bins = 0
    for s in costs:
        i = 1
        if tree[1] >= s:
            while i < size:
                i <<= 1
                if tree[i] < s:
                    i += 1
        else:
            i, n_bins = n_bins + size, n_bins + 1
            tree[i] = capacity
        slots[i - size] -= 1
        tree[i] = tree[i] - s if slots[i - size] else -1
        out.append(i - size)
        while i > 1:
            i >>= 1
            left, right = tree[2 * i], tree[2 * i + 1]
            best = left if left > right else right
            if tree[i] == best:
                break
            tree[i] = best
    return out


def first_fit_each(p: Problem, items: I64, bin_of: I64, first_bin: int) -> None:
    """First fit of ``items`` in the given order, one at a time."""
    if p.media is None:
        out = _first_fit_plain(p.capacity, p.cost[items].tolist(), [p.max_items] * len(items))
        bin_of[items] = np.array(out, dtype=np.int64) + first_bin
        return
    tree = FitTree(len(items))
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


def _into_buckets(buckets: dict[int, list[int]], count: I64, bins: I64, levels: I64) -> None:
    """Put ``bins`` into the buckets named by ``levels``, keeping every bucket sorted by bin id."""
    if not len(bins):
        return
    order = np.lexsort((bins, levels))
    flat, levels = bins[order].tolist(), levels[order]
    starts, ends = runs_of(levels)
    count[levels[starts]] += ends - starts
    for r, a, e in zip(levels[starts].tolist(), starts.tolist(), ends.tolist(), strict=True):
        bucket = buckets.setdefault(r, [])
        unsorted = bool(bucket) and bucket[-1] > flat[a]
        bucket += flat[a:e]
        if unsorted:
            bucket.sort()


def best_fit_batched(p: Problem, items: I64, bin_of: I64) -> None:
    """Best fit of ``items`` (by decreasing cost, no media budget).

    Bins sit in buckets by free tokens, each bucket sorted by bin id. A run of k items of cost s
    drains buckets s, s+1, ... in order; a bin with f free takes min(f // s, slots) items, since it
    stays the tightest fit until f < s. Example, capacity 10, free [4, 6, 4] (bins 0-2), three 2s:
    bucket 4 = [0, 2] -> bin 0 takes two, bin 2 takes one; bin 1 is untouched.
    """
    buckets: dict[int, list[int]] = {}  # free tokens -> bins, ascending
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
            bins = np.fromiter((b for r in levels.tolist() for b in buckets.pop(r)), dtype=np.int64)
            count[levels] = 0
            take = _cut(np.minimum(free[bins] // s, slots[bins]), len(run) - done)
            used = bins[: len(take)]
            bin_of[run[done : done + int(take.sum())]] = np.repeat(used, take)
            done += int(take.sum())
            free[used] -= take * s
            slots[used] -= take
            back = np.concatenate((bins[len(take) :], used[slots[used] > 0]))
            _into_buckets(buckets, count, back, free[back])
        if done < len(run):
            take = _fresh(p, s, len(run) - done)
            new = np.arange(n_bins, n_bins + len(take), dtype=np.int64)
            bin_of[run[done:]] = np.repeat(new, take)
            free[new], slots[new], n_bins = p.capacity - take * s, p.max_items - take, n_bins + len(take)
            live = new[slots[new] > 0]
            _into_buckets(buckets, count, live, free[live])
            top = max(top, int(free[new].max()))


def fit_by_level(p: Problem, items: I64, bin_of: I64, n_open: int, worst: bool) -> None:
    """Best (or, with ``worst``, emptiest) fit one item at a time under a media budget."""
    index = LevelIndex(p.capacity, n_open + len(items))
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


def emptiest_fit(p: Problem, items: I64, bin_of: I64, n_open: int) -> None:
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
