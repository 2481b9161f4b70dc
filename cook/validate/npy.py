"""``.npy`` bytes -> array for the validator: a zero-copy view for the canonical headers ``np.save`` writes,
``format.load_npy`` (``allow_pickle=False``) for everything else.

The fast path accepts only a version-1.0 header of exactly the form ``np.save`` writes for a C-order
array of a non-object dtype, e.g. ``{'descr': '<i4', 'fortran_order': False, 'shape': (8192,), }``, and a
payload of exactly ``prod(shape) * itemsize`` bytes; it returns ``np.frombuffer`` over the member's own
bytes (read-only, no copy, nothing unpickled). Any other header goes to ``format.load_npy``, so nothing
is ever accepted here that ``np.load(allow_pickle=False)`` (what the reader uses) would refuse; a
canonical header with bytes after its payload, which ``np.load`` silently ignores, is refused.
"""

from __future__ import annotations

import math
import re
from typing import Final

import numpy as np

from cook import format as fmt

_MAGIC_V1: Final = b"\x93NUMPY\x01\x00"
CANONICAL_1D_HEADER: Final = 128  # np.save's header (prefix, dict, padding, newline) of a 1-D array
_HEADER: Final = re.compile(rb"\{'descr': '([<>|][a-zA-Z]\d+)', 'fortran_order': False, 'shape': \(([\d, ]*)\), \} *\n")


def read_npy(data: bytes | memoryview) -> np.ndarray:
    """Parse one ``.npy`` member; raises ``ValueError`` (pickled, malformed or trailing bytes) like load_npy."""
    view = memoryview(data)
    if view[:8].tobytes() == _MAGIC_V1 and len(view) >= 10:
        header_len = int.from_bytes(view[8:10], "little")
        parsed = canonical_header(bytes(view[10 : 10 + header_len]))
        if parsed is not None:
            array = _view(view, *parsed, 10 + header_len)
            if array is not None:
                return array
    return fmt.load_npy(bytes(view))


def canonical_header(text: bytes) -> tuple[np.dtype, tuple[int, ...]] | None:
    """The dtype and shape of a version-1.0 header dict in ``np.save``'s own form (the bytes after the
    10-byte prefix, padding and newline included); None for any other header or an object dtype."""
    match = _HEADER.fullmatch(text)
    if match is None:
        return None
    try:
        dtype = np.dtype(match.group(1).decode("ascii"))
        shape = tuple(int(part) for part in match.group(2).split(b",") if part.strip())
    except (TypeError, ValueError):
        return None
    return None if dtype.hasobject else (dtype, shape)  # load_npy refuses an object dtype (pickle)


def _view(view: memoryview, dtype: np.dtype, shape: tuple[int, ...], offset: int) -> np.ndarray | None:
    size = math.prod(shape) * dtype.itemsize
    if len(view) - offset > size:
        raise ValueError(f"{len(view) - offset - size} bytes after the array data")
    if len(view) - offset < size:
        return None  # load_npy reports the short payload
    return np.frombuffer(view, dtype=dtype, count=math.prod(shape), offset=offset).reshape(shape)
