"""One cooked pack: the crude Energon sample (member name -> bytes) -> ``PackedSample`` (CPU tensors).

    crude sample {"__key__", "input_ids.npy": bytes, ...} -decode_pack-> PackedSample

Every ``.npy`` member is parsed by ``packfiles.read_npy`` (as ``cook validate`` parses it): the headers
``np.save`` writes are read as a view of the member bytes, anything else goes to ``format.load_npy``
(``allow_pickle=False``: an object array raises instead of being unpickled); each is checked against
``format.MEMBER_DTYPES``; ``meta.json`` is parsed with ``orjson`` and its ``schema_version`` must be one
of ``format.PACK_SCHEMA_VERSIONS`` (1; 2 for a pack with frame members). Stored frames
(``frame.<k>.png|jpg``, ``media.image/video.storage`` png | jpeg; each member's codec is its extension)
are decoded by Pillow on the CPU at their ``media_sizes`` grid (``cook.frames.decode_frame``: no
resize, no draft) into the same ``pixel_patches`` raw storage holds. With ``defer_jpeg`` (the reader's
``decode="cuda"``) the JPEG frames are only checked from their headers (codec, RGB, the grid size) and
kept as bytes (``jpeg_data``, ``jpeg_frames``) for ``cook.reader.device.to_device`` to decode on the GPU.
Nothing else is decoded and nothing is unpickled. A member that is missing, of the wrong dtype or
shape, or inconsistent with the boundaries raises ``PackFormatError`` naming the pack key and the
member (``cook validate`` reports the same defects before a run).

The sample keeps the stored, *target-aligned* form (``target_mask[t] = 1``: token ``t`` is predicted
from earlier tokens of its sequence); ``cook.reader.batch`` derives the label-aligned training form.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from itertools import pairwise
from typing import Any

import numpy as np
import orjson
import torch
from megatron.energon import Sample, edataclass

from cook import format as fmt
from cook.frames import FRAME_ERRORS, check_frame, decode_frame, frame_sizes
from cook.packfiles import read_npy


class PackFormatError(ValueError):
    """A pack that does not follow its schema (SPEC §8; 1, or 2 with frame members): names the pack key and
    the member."""


PackArrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # input_ids, target_mask, cu, cu_padded


@edataclass
class PackedSample(Sample):
    """One pack, as stored, in CPU tensors (an Energon ``Sample``: ``__key__`` is the pack key).

    ``T`` tokens, ``n`` sequences; sequence ``i`` occupies ``[cu_seqlens_padded[i], cu_seqlens_padded[i+1])``,
    of which the first ``cu_seqlens[i+1] - cu_seqlens[i]`` tokens are real and the rest padding.
    """

    input_ids: torch.Tensor  # int64 [T]
    target_mask: torch.Tensor  # bool [T], the stored loss_mask: token t is a target
    cu_seqlens: torch.Tensor  # int32 [n+1], true boundaries
    cu_seqlens_padded: torch.Tensor  # int32 [n+1], padded boundaries, last = T
    pixel_patches: torch.Tensor | None = None  # uint8 [P, 768], C x 16 x 16 per patch
    media_sizes: torch.Tensor | None = None  # int32 [M, 3]: frames, height px, width px
    audio_features: torch.Tensor | None = None  # float16 [C, F, 128]
    audio_lengths: torch.Tensor | None = None  # int32 [C]
    # decode="cuda" only: the JPEG frames left to the device, their member bytes end to end, and per frame
    # (byte offset, byte length, first patch row, height px, width px), rows counted over all the pack's
    # frames. ``pixel_patches`` then holds the other frames' patches, in frame order.
    jpeg_data: torch.Tensor | None = None  # uint8 [B]
    jpeg_frames: torch.Tensor | None = None  # int64 [J, 5]
    sources: tuple[str, ...] = ()  # per sequence, from meta.json
    target_tokens: int = 0  # sum of the per-sequence "targets" in meta.json
    # Set by decode_pack only: NumPy views of the four token/boundary tensors above, so that collating
    # the pack needs no ``Tensor.numpy()`` round trip. Not an init argument, so ``dataclasses.replace``
    # (which may swap a tensor) drops it and collation falls back to the tensors themselves.
    arrays: PackArrays | None = dataclasses.field(default=None, init=False, repr=False, compare=False)

    @property
    def num_tokens(self) -> int:
        return int(self.input_ids.shape[0])


def _array(key: str, members: Mapping[str, Any], name: str) -> np.ndarray | None:
    """Member ``name`` as a read-only array of its schema dtype, or ``None`` when absent."""
    data = members.get(name)
    if data is None:
        return None
    try:
        array = read_npy(data)
    except ValueError as error:  # object arrays (would need pickle) and malformed headers
        raise PackFormatError(f"{key}: member {name!r} is not a plain .npy array ({error})") from error
    dtype, ndim, trailing = fmt.MEMBER_DTYPES[name]
    if array.dtype != dtype or array.ndim != ndim or tuple(array.shape[ndim - len(trailing) :]) != trailing:
        raise PackFormatError(
            f"{key}: member {name!r} is {array.dtype}{list(array.shape)}, expected {dtype} with {ndim} dims"
            f" and trailing dims {list(trailing)}"
        )
    return array


def _tensor(array: np.ndarray | None) -> torch.Tensor | None:
    """A tensor owning its memory (``read_npy`` views are read-only): one copy, C-contiguous."""
    return None if array is None else torch.from_numpy(np.array(array, order="C"))


def _check_boundaries(key: str, tokens: int, cu: np.ndarray, cu_padded: np.ndarray) -> None:
    """Both boundary arrays start at 0, have the same length, the padded one ends at ``tokens``, and every
    sequence has ``0 < length <= padded length``. Plain Python over ``tolist()``: a pack has a few dozen
    sequences at most, where each NumPy reduction would cost more than the whole loop."""
    true, padded = cu.tolist(), cu_padded.tolist()
    if not (
        len(true) == len(padded) >= 2
        and true[0] == 0 == padded[0]
        and padded[-1] == tokens
        and all(0 < b - a <= d - c for (a, b), (c, d) in zip(pairwise(true), pairwise(padded), strict=True))
    ):
        raise PackFormatError(
            f"{key}: {fmt.CU_SEQLENS} {true} and {fmt.CU_SEQLENS_PADDED} {padded} do not describe {tokens} tokens"
        )


_MEDIA_MEMBERS = (*fmt.VISUAL_MEMBERS, *fmt.AUDIO_MEMBERS)
_SAMPLE_KEYS = tuple(field.name for field in dataclasses.fields(Sample))  # what basic_sample_keys forwards


def decode_pack(crude: Mapping[str, Any], defer_jpeg: bool = False) -> PackedSample:
    """Crude Energon sample (member name -> raw bytes) -> ``PackedSample``; raises ``PackFormatError``.
    ``defer_jpeg``: JPEG frames are checked from their headers and kept as bytes for the device."""
    key = str(crude.get("__key__", "?"))
    missing = [name for name in fmt.REQUIRED_MEMBERS if name not in crude]
    if missing:
        raise PackFormatError(f"{key}: missing members {missing}")
    ids = _array(key, crude, fmt.INPUT_IDS)
    mask = _array(key, crude, fmt.LOSS_MASK)
    cu = _array(key, crude, fmt.CU_SEQLENS)
    cu_padded = _array(key, crude, fmt.CU_SEQLENS_PADDED)
    assert ids is not None and mask is not None and cu is not None and cu_padded is not None
    if mask.shape != ids.shape:
        raise PackFormatError(f"{key}: {fmt.LOSS_MASK} has {mask.shape[0]} tokens, {fmt.INPUT_IDS} {ids.shape[0]}")
    _check_boundaries(key, len(ids), cu, cu_padded)
    meta = orjson.loads(bytes(crude[fmt.META]))  # strict UTF-8, like json
    version = meta.get("schema_version")
    if version not in fmt.PACK_SCHEMA_VERSIONS or type(version) is not int:
        raise PackFormatError(
            f"{key}: {fmt.META} schema_version {version!r}: this reader reads packs of schema"
            f" {' and '.join(map(str, fmt.PACK_SCHEMA_VERSIONS))}"
        )
    sequences = meta.get("sequences", [])
    if len(sequences) != len(cu) - 1:
        raise PackFormatError(f"{key}: {fmt.META} lists {len(sequences)} sequences, boundaries {len(cu) - 1}")
    arrays = (ids.astype(np.int64), mask.astype(np.bool_), cu.copy(), cu_padded.copy())  # the only copies; mask != 0
    sample = PackedSample(
        **{name: crude[name] for name in _SAMPLE_KEYS if name in crude},  # = basic_sample_keys(crude)
        input_ids=torch.from_numpy(arrays[0]),
        target_mask=torch.from_numpy(arrays[1]),
        cu_seqlens=torch.from_numpy(arrays[2]),
        cu_seqlens_padded=torch.from_numpy(arrays[3]),
        **(_media(key, crude, defer_jpeg) if any(name in crude for name in _MEDIA_MEMBERS) else {}),
        sources=tuple([str(s.get("source", "")) for s in sequences]),
        target_tokens=sum([int(s.get("targets", 0)) for s in sequences]),
    )
    sample.arrays = arrays
    return sample


def _media(key: str, crude: Mapping[str, Any], defer_jpeg: bool) -> dict[str, torch.Tensor | None]:
    sizes = _array(key, crude, fmt.MEDIA_SIZES)
    frames = _frame_members(key, crude)
    if frames and fmt.PIXEL_PATCHES in crude:
        raise PackFormatError(f"{key}: both {fmt.PIXEL_PATCHES} and frame members")
    if not frames:
        return _plain(key, crude, fmt.PIXEL_PATCHES, fmt.MEDIA_SIZES, *fmt.AUDIO_MEMBERS)
    patches, jpeg_data, jpeg_frames = _decode_frames(key, frames, sizes, defer_jpeg)
    return {
        "pixel_patches": _tensor(patches),
        "media_sizes": _tensor(sizes),
        "jpeg_data": jpeg_data,
        "jpeg_frames": jpeg_frames,
        **_plain(key, crude, *fmt.AUDIO_MEMBERS),
    }


def _plain(key: str, crude: Mapping[str, Any], *names: str) -> dict[str, torch.Tensor | None]:
    """The ``.npy`` members ``names`` as tensors, by field name (``pixel_patches.npy`` -> ``pixel_patches``)."""
    return {name.removesuffix(".npy"): _tensor(_array(key, crude, name)) for name in names}


def _frame_members(key: str, crude: Mapping[str, Any]) -> list[tuple[str, str, Any]]:
    """``[(member name, codec, bytes)]`` of the stored frames, in frame order; the indices must be 0..n-1."""
    found = fmt.frame_names(crude)
    if [index for index, _, _ in found] != list(range(len(found))):
        raise PackFormatError(
            f"{key}: frame members {[name for _, name, _ in found]} are not frame.0 .. frame.{len(found) - 1}"
        )
    return [(name, codec, crude[name]) for _, name, codec in found]


def _decode_frames(
    key: str, frames: list[tuple[str, str, Any]], sizes: np.ndarray | None, defer_jpeg: bool
) -> tuple[np.ndarray | None, torch.Tensor | None, torch.Tensor | None]:
    """``(patches, jpeg_data, jpeg_frames)``: every frame decoded on the CPU at its ``media_sizes`` grid,
    patches in frame order, except (``defer_jpeg``) the JPEG frames, which are checked from their headers
    and kept as bytes (see ``PackedSample.jpeg_frames``)."""
    expected = frame_sizes(sizes) if sizes is not None else []
    if len(expected) != len(frames):
        raise PackFormatError(f"{key}: {len(frames)} frame members, {fmt.MEDIA_SIZES} lists {len(expected)} frames")
    decoded: list[np.ndarray] = []
    deferred = bytearray()  # the JPEG members end to end: jpeg_data, one copy of each member
    rows: list[tuple[int, int, int, int, int]] = []  # jpeg_frames
    row = 0
    for (name, codec, data), (height_px, width_px) in zip(frames, expected, strict=True):
        try:
            if defer_jpeg and codec == "jpeg":
                check_frame(data, codec, height_px, width_px)
                rows.append((len(deferred), len(data), row, height_px, width_px))
                deferred += data
            else:
                decoded.append(decode_frame(data, codec, height_px, width_px))
        except FRAME_ERRORS as error:
            raise PackFormatError(f"{key}: member {name!r} does not decode as declared ({error})") from error
        row += fmt.frame_patches(height_px, width_px)
    if not rows:
        return np.concatenate(decoded), None, None
    data_tensor = torch.frombuffer(deferred, dtype=torch.uint8)
    return (np.concatenate(decoded) if decoded else None), data_tensor, torch.tensor(rows, dtype=torch.int64)
