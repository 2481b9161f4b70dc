"""Packing: TokenizedSample lengths -> packs (SPEC §7).

``algorithms`` is pure (lengths in, index lists out, ``ALGORITHMS`` table), built on ``placement``
(placement loops), ``structures`` (their trees and pools) and ``problem`` (input validation);
``packer`` applies the truncation policy, runs an algorithm over a window and builds the padded
``Pack`` arrays; ``metrics`` summarizes packs (``PackingStats``).
"""

from cook.packing.algorithms import ALGORITHMS, pack
from cook.packing.metrics import PackingStats, stats_for

__all__ = ["ALGORITHMS", "PackingStats", "pack", "stats_for"]
