"""Placeholder: replaced by the packing engine (issue 3). Pure: lengths -> list of index lists."""

from __future__ import annotations

from collections.abc import Sequence


def _padded(length: int, pad_multiple: int) -> int:
    return -(-length // pad_multiple) * pad_multiple


def best_fit_decreasing(
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
    sizes = [_padded(n, pad_multiple) for n in lengths]
    order = sorted(range(len(sizes)), key=lambda i: (-sizes[i], i))
    bins: list[list[int]] = []
    free: list[int] = []
    for i in order:
        best = -1
        for b, room in enumerate(free):
            if room >= sizes[i] and (best < 0 or room < free[best]):
                best = b
        if best < 0:
            bins.append([i])
            free.append(capacity - sizes[i])
        else:
            bins[best].append(i)
            free[best] -= sizes[i]
    return sorted((sorted(b) for b in bins), key=lambda b: b[0])


ALGORITHMS = {"best_fit_decreasing": best_fit_decreasing}


def pack(lengths: Sequence[int], capacity: int, algorithm: str = "best_fit_decreasing", **constraints) -> list[list[int]]:
    return ALGORITHMS[algorithm](lengths, capacity, **constraints)
