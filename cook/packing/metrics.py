"""Packing statistics: packs (index lists over sequence lengths) -> ``PackingStats``.

``PackingStats`` is a frozen, mergeable summary: ``stats_for`` computes it for a list of packs in one
numpy pass, ``merge`` combines the stats of two windows or workers,
and ``to_dict`` gives plain JSON types for the manifest and ``cook stats``.

Every pack is charged its full ``capacity`` (``seq_len``): a pack stores its padded use, and
``tail_padding`` is what padding it to ``capacity`` would add, so

    packs * capacity == tokens + pad_multiple_padding + tail_padding

``efficiency`` is the packing efficiency of ``cook.dataset_stats.packing_efficiency`` (docs/DESIGN.md).
Worked example, capacity 12, pad_multiple 4, lengths [5, 2, 8], packs [[0, 1], [2]]::

    padded lengths 8, 4 | 8      pad_multiple_padding = 3 + 2 + 0 = 5
    padded use 12 | 8            tail_padding = 0 + 4 = 4
    tokens = 15                  efficiency = 15 / (2 * 12) = 0.625
    fill (raw tokens / capacity) 7/12 -> 50-60% bin, 8/12 -> 60-70% bin
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from itertools import chain
from typing import Any

import numpy as np

from cook import format as fmt
from cook.dataset_stats import packing_efficiency

__all__ = ["FILL_BINS", "PackingStats", "stats_for"]

FILL_BINS = 10  # fill histogram: [0, 10%), [10%, 20%), ..., [90%, 100%]
JsonValue = int | float | dict[str, int]


@dataclass(frozen=True)
class PackingStats:
    """Totals over packs of one ``capacity`` and ``pad_multiple``.

    ``sequences_per_pack`` holds sorted (sequences in a pack, number of such packs) pairs: how many
    source samples share a pack. ``fill_histogram[b]`` counts packs whose raw tokens fill
    [10b%, 10(b+1)%) of capacity; a completely full pack lands in the last bin.
    """

    capacity: int
    pad_multiple: int = 1
    packs: int = 0
    sequences: int = 0
    tokens: int = 0  # raw, unpadded
    pad_multiple_padding: int = 0  # added by rounding each sequence up to pad_multiple
    tail_padding: int = 0  # capacity minus padded use, summed over packs
    sequences_per_pack: tuple[tuple[int, int], ...] = ()
    fill_histogram: tuple[int, ...] = (0,) * FILL_BINS

    @property
    def efficiency(self) -> float:
        """Packing efficiency: raw tokens / (packs * capacity); 0.0 when there are no packs."""
        return packing_efficiency(self.tokens, self.packs, self.capacity)

    def merge(self, other: PackingStats) -> PackingStats:
        if (other.capacity, other.pad_multiple) != (self.capacity, self.pad_multiple):
            raise ValueError(
                f"cannot merge packing stats for capacity/pad_multiple {other.capacity}/{other.pad_multiple} "
                f"into {self.capacity}/{self.pad_multiple}"
            )
        per_pack = dict(self.sequences_per_pack)  # every count positive (np.unique in stats_for_flat)
        for sequences, packs in other.sequences_per_pack:
            per_pack[sequences] = per_pack.get(sequences, 0) + packs
        return replace(
            self,
            packs=self.packs + other.packs,
            sequences=self.sequences + other.sequences,
            tokens=self.tokens + other.tokens,
            pad_multiple_padding=self.pad_multiple_padding + other.pad_multiple_padding,
            tail_padding=self.tail_padding + other.tail_padding,
            sequences_per_pack=tuple(sorted(per_pack.items())),
            fill_histogram=tuple(a + b for a, b in zip(self.fill_histogram, other.fill_histogram, strict=True)),
        )

    @classmethod
    def from_fields(cls, fields: dict[str, Any]) -> PackingStats:
        """The stats from ``dataclasses.asdict(stats)`` as JSON reads it back (lists for tuples)."""
        return cls(
            **{
                **fields,
                "sequences_per_pack": tuple(tuple(pair) for pair in fields["sequences_per_pack"]),
                "fill_histogram": tuple(fields["fill_histogram"]),
            }
        )

    def to_dict(self) -> dict[str, JsonValue]:
        """Plain JSON types; histogram keys are strings (``"3"``, ``"90-100%"``)."""
        step = 100 // FILL_BINS
        return {
            **asdict(self),
            "efficiency": self.efficiency,
            "sequences_per_pack": {str(k): v for k, v in self.sequences_per_pack},
            "fill_histogram": {f"{b * step}-{(b + 1) * step}%": n for b, n in enumerate(self.fill_histogram)},
        }


def stats_for(
    lengths: Sequence[int], packs: Sequence[Sequence[int]], capacity: int, pad_multiple: int = 1
) -> PackingStats:
    """Stats of ``packs`` (index lists into ``lengths``, raw token lengths). Raises ValueError for an
    empty pack or one whose padded lengths exceed ``capacity``: stats never paper over a packing bug."""
    sizes = np.array([len(q) for q in packs], dtype=np.int64)  # int64 [P]
    order = np.fromiter(chain.from_iterable(packs), dtype=np.int64, count=int(sizes.sum()))
    return stats_for_flat(lengths, order, np.concatenate([[0], np.cumsum(sizes)]), capacity, pad_multiple)


def stats_for_flat(
    lengths: Sequence[int] | np.ndarray, order: np.ndarray, bounds: np.ndarray, capacity: int, pad_multiple: int = 1
) -> PackingStats:
    """``stats_for`` over packs given as ``order`` (int64 [N]) and ``bounds`` (int64 [P + 1])."""
    if capacity < 1 or pad_multiple < 1:
        raise ValueError(f"capacity and pad_multiple must be >= 1, got {capacity}, {pad_multiple}")
    sizes = np.diff(bounds).astype(np.int64)  # int64 [P]
    if not len(sizes):
        return PackingStats(capacity, pad_multiple)
    if sizes.min() == 0:
        raise ValueError(f"pack {int(np.argmin(sizes))} is empty")
    raw = np.asarray(lengths, dtype=np.int64)[order]  # int64 [N]
    padded = fmt.padded_lengths(raw, pad_multiple)
    starts = bounds[:-1]
    raw_per_pack = np.add.reduceat(raw, starts)  # int64 [P]
    used_per_pack = np.add.reduceat(padded, starts)
    over = np.flatnonzero(used_per_pack > capacity)
    if len(over):
        j = int(over[0])
        raise ValueError(f"pack {j} uses {used_per_pack[j]} padded tokens > capacity {capacity}")
    fill = np.minimum(FILL_BINS * raw_per_pack // capacity, FILL_BINS - 1)
    counts, n_packs = np.unique(sizes, return_counts=True)
    return PackingStats(
        capacity=capacity,
        pad_multiple=pad_multiple,
        packs=len(sizes),
        sequences=len(raw),
        tokens=int(raw.sum()),
        pad_multiple_padding=int((padded - raw).sum()),
        tail_padding=int((capacity - used_per_pack).sum()),
        sequences_per_pack=tuple(zip(counts.tolist(), n_packs.tolist(), strict=True)),
        fill_histogram=tuple(np.bincount(fill, minlength=FILL_BINS).tolist()),
    )
