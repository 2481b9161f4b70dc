"""Source names -> 8-byte digests for the "every record exactly once" check, computed for a whole batch of
sources at once with NumPy (no Python call per source): ``span_digests`` over byte spans of one buffer,
and ``source_digests`` for Python strings (the same digest of the same UTF-8 bytes).

The digest of ``s`` (UTF-8 bytes, ``L`` long, read as little-endian 64-bit words ``w_0 .. w_k``, the
last one zero-filled):

    h = SEED ^ (L * K);  for each word: h = (h ^ w_j) * M;  digest = fmix64(h)

with an odd multiplier ``M`` (each step a bijection of ``h``) and murmur3's ``fmix64`` finalizer, so
different sources of a dataset share a digest only by accident (about 2^-64 a pair for such data):
a duplicate is then reported, never hidden. It is not a cryptographic hash; it only has to tell the
sources of one dataset apart.
"""

from __future__ import annotations

from typing import Final

import numpy as np

SEED: Final = np.uint64(0x9E3779B97F4A7C15)
_LENGTH_MIX: Final = np.uint64(0xC2B2AE3D27D4EB4F)
_WORD_MIX: Final = np.uint64(0x9FB21C651E98DF25)  # odd: multiplying by it is a bijection of 64-bit words
_FMIX_1: Final = np.uint64(0xFF51AFD7ED558CCD)
_FMIX_2: Final = np.uint64(0xC4CEB9FE1A85EC53)
_SHIFT: Final = np.uint64(33)
WORD: Final = 8
SHORT_BYTES: Final = 256  # sources up to this long are digested together


def _fmix(h: np.ndarray) -> np.ndarray:
    for multiplier in (_FMIX_1, _FMIX_2):
        h = (h ^ (h >> _SHIFT)) * multiplier
    out: np.ndarray = h ^ (h >> _SHIFT)
    return out


def span_digests(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """uint64 [S]: the digest of ``data[starts[i] : starts[i] + lengths[i]]`` for each i (``data``: uint8 [B])."""
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    digests = np.empty(lengths.shape[0], dtype=np.uint64)
    if not lengths.size:
        return digests
    padded = np.ascontiguousarray(data) if data.shape[0] >= WORD else np.concatenate([data, np.zeros(WORD, np.uint8)])
    short = lengths <= SHORT_BYTES
    digests[short] = _digest(padded, starts[short], lengths[short])
    for i in np.flatnonzero(~short).tolist():  # a long source on its own: memory stays O(its length)
        digests[i] = _digest(padded, starts[i : i + 1], lengths[i : i + 1])[0]
    return digests


def _digest(padded: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        h = SEED ^ (lengths.astype(np.uint64) * _LENGTH_MIX)  # uint64 [S]
        if not lengths.size:
            return h
        words = -(-int(lengths.max()) // WORD)
        # every byte offset as the start of a little-endian word (unaligned loads, no copy); a word that
        # would run past the end is the last one, shifted down (its missing bytes are past the source)
        at = np.ndarray((padded.shape[0] - WORD + 1,), dtype="<u8", buffer=padded, strides=(1,))
        last = at.shape[0] - 1
        used = -(-lengths // WORD)  # int64 [S]: words of each source
        every = int(used.min())  # words that every source has
        for word in range(words):
            wanted = starts + word * WORD
            places = np.minimum(wanted, last)
            value = at[places].astype(np.uint64)  # uint64 [S]
            if int(wanted.max()) > last:
                value >>= (np.minimum(wanted - places, WORD - 1) * WORD).astype(np.uint64)
            left = lengths - word * WORD  # bytes of the source in this word, when below 8
            if word >= every - 1 and (left < WORD).any():  # a last word: zero-fill past the source's end
                keep = np.clip(left, 0, WORD - 1).astype(np.uint64) * np.uint64(8)
                value = np.where(left >= WORD, value, value & ((np.uint64(1) << keep) - np.uint64(1)))
            mixed = (h ^ value) * _WORD_MIX
            h = mixed if word < every else np.where(word < used, mixed, h)
        return _fmix(h)


def source_digests(sources: list[str] | tuple[str, ...]) -> np.ndarray:
    """uint64 [S]: the digest of each source's UTF-8 bytes (lone surrogates from a JSON escape pass through)."""
    encoded = "".join(sources).encode("utf-8", "surrogatepass")
    if len(encoded) == sum(map(len, sources)):  # ASCII: byte lengths are the string lengths
        lengths = np.fromiter(map(len, sources), dtype=np.int64, count=len(sources))
    else:
        lengths = np.array([len(s.encode("utf-8", "surrogatepass")) for s in sources], dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    return span_digests(np.frombuffer(encoded, np.uint8), starts, lengths)
