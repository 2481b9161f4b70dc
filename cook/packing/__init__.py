"""Packing: TokenizedSample lengths -> packs (SPEC §7).

``algorithms`` is pure (lengths in, index lists out, ``ALGORITHMS`` table); ``packer`` applies the
truncation policy, runs an algorithm over a window and builds the padded ``Pack`` arrays.
"""

from cook.packing.algorithms import ALGORITHMS, pack

__all__ = ["ALGORITHMS", "pack"]
