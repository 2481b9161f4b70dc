"""The 1-D ``.npy`` members of one kind in many packs -> (data offsets, lengths), for the fast path
(``bulk``); ``Irregular`` at any doubt.

``np.save``'s header of a 1-D array is 128 bytes and depends only on the dtype and the length, so most
are parsed once (a cache keyed by the header's bytes); any other header ``canonical_header`` accepts is
parsed member by member. A member whose pack holds a companion of the same length (loss_mask and
input_ids, cu_seqlens_padded and cu_seqlens) is checked at once for the whole batch: its header must be
the companion's canonical header byte for byte, but for the dtype's three characters.
"""

from __future__ import annotations

import mmap
from typing import Final

import numpy as np

from cook.validate.meta_columns import Irregular
from cook.validate.npy import CANONICAL_1D_HEADER, canonical_header
from cook.validate.tar_layout import BLOCK, blocks

_NPY_MAGIC: Final = b"\x93NUMPY\x01\x00"
_CANONICAL_LENGTH: Final = (CANONICAL_1D_HEADER - 10).to_bytes(2, "little")
_HEADER_CACHE_LIMIT: Final = 4096
_DESCR: Final = slice(21, 24)  # "<i4" in b"\x93NUMPY\x01\x00v\x00{'descr': '<i4', ..."
_headers: dict[bytes, tuple[str, int]] = {}  # a canonical 128-byte .npy header -> (dtype str, length)

Members = tuple[list[int], list[int]]  # each member's data offset and length


def array_members(data: mmap.mmap, at: np.ndarray, size: np.ndarray, dtype: str) -> Members:
    """The members of ``dtype`` whose contents start at ``at`` (int64 [K]) and are ``size`` bytes long."""
    lengths = _canonical_lengths(data, at.tolist(), dtype)
    if lengths is None:
        return _npy_1d(data, at.tolist(), size.tolist(), dtype)
    if (size - CANONICAL_1D_HEADER != np.array(lengths, dtype=np.int64) * np.dtype(dtype).itemsize).any():
        raise Irregular  # data shorter or longer than the header says
    return (at + CANONICAL_1D_HEADER).tolist(), lengths


def members_like(
    data: mmap.mmap,
    at: np.ndarray,
    size: np.ndarray,
    dtype: str,
    like_at: np.ndarray,
    like: list[int],
    lengths: list[int],
) -> Members:
    """``array_members``, at once when each member's header is its companion's (contents at ``like_at``,
    data at ``like``, ``lengths`` items) with ``dtype`` in place of the companion's dtype."""
    canonical = like == (like_at + CANONICAL_1D_HEADER).tolist()
    code = np.dtype(dtype).str.encode()
    if canonical and not (at % BLOCK).any() and not (like_at % BLOCK).any() and len(code) == _DESCR.stop - _DESCR.start:
        rows = blocks(data)  # uint8 [B, 512]: a member's contents start at a block
        expected = rows[like_at // BLOCK, :CANONICAL_1D_HEADER]  # uint8 [K, 128], a copy
        expected[:, _DESCR] = np.frombuffer(code, np.uint8)
        same = (rows[at // BLOCK, :CANONICAL_1D_HEADER] == expected).all()
        if same and (size - CANONICAL_1D_HEADER == np.array(lengths, dtype=np.int64) * np.dtype(dtype).itemsize).all():
            return (at + CANONICAL_1D_HEADER).tolist(), lengths
    return array_members(data, at, size, dtype)


def _canonical_lengths(data: mmap.mmap, offsets: list[int], dtype: str) -> list[int] | None:
    """Lengths of 1-D members of ``dtype`` whose headers are ``np.save``'s 128 bytes; None if one is not."""
    lengths = []
    for offset in offsets:
        header = data[offset : offset + CANONICAL_1D_HEADER]
        parsed = _headers.get(header)
        if parsed is None:
            found = canonical_header(header[10:]) if header[8:10] == _CANONICAL_LENGTH else None
            if found is None or len(found[1]) != 1 or not header.startswith(_NPY_MAGIC):
                return None
            if len(_headers) >= _HEADER_CACHE_LIMIT:
                _headers.clear()
            parsed = _headers[header] = (found[0].str, found[1][0])
        if parsed[0] != dtype:
            return None
        lengths.append(parsed[1])
    return lengths


def _npy_1d(data: mmap.mmap, offsets: list[int], sizes: list[int], dtype: str) -> tuple[list[int], list[int]]:
    """(data offsets, lengths) of 1-D ``.npy`` members of ``dtype`` with any header ``canonical_header`` accepts."""
    starts, lengths = [], []
    for offset, size in zip(offsets, sizes, strict=True):
        prefix = data[offset : offset + 10]
        if len(prefix) < 10 or prefix[:8] != _NPY_MAGIC:
            raise Irregular
        total = 10 + prefix[8] + (prefix[9] << 8)
        parsed = canonical_header(data[offset + 10 : offset + total])
        if parsed is None or len(parsed[1]) != 1 or parsed[0].str != dtype:
            raise Irregular
        if size - total != parsed[1][0] * parsed[0].itemsize:
            raise Irregular
        starts.append(offset + total)
        lengths.append(parsed[1][0])
    return starts, lengths
