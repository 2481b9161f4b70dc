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
    ok = [i for i in left if case.fits(b, i) and lo <= case.cost[i] <= (case.capacity if hi is None else hi)]
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


# ---------------------------------------------------------------------------------------------------
# Strategies and checks
# ---------------------------------------------------------------------------------------------------


@st.composite
def cases(draw: st.DrawFn, max_n: int = 40, constrained: bool = True) -> Case:
    capacity = draw(st.integers(1, 64) | st.integers(65, 3000))  # > 64: bucket search widens
    pad = draw(st.sampled_from([1, 1, 2, 4, 8])) if constrained else 1
    pad = pad if capacity >= pad else 1
    top = capacity // pad * pad
    n = draw(st.integers(0, max_n))
    if draw(st.booleans()):  # few distinct lengths: long runs of ties
        values = draw(st.lists(st.integers(1, top), min_size=1, max_size=4))
        lengths = draw(st.lists(st.sampled_from(values), min_size=n, max_size=n))
    else:
        lengths = draw(st.lists(st.integers(1, top), min_size=n, max_size=n))
    if not constrained:
        return Case(lengths, capacity)
    max_seq = draw(st.none() | st.integers(1, 5))
    media = budget = None
    if draw(st.booleans()):
        budget = draw(st.integers(0, 12))
        media = draw(st.lists(st.integers(0, budget), min_size=n, max_size=n))
    seed = draw(st.integers(0, 2**32 - 1))
    delta = draw(st.integers(-2, 3))
    return Case(lengths, capacity, pad, max_seq, media, budget, seed, delta)


def check_valid(case: Case, packs: list[list[int]]) -> None:
    n = len(case.lengths)
    assert sorted(i for q in packs for i in q) == list(range(n)), "not a partition"
    assert all(q for q in packs), "empty pack"
    assert all(q == sorted(q) for q in packs)
    assert [q[0] for q in packs] == sorted(q[0] for q in packs)
    for q in packs:
        assert sum(case.cost[i] for i in q) <= case.capacity
        assert case.max_seq is None or len(q) <= case.max_seq
        assert sum(case.patches[i] for i in q) <= case.budget or case.media_budget is None


# ---------------------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@PROPS
@given(case=cases())
def test_matches_naive_reference(name: str, case: Case) -> None:
    packs = pack(case.lengths, case.capacity, name, **case.kwargs())
    check_valid(case, packs)
    assert packs == naive_pack(case, name)


@pytest.mark.slow  # 15 runs of up to 300 lengths per algorithm against the naive reference: ~10 s
@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=15, deadline=None)
@given(case=cases(max_n=300))
def test_matches_naive_reference_long_runs(name: str, case: Case) -> None:
    """Enough items for several tree levels, bucket merges and multi-item runs."""
    assert pack(case.lengths, case.capacity, name, **case.kwargs()) == naive_pack(case, name)


@pytest.mark.parametrize("name", NAMES)
@PROPS
@given(case=cases(max_n=80), k=st.integers(1, 7))
def test_valid_deterministic_and_multiple(name: str, case: Case, k: int) -> None:
    kwargs = case.kwargs()
    plain = pack(case.lengths, case.capacity, name, **kwargs)
    packs = pack(case.lengths, case.capacity, name, pack_count_multiple=k, **kwargs)
    check_valid(case, packs)
    assert packs == pack(np.array(case.lengths, dtype=np.int64), case.capacity, name, pack_count_multiple=k, **kwargs)
    feasible = math.ceil(len(plain) / k) * k <= len(case.lengths)
    assert len(packs) % k == 0 if feasible else packs == plain
    assert len(packs) == (math.ceil(len(plain) / k) * k if feasible else len(plain))


@PROPS
@given(case=cases(max_n=120))
def test_greedy_knapsack_equals_first_fit_decreasing(case: Case) -> None:
    """Filling one pack at a time with the largest item that fits is FFD, bin by bin."""
    kwargs = case.kwargs()
    ffd = pack(case.lengths, case.capacity, "first_fit_decreasing", **kwargs)
    assert pack(case.lengths, case.capacity, "greedy_knapsack", **kwargs) == ffd


@st.composite
def perfect_instances(draw: st.DrawFn) -> tuple[list[int], int, int]:
    """Items cut from `bins` exactly full bins, shuffled: OPT = bins = ceil(total / C)."""
    capacity = draw(st.integers(2, 100))
    n_bins = draw(st.integers(1, 25))
    lengths: list[int] = []
    for _ in range(n_bins):
        cuts = sorted(draw(st.sets(st.integers(1, capacity - 1), max_size=5)))
        lengths += [b - a for a, b in zip([0, *cuts], [*cuts, capacity], strict=True)]
    return draw(st.permutations(lengths)), capacity, n_bins


