"""Checks over many spans of one byte buffer at once, eight bytes at a time: a fixed literal at many offsets,
and many short decimal numbers (``meta_columns`` reads meta.json with them).

``words(text)`` views the buffer as the little-endian 8-byte word starting at every offset (no copy), so
the bytes ``text[at : at + 8]`` of every offset ``at`` come out in one gather. A decimal number of up to
8 digits is the word that ends with it, the bytes before it set to "0": each byte's nibbles say whether
it is a digit (no carry crosses a byte), and three multiply-adds combine the digits pairwise::

    b"0000" b"2025" -> digits 0 0 0 0 2 0 2 5 -> 00 00 20 25 -> 0000 2025 -> 2025
"""

from __future__ import annotations

import functools
from typing import Final

import numpy as np

WORD: Final = 8
_ONES: Final = np.uint64(0x0101010101010101)
_ZEROS: Final = _ONES * np.uint64(ord("0"))  # eight "0"
_FULL: Final = np.uint64(0xFFFFFFFFFFFFFFFF)
_HIGH_NIBBLES: Final = _ONES * np.uint64(0xF0)
_LOW_NIBBLES: Final = _ONES * np.uint64(0x0F)
_SIX: Final = _ONES * np.uint64(6)  # a low nibble above 9 plus 6 reaches the high nibble
_PAIRS: Final = (  # (multiplier, shift, mask): digits -> pairs -> quads -> the number
    (np.uint64(10), np.uint64(8), np.uint64(0x00FF00FF00FF00FF)),
    (np.uint64(100), np.uint64(16), np.uint64(0x0000FFFF0000FFFF)),
    (np.uint64(10000), np.uint64(32), np.uint64(0x00000000FFFFFFFF)),
)


def words(text: np.ndarray) -> np.ndarray:
    """uint64 [B - 7]: the little-endian word of ``text[i : i + 8]`` for every i (``text``: uint8 [B], a view)."""
    return np.ndarray((text.shape[0] - WORD + 1,), dtype="<u8", buffer=text, strides=(1,))


@functools.cache
def _pattern(literal: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, words) covering ``literal`` of WORD bytes or more: a word every WORD bytes, the last one flush."""
    offsets = np.array([*range(0, len(literal) - WORD, WORD), len(literal) - WORD], dtype=np.int64)
    return offsets, np.frombuffer(b"".join(literal[o : o + WORD] for o in offsets.tolist()), dtype="<u8")


def literal_at(every: np.ndarray, at: np.ndarray, literal: bytes) -> bool:
    """Whether ``literal`` starts at each offset ``at`` (``every``: ``words`` of the buffer; reads stay in it)."""
    if len(literal) < WORD:  # the word that ends with the literal, shifted down to it
        tail = np.uint64(int.from_bytes(literal, "little"))
        shift = np.uint64(8 * (WORD - len(literal)))
        return bool(((every[at + (len(literal) - WORD)] >> shift) == tail).all())
    offsets, expected = _pattern(literal)
    return bool((every[at[:, None] + offsets] == expected).all())


def literals_at(every: np.ndarray, checks: list[tuple[np.ndarray, bytes]]) -> bool:
    """``literal_at`` of several literals of WORD bytes or more, each at its own offsets (arrays of one
    length), with one gather."""
    places = np.concatenate([at[:, None] + _pattern(literal)[0] for at, literal in checks], axis=1)
    expected = np.concatenate([_pattern(literal)[1] for _, literal in checks])
    return bool((every[places] == expected).all())


def decimals(every: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray | None:
    """int64 [S]: the numbers written in ``text[starts:ends]`` (``every``: ``words(text)``, ``ends`` >= 8);
    None unless each is 1 to 8 digits, the first not "0"."""
    widths = ends - starts
    if not widths.shape[0]:
        return np.zeros(0, dtype=np.int64)
    if int(widths.min()) < 1 or int(widths.max()) > WORD:
        return None
    keep = _FULL << ((WORD - widths) * 8).astype(np.uint64)  # uint64 [S]: the number's bytes
    word = (every[ends - WORD] & keep) | (_ZEROS & ~keep)  # uint64 [S]: "0"s, then the number
    if ((word & _HIGH_NIBBLES) != _ZEROS).any() or (((word & _LOW_NIBBLES) + _SIX) & _HIGH_NIBBLES).any():
        return None  # a byte that is not a digit
    first = (word >> ((WORD - widths) * 8).astype(np.uint64)) & np.uint64(0xFF)
    if (first == np.uint64(ord("0"))).any():
        return None  # a leading zero
    value = word - _ZEROS  # each byte its digit, the first digit lowest
    for multiplier, shift, mask in _PAIRS:
        value = (value * multiplier + (value >> shift)) & mask
    numbers: np.ndarray = value.astype(np.int64)
    return numbers
