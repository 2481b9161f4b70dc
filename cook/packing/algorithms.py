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

Fast paths (no media budget) place a whole run of equal-cost items per numpy step: first
fit descends a 16-ary max tree over the bins' free tokens, best fit walks buckets of bins keyed by
free tokens. With a binding media budget the same rules run one item at a time on trees that also
track media room: exact, slower. ``greedy_knapsack`` and MFFD take items from an ordered multiset of
the remaining items (sorted list + union-find "previous alive"). Cost: O(n log n) plus O(capacity)
per distinct item cost.

Layout (imports run one way): ``algorithms`` (this module: the algorithms, ``ALGORITHMS``, ``pack``
and the canonical output) -> ``placement`` (the placement loops) -> ``structures`` (trees, pool,
level index) -> ``problem`` (validation, padded costs).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Sequence

import numpy as np

from cook.packing.placement import best_fit_batched, emptiest_fit, first_fit_batched, first_fit_each, fit_by_level
from cook.packing.problem import I64, PackRequest, Problem, make_problem, stable_argsort
from cook.packing.structures import Pool, runs_of

__all__ = ["ALGORITHMS", "PackRequest", "pack", "pack_flat"]


# ---------------------------------------------------------------------------------------------------
# Algorithms: Problem -> int64 [n] bin number of each item
# ---------------------------------------------------------------------------------------------------


def concatenative(p: Problem) -> I64:
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


def first_fit_decreasing(p: Problem) -> I64:
    """Items by decreasing cost, each into the first (oldest) bin where it fits."""
    bin_of = np.empty(len(p.cost), dtype=np.int64)
    place = first_fit_each if p.media is not None else first_fit_batched
    place(p, p.decreasing(), bin_of, 0)
    return bin_of


def first_fit_shuffle(p: Problem) -> I64:
    """Items in a seeded random order (PCG64(seed) permutation), each into the first bin where it fits."""
    bin_of = np.empty(len(p.cost), dtype=np.int64)
    order = np.random.Generator(np.random.PCG64(p.seed)).permutation(len(p.cost)).astype(np.int64)
    first_fit_each(p, order, bin_of, 0)
    return bin_of


def best_fit_decreasing(p: Problem) -> I64:
    """Items by decreasing cost, each into the bin it leaves with the fewest free tokens."""
    bin_of = np.empty(len(p.cost), dtype=np.int64)
    if p.media is not None:
        fit_by_level(p, p.decreasing(), bin_of, 0, worst=False)
    else:
        best_fit_batched(p, p.decreasing(), bin_of)
    return bin_of


def balanced_greedy_knapsack(p: Problem) -> I64:
    """Open ceil(total / capacity) + delta packs (at least 1, at most n); items by decreasing cost,
    each into the emptiest pack where it fits; a new pack only when none fits. Unused packs vanish."""
    n = len(p.cost)
    n_open = min(n, max(1, -(-int(p.cost.sum()) // p.capacity) + p.delta))
    bin_of = np.empty(n, dtype=np.int64)
    if p.media is not None:
        fit_by_level(p, p.decreasing(), bin_of, n_open, worst=True)
    else:
        emptiest_fit(p, p.decreasing(), bin_of, n_open)
    return bin_of


def greedy_knapsack(p: Problem) -> I64:
    """One pack at a time: put in the largest remaining item that fits until none does.

    With these tie rules this yields the same packs as first_fit_decreasing (FFD fills bin 1 by
    scanning items largest first, which is exactly this greedy); it is kept as its own algorithm.
    """
    bin_of = np.empty(len(p.cost), dtype=np.int64)
    pool = Pool(p, np.arange(len(p.cost), dtype=np.int64))
    b = 0
    while pool.alive:
        free, free_media, slots = p.capacity, p.budget, p.max_items
        while slots and (q := pool.largest(free, free_media)) >= 0:
            free, free_media, slots = free - pool.costs[q], free_media - pool.media[q], slots - 1
            bin_of[pool.take(q)] = b
        b += 1
    return bin_of


def modified_first_fit_decreasing(p: Problem) -> I64:
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
    pool = Pool(p, order[2 * p.cost[order] <= c])
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
    rest = rest[stable_argsort(p.capacity - p.cost[rest])]
    (first_fit_each if p.media is not None else first_fit_batched)(p, rest, bin_of, len(large))
    return bin_of


ALGORITHMS: dict[str, Callable[[Problem], I64]] = {
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
    request = PackRequest(
        capacity, pad_multiple, max_sequences_per_pack, media_budget, pack_count_multiple, seed, delta
    )
    return _lists(*pack_flat(lengths, request, algorithm, media))


def pack_flat(
    lengths: Sequence[int] | np.ndarray,
    request: PackRequest,
    algorithm: str = "best_fit_decreasing",
    media: Sequence[int] | np.ndarray | None = None,
) -> tuple[I64, I64]:
    """``pack`` as two arrays, for windows of millions: ``order`` (int64 [N], the items pack by pack)
    and ``bounds`` (int64 [P + 1]); pack ``j`` is ``order[bounds[j]:bounds[j + 1]]``. The same packs
    in the same order as ``pack``, without a Python object per item."""
    core = ALGORITHMS.get(algorithm)
    if core is None:
        raise ValueError(f"unknown packing algorithm {algorithm!r}; valid: {', '.join(sorted(ALGORITHMS))}")
    p = make_problem(lengths, request, media)
    if not len(p.cost):
        return np.zeros(0, np.int64), np.zeros(1, np.int64)
    order, bounds = _canonical_flat(core(p))
    if request.pack_count_multiple in (None, 1):
        return order, bounds
    packs = _split_to_multiple(_lists(order, bounds), p.cost, request.pack_count_multiple)  # works on lists
    sizes = np.array([len(q) for q in packs], dtype=np.int64)
    flat = np.fromiter((i for q in packs for i in q), dtype=np.int64, count=int(sizes.sum()))
    return flat, np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


# ---------------------------------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------------------------------


def _canonical_flat(bin_of: I64) -> tuple[I64, I64]:
    """Bin numbers -> (order, bounds): packs each sorted ascending, packs sorted by first index."""
    order = stable_argsort(bin_of)  # by bin, then by index
    starts, ends = runs_of(bin_of[order])
    rank = np.argsort(order[starts])
    first, size = starts[rank], (ends - starts)[rank]
    bounds = np.concatenate([[0], np.cumsum(size)]).astype(np.int64)
    index = np.arange(len(order), dtype=np.int64) + np.repeat(first - bounds[:-1], size)
    return order[index].astype(np.int64), bounds


def _lists(order: I64, bounds: I64) -> list[list[int]]:
    """``(order, bounds)`` -> the packs as index lists."""
    flat = order.tolist()
    return [flat[a:e] for a, e in itertools.pairwise(bounds.tolist())]


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