@pytest.mark.parametrize("name", ["first_fit_decreasing", "best_fit_decreasing", "modified_first_fit_decreasing"])
@PROPS
@given(instance=perfect_instances())
def test_within_11_9_opt_when_opt_is_known(name: str, instance: tuple[list[int], int, int]) -> None:
    """FFD/BFD <= 11/9 OPT + 6/9 (MFFD is tighter). ceil(total / C) stands in for OPT only where it is
    OPT: on inputs cut from full bins (in general OPT can be nearly 2x ceil(total / C))."""
    lengths, capacity, opt = instance
    assert math.ceil(sum(lengths) / capacity) == opt
    assert len(pack(lengths, capacity, name)) <= 11 / 9 * opt + 6 / 9


def brute_force_opt(cost: list[int], capacity: int) -> int:
    full = (1 << len(cost)) - 1
    load = [sum(c for j, c in enumerate(cost) if m >> j & 1) for m in range(full + 1)]
    best = [0] + [len(cost)] * full
    for m in range(1, full + 1):
        low = m & -m
        sub = m
        while sub:  # every sub-mask holding the lowest item that fits in one bin
            if sub & low and load[sub] <= capacity:
                best[m] = min(best[m], best[m ^ sub] + 1)
            sub = (sub - 1) & m
    return best[full]


@pytest.mark.parametrize("name", ["first_fit_decreasing", "best_fit_decreasing", "modified_first_fit_decreasing"])
@settings(max_examples=60, deadline=None)
@given(case=cases(max_n=8, constrained=False))
def test_within_11_9_of_brute_force_opt(name: str, case: Case) -> None:
    opt = brute_force_opt(case.cost, case.capacity)
    assert len(pack(case.lengths, case.capacity, name)) <= 11 / 9 * opt + 6 / 9


@pytest.mark.parametrize(
    "name",
    ["first_fit_decreasing", "best_fit_decreasing", "modified_first_fit_decreasing", "balanced_greedy_knapsack"],
)
@settings(max_examples=150, deadline=None)
@given(case=cases(max_n=16, constrained=False))
def test_matches_naive_reference_plain(name: str, case: Case) -> None:
    """Many small unconstrained inputs: where tie-breaking among equally good bins shows."""
    assert pack(case.lengths, case.capacity, name) == naive_pack(case, name)


# ---------------------------------------------------------------------------------------------------
# Exact small cases (worked by hand)
# ---------------------------------------------------------------------------------------------------

# capacity 12; costs by index 1, 5, 9, 2, 11, 5; decreasing order: 4, 2, 1, 5, 3, 0
SMALL = [1, 5, 9, 2, 11, 5]
EXPECTED = {
    # 1+5 | 9+2 | 11 | 5
    "concatenative": [[0, 1], [2, 3], [4], [5]],
    # 11->b0, 9->b1, 5->b2, 5->b2, 2->b1 (first with >= 2 free), 1->b0
    "first_fit_decreasing": [[0, 4], [1, 5], [2, 3]],
    # ... 2->b2 (2 free beats b1's 3), 1->b0
    "best_fit_decreasing": [[0, 4], [1, 3, 5], [2]],
    # large 11, 9 open b0, b1; no medium fits, no small items; step 4: 1->b0, 2->b1; FFD: 5, 5 -> b2
    "modified_first_fit_decreasing": [[0, 4], [1, 5], [2, 3]],
    "greedy_knapsack": [[0, 4], [1, 5], [2, 3]],
    # 3 packs open; 11->b0, 9->b1, 5->b2, 5->b2 (7 free), 2->b1 (3 free), 1->b2 (2 free)
    "balanced_greedy_knapsack": [[0, 1, 5], [2, 3], [4]],
    # PCG64(0) order 3, 2, 5, 4, 0, 1: 2->b0, 9->b0, 5->b1, 11->b2, 1->b0, 5->b1
    "first_fit_shuffle": [[0, 2, 3], [1, 5], [4]],
}


@pytest.mark.parametrize("name", NAMES)
def test_exact_small_case(name: str) -> None:
    assert pack(SMALL, 12, name) == EXPECTED[name]


def test_exact_textbook_cases() -> None:
    assert pack([5, 4, 3, 2, 1], 6, "first_fit_decreasing") == [[0, 4], [1, 3], [2]]
    # MFFD beats FFD: large 11, 9; step 3 pairs small items 3+4 into b1 (8 free), 3+3 into b0 (6 free)
    lengths = [3, 3, 3, 4, 9, 11]
    assert pack(lengths, 17, "first_fit_decreasing") == [[0, 1, 4], [2], [3, 5]]
    assert pack(lengths, 17, "modified_first_fit_decreasing") == [[0, 1, 5], [2, 3, 4]]
    # BFD tie-breaking: 6 goes to the first of two bins with 6 free; 1 to the first with 1 free
    assert pack([5, 6, 8, 11, 7, 8, 2, 14, 1], 14, "best_fit_decreasing") == [[0, 5], [1, 2], [3, 6, 8], [4], [7]]
    # delta=1 opens 4 packs: 11, 9, 5, 5 one each; 2 -> b2 (7 free, lowest id), 1 -> b3
    assert pack(SMALL, 12, "balanced_greedy_knapsack", delta=1) == [[0, 5], [1, 3], [2], [4]]


