"""Pack boundaries (SPEC §8, §9): ``cu_seqlens*`` start at 0, strictly increase and agree with ``T``.

Promised after a pack passes ``check_boundaries`` without a ``cu_seqlens`` finding: both arrays start
at 0 and strictly increase, ``cu_seqlens_padded[-1] == T``, and every padded length is at least its
true length, so ``padding_positions`` and per-sequence slicing are safe. Also checked (without
blocking later checks): meta.json lengths, padding to ``packing.pad_multiple`` and ``T <= seq_len``.

Example (pad_multiple 8): true lengths 5 and 9 -> ``cu_seqlens = [0, 5, 14]``,
``cu_seqlens_padded = [0, 8, 24]``, ``T = 24``; tokens 5..7 and 17..23 are padding.
"""

from __future__ import annotations

import numpy as np

from cook import format as fmt
from cook.types import Pack
from cook.validate.problems import Code, Finding, PackRules


def check_boundaries(pack: Pack, rules: PackRules) -> list[Finding]:
    """``cu_seqlens`` findings (which block the per-sequence checks) first, then the others."""
    cu = pack.cu_seqlens.astype(np.int64)  # int64 [n+1]
    padded_cu = pack.cu_seqlens_padded.astype(np.int64)  # int64 [n+1]
    tokens = pack.input_ids.shape[0]
    findings: list[Finding] = []
    for name, bounds in ((fmt.CU_SEQLENS, cu), (fmt.CU_SEQLENS_PADDED, padded_cu)):
        if bounds[0] != 0:
            findings.append((Code.CU_SEQLENS, f"{name} starts at {bounds[0]}, not 0"))
        steps = np.diff(bounds)
        if (steps <= 0).any():
            i = int(np.flatnonzero(steps <= 0)[0])
            findings.append(
                (Code.CU_SEQLENS, f"{name} does not strictly increase: [{i}]={bounds[i]}, [{i + 1}]={bounds[i + 1]}")
            )
    if padded_cu[-1] != tokens:
        findings.append((Code.CU_SEQLENS, f"{fmt.CU_SEQLENS_PADDED} ends at {padded_cu[-1]}, input_ids has {tokens}"))
    if findings:
        return findings
    lengths, padded = np.diff(cu), np.diff(padded_cu)  # int64 [n]
    short = np.flatnonzero(padded < lengths)
    if short.size:
        i = int(short[0])
        return [(Code.CU_SEQLENS, f"sequence {i}: padded length {padded[i]} < true length {lengths[i]}")]
    return _meta_lengths(pack, lengths) + _padding(padded, lengths, tokens, rules)


def _meta_lengths(pack: Pack, lengths: np.ndarray) -> list[Finding]:
    meta = np.array([s.length for s in pack.sequences], dtype=np.int64)
    wrong = np.flatnonzero(meta != lengths)
    if not wrong.size:
        return []
    i = int(wrong[0])
    return [
        (
            Code.META_LENGTH,
            f"{fmt.META} sequences[{i}] ({pack.sequences[i].source}) has length {meta[i]}, "
            f"{fmt.CU_SEQLENS} says {lengths[i]} ({wrong.size} sequences disagree)",
        )
    ]


def _padding(padded: np.ndarray, lengths: np.ndarray, tokens: int, rules: PackRules) -> list[Finding]:
    findings: list[Finding] = []
    multiple = rules.pad_multiple
    if multiple:
        expected = -(-lengths // multiple) * multiple
        wrong = np.flatnonzero(padded != expected)
        if wrong.size:
            i = int(wrong[0])
            findings.append(
                (
                    Code.PAD_MULTIPLE,
                    f"sequence {i}: padded length {padded[i]} for {lengths[i]} tokens, "
                    f"expected {expected[i]} (packing.pad_multiple={multiple})",
                )
            )
    if rules.seq_len is not None and tokens > rules.seq_len:
        findings.append((Code.PACK_LENGTH, f"{fmt.INPUT_IDS} holds {tokens} tokens > packing.seq_len={rules.seq_len}"))
    return findings


def boundaries_usable(findings: list[Finding]) -> bool:
    """True when the per-sequence checks may slice the pack by its boundaries."""
    return not any(code == Code.CU_SEQLENS for code, _ in findings)


def padding_positions(pack: Pack) -> np.ndarray:
    """bool [T]: True at each padding token. Only for packs whose boundaries are usable."""
    lengths = np.diff(pack.cu_seqlens.astype(np.int64))
    pads = np.diff(pack.cu_seqlens_padded.astype(np.int64)) - lengths
    runs = np.stack([lengths, pads], axis=1).reshape(-1)  # int64 [2n]: true, pad, true, pad, ...
    flags = np.tile(np.array([False, True]), lengths.shape[0])
    return np.repeat(flags, runs)
