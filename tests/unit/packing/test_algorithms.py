"""cook.packing.algorithms: property tests for every algorithm, exact small cases, and a cross-check
of every algorithm against a naive O(n * bins) reference written out below."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cook.packing import ALGORITHMS, pack

NAMES = sorted(ALGORITHMS)
PROPS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------------------------------------------
# Naive references: one item at a time, every open bin scanned
# ---------------------------------------------------------------------------------------------------


@dataclass
class Bin:
    free: int
    free_media: int
    slots: int
    items: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Case:
    lengths: list[int]
    capacity: int
    pad_multiple: int = 1
    max_seq: int | None = None
    media: list[int] | None = None
    media_budget: int | None = None
    seed: int = 0
    delta: int = 0

    @property
    def cost(self) -> list[int]:
        return [math.ceil(n / self.pad_multiple) * self.pad_multiple for n in self.lengths]

    @property
    def patches(self) -> list[int]:
        use = self.media is not None and self.media_budget is not None
        return list(self.media) if use and self.media else [0] * len(self.lengths)

    @property
    def budget(self) -> int:
        return self.media_budget if self.media is not None and self.media_budget is not None else 0

    def new_bin(self) -> Bin:
        return Bin(self.capacity, self.budget, self.max_seq or len(self.lengths))

    def fits(self, b: Bin, i: int) -> bool:
        return b.free >= self.cost[i] and b.free_media >= self.patches[i] and b.slots > 0

    def put(self, b: Bin, i: int) -> None:
        b.free -= self.cost[i]
        b.free_media -= self.patches[i]
        b.slots -= 1
        b.items.append(i)

    def decreasing(self) -> list[int]:
        return sorted(range(len(self.lengths)), key=lambda i: (-self.cost[i], i))

    def kwargs(self) -> dict[str, object]:
        return dict(
            pad_multiple=self.pad_multiple,
            max_sequences_per_pack=self.max_seq,
            media=self.media,
            media_budget=self.media_budget,
            seed=self.seed,
            delta=self.delta,
        )


def canonical(bins: Sequence[Bin]) -> list[list[int]]:
    return sorted((sorted(b.items) for b in bins if b.items), key=lambda q: q[0])


def naive_fit(case: Case, order: Sequence[int], rule: str, bins: list[Bin] | None = None) -> list[Bin]:
    """rule: first (lowest id), best (least free, most media room, lowest id), worst (most free, ...)."""
    bins = bins if bins is not None else []
    for i in order:
        fitting = [j for j, b in enumerate(bins) if case.fits(b, i)]
        keys = {
            "first": lambda j: j,
            "best": lambda j: (bins[j].free, -bins[j].free_media, j),
            "worst": lambda j: (-bins[j].free, -bins[j].free_media, j),
        }
        if fitting:
            case.put(bins[min(fitting, key=keys[rule])], i)
        else:
            bins.append(case.new_bin())
            case.put(bins[-1], i)
    return bins


def naive_largest(case: Case, left: list[int], b: Bin, lo: int = 0, hi: int | None = None) -> int | None:
    """The largest remaining item (lowest index on ties) with cost in [lo, hi] that fits b."""
    ok = [i for i in left if case.fits(b, i) and lo <= case.cost[i] <= (hi or case.capacity)]
    return min(ok, key=lambda i: (-case.cost[i], i)) if ok else None


def naive_mffd(case: Case) -> list[Bin]:
    c, cost = case.capacity, case.cost
    order = case.decreasing()
    large = [i for i in order if 2 * cost[i] > c]
    left = [i for i in order if 2 * cost[i] <= c]
    bins = []
    for i in large:
        bins.append(case.new_bin())
        case.put(bins[-1], i)

    def take(b: Bin, i: int) -> None:
        left.remove(i)
        case.put(b, i)

    medium = set()
    for j, b in enumerate(bins):
        i = naive_largest(case, left, b, c // 3 + 1, c // 2)
        if i is not None:
            take(b, i)
            medium.add(j)
    for j in reversed(range(len(bins))):
        small = sorted((i for i in left if c // 6 + 1 <= cost[i] <= c // 3), key=lambda i: (cost[i], -i))
        if len(small) < 2:
            break
        b, (i1, i2) = bins[j], small[:2]
        pair_media = case.patches[i1] + case.patches[i2]
        if j in medium or b.slots < 2 or cost[i1] + cost[i2] > b.free or pair_media > b.free_media:
            continue
        take(b, i1)
        take(b, naive_largest(case, left, b, c // 6 + 1, c // 3))
    for b in bins:
        while (i := naive_largest(case, left, b)) is not None:
            take(b, i)
    return bins + naive_fit(case, sorted(left, key=lambda i: (-cost[i], i)), "first")


def naive_greedy(case: Case) -> list[Bin]:
    left = case.decreasing()
    bins = []
    while left:
        bins.append(case.new_bin())
        while (i := naive_largest(case, left, bins[-1])) is not None:
            left.remove(i)
            case.put(bins[-1], i)
    return bins


def naive_concatenative(case: Case) -> list[Bin]:
    bins = [case.new_bin()]
    for i in range(len(case.lengths)):
        if not case.fits(bins[-1], i):
            bins.append(case.new_bin())
        case.put(bins[-1], i)
    return bins


def naive_pack(case: Case, name: str) -> list[list[int]]:
    n = len(case.lengths)
    if n == 0:
        return []
    if name == "concatenative":
        return canonical(naive_concatenative(case))
    if name == "first_fit_decreasing":
        return canonical(naive_fit(case, case.decreasing(), "first"))
    if name == "first_fit_shuffle":
        order = np.random.Generator(np.random.PCG64(case.seed)).permutation(n).tolist()
        return canonical(naive_fit(case, order, "first"))
    if name == "best_fit_decreasing":
        return canonical(naive_fit(case, case.decreasing(), "best"))
    if name == "balanced_greedy_knapsack":
        n_open = min(n, max(1, math.ceil(sum(case.cost) / case.capacity) + case.delta))
        return canonical(naive_fit(case, case.decreasing(), "worst", [case.new_bin() for _ in range(n_open)]))
    if name == "greedy_knapsack":
        return canonical(naive_greedy(case))
    assert name == "modified_first_fit_decreasing"
    return canonical(naive_mffd(case))