def test_constraints_exact() -> None:
    # pad_multiple 4: costs 8, 4, 4 (without padding 5 + 3 would share)
    assert pack([5, 3, 4], 8, "first_fit_decreasing", pad_multiple=4) == [[0], [1, 2]]
    assert pack([5, 3, 4], 8, "first_fit_decreasing") == [[0, 1], [2]]
    assert pack([1] * 5, 10, "best_fit_decreasing", max_sequences_per_pack=2) == [[0, 1], [2, 3], [4]]
    # bin 0 (5 + 3) is full by count with 2 tokens free: the 2 must go to bin 1 (3, 7 free)
    for name in ("first_fit_decreasing", "best_fit_decreasing", "modified_first_fit_decreasing"):
        assert pack([5, 3, 3, 2], 10, name, max_sequences_per_pack=2) == [[0, 1], [2, 3]]
    # media budget 4: item 0 (3 patches) leaves 1, so items 1 and 2 (2 each) share the next pack
    kwargs = dict(media=[3, 2, 2], media_budget=4)
    for name in NAMES:
        assert pack([1, 1, 1], 10, name, **kwargs) in ([[0], [1, 2]], [[0, 1], [2]], [[0, 2], [1]])
    assert pack([1, 1, 1], 10, "first_fit_decreasing", **kwargs) == [[0], [1, 2]]
    assert pack([1, 1, 1], 10, "first_fit_decreasing", media=[3, 2, 2]) == [[0, 1, 2]]  # no budget


def test_pack_count_multiple() -> None:
    # FFD gives [[0, 1], [2, 3, 4]] (6 tokens each); the 3-item pack splits first, into [3] and [2, 4]
    assert pack([5, 1, 1, 3, 2], 6, "first_fit_decreasing") == [[0, 1], [2, 3, 4]]
    assert pack([5, 1, 1, 3, 2], 6, "first_fit_decreasing", pack_count_multiple=4) == [[0], [1], [2, 4], [3]]
    assert pack([5, 1, 1, 3, 2], 6, "first_fit_decreasing", pack_count_multiple=2) == [[0, 1], [2, 3, 4]]
    # 2 items cannot make 4 packs: returned as is, for the caller to report
    assert pack([6, 6], 6, "first_fit_decreasing", pack_count_multiple=4) == [[0], [1]]


# ---------------------------------------------------------------------------------------------------
# Edge cases and errors
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_edges(name: str) -> None:
    assert pack([], 8, name) == []
    assert pack([], 8, name, pack_count_multiple=4) == []
    assert pack([3], 8, name) == [[0]]
    assert pack([8] * 5, 8, name) == [[i] for i in range(5)]
    ones = pack([1] * 20, 8, name)
    assert len(ones) == 3 and sorted(len(q) for q in ones) == (
        [4, 8, 8] if name != "balanced_greedy_knapsack" else [6, 7, 7]
    )
    assert pack([1] * 20, 8, name, max_sequences_per_pack=1) == [[i] for i in range(20)]


@pytest.mark.parametrize("name", NAMES)
def test_errors(name: str) -> None:
    with pytest.raises(ValueError, match="item 2 costs 10 tokens"):
        pack([3, 4, 9, 1], 8, name, pad_multiple=2)
    with pytest.raises(ValueError, match="item 1 has 5 media patches"):
        pack([3, 4], 8, name, media=[0, 5], media_budget=4)
    with pytest.raises(ValueError, match="item 0 has length 0"):
        pack([0, 4], 8, name)
    with pytest.raises(ValueError, match="media has 1 entries"):
        pack([3, 4], 8, name, media=[0], media_budget=4)
    for bad in (dict(pad_multiple=0), dict(max_sequences_per_pack=0), dict(pack_count_multiple=0)):
        with pytest.raises(ValueError, match="must be >= 1"):
            pack([3], 8, name, **bad)


def test_unknown_algorithm() -> None:
    with pytest.raises(ValueError, match=r"unknown packing algorithm 'bfd'; valid: balanced_greedy_knapsack, "):
        pack([1], 8, "bfd")


def test_shuffle_seed() -> None:
    lengths = list(range(1, 40))
    runs = {str(pack(lengths, 40, "first_fit_shuffle", seed=s)) for s in range(8)}
    assert len(runs) > 1
    assert pack(lengths, 40, "first_fit_shuffle", seed=3) == pack(lengths, 40, "first_fit_shuffle", seed=3)
