"""Pack -> the ordered tar members of one Energon sample (SPEC §8), as zero-copy pieces.

With stored frames (``media.image.storage`` / ``media.video.storage`` png | jpeg, ``FrameStorage``)
the pack's patches are not written as ``pixel_patches.npy``: each visual frame (``media_sizes`` row
``(frames, H, W)`` gives ``frames`` of them) is member ``frame.<k>.png|jpg`` in its medium's codec
(``cook.frames``), and the pack's meta.json says ``format.FRAME_SCHEMA_VERSION``; a pack without frame
members stays schema 1. The worker that cooks a sample encodes its frames before staging it
(``encode_item_frames``: the stage holds ~1/8 of the patches' bytes), so the packs come with their
frames stored; a pack that comes with patches (``cook repack`` of raw patches) is encoded here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import orjson

from cook import format as fmt
from cook.contract import RAW_STORAGE, FrameStorage
from cook.frames import encode_frame, frame_sizes, frame_storages
from cook.types import MediaItem, Pack


def meta_json(pack: Pack, frames: bool = False) -> bytes:
    """The pack's meta.json; ``frames``: the pack holds frame members (schema 2, else 1). Compact UTF-8
    JSON with sorted keys: the bytes of ``json.dumps(body, sort_keys=True, ensure_ascii=False,
    separators=(",", ":"))`` (a property test holds them equal), made by orjson, which the validator
    reads them with."""
    version = fmt.FRAME_SCHEMA_VERSION if frames else fmt.SCHEMA_VERSION
    body = dict(zip(fmt.META_BODY_KEYS, (version, [s.to_meta() for s in pack.sequences]), strict=True))
    return orjson.dumps(body, option=orjson.OPT_SORT_KEYS)


_HEADERS: dict[tuple[np.dtype, tuple[int, ...]], bytes] = {}  # (dtype, shape) -> its npy header
HEADER_CACHE_ENTRIES = 1024  # packs share input_ids/loss_mask shapes; cu_seqlens lengths vary a little


def _header(data: np.ndarray) -> bytes:
    """``fmt.npy_header`` of a C-contiguous array, cached by dtype and shape (all the header depends on)."""
    key = (data.dtype, data.shape)
    header = _HEADERS.get(key)
    if header is None:
        header = fmt.npy_header(data)
        if len(_HEADERS) < HEADER_CACHE_ENTRIES:
            _HEADERS[key] = header
    return header


def _array_pieces(array: np.ndarray, dtype: np.dtype) -> tuple[memoryview, memoryview]:
    """One array member as ``(npy header, the data's bytes)``; the data is a view, never a copy made here.

    ``np.ascontiguousarray`` returns ``array`` itself when it is already C-contiguous in ``dtype``;
    otherwise it makes the one converted copy the member needs.
    """
    data = np.ascontiguousarray(array, dtype=dtype)  # dtype [shape of array], C order
    return memoryview(_header(data)), data.reshape(-1).view(np.uint8).data  # uint8 [nbytes], a view


def member_pieces(
    pack: Pack, storage: FrameStorage = RAW_STORAGE, video_storage: FrameStorage | None = None
) -> list[tuple[str, tuple[memoryview, ...]]]:
    """``[(member name, its bytes in pieces)]`` in ``format.MEMBERS`` order; optional members only when present.
    With stored frames the ``frame.<k>`` members stand where ``pixel_patches.npy`` would: images' and tiles'
    in ``storage``, video frames' in ``video_storage`` (None: ``storage``). Both are raw, or neither.

    Joined, each member's pieces are its ``.npy`` (or ``meta.json``) bytes. An array member is two
    pieces, its header and a uint8 view of the pack's own buffer (when it already has the member
    dtype and C order), so the shard writer hands the array's memory to the kernel without a copy.
    """
    video = storage if video_storage is None else video_storage
    if storage.stores_frames != video.stores_frames:
        raise ValueError(f"frames stored as {storage.codec} and {video.codec}: raw cannot be mixed with png/jpeg")
    frames = _frame_members(pack, storage, video) if storage.stores_frames else []
    out: list[tuple[str, tuple[memoryview, ...]]] = []
    for name in fmt.MEMBERS:
        if name == fmt.META:
            out.append((name, (memoryview(meta_json(pack, bool(frames))),)))
            continue
        array = getattr(pack, name.removesuffix(".npy"))  # every array member is named after its Pack field
        if name == fmt.PIXEL_PATCHES and storage.stores_frames:
            out += frames
        elif array is not None:
            out.append((name, _array_pieces(array, fmt.MEMBER_DTYPES[name][0])))
        elif name == fmt.PIXEL_PATCHES and pack.pixel_patch_parts:
            out.append((name, _parts_pieces(pack.pixel_patch_parts)))
    return out


def _parts_pieces(parts: tuple[np.ndarray, ...]) -> tuple[memoryview, ...]:
    """The ``pixel_patches`` member from its pieces: one header for the whole ``[sum P_i, 768]``
    array (what ``np.save`` writes for their concatenation), then each piece's own bytes."""
    rows = sum(int(part.shape[0]) for part in parts)
    dtype = fmt.MEMBER_DTYPES[fmt.PIXEL_PATCHES][0]
    shape_only = np.broadcast_to(np.zeros((1, fmt.PATCH_VALUES), dtype), (rows, fmt.PATCH_VALUES))
    views = [np.ascontiguousarray(part, dtype=dtype).reshape(-1).view(np.uint8).data for part in parts]
    return (memoryview(fmt.npy_header(shape_only)), *views)


def _frame_members(pack: Pack, image: FrameStorage, video: FrameStorage) -> list[tuple[str, tuple[memoryview, ...]]]:
    """One encoded member per visual frame, in placeholder order (none for a pack without visual media)."""
    if pack.media_sizes is None:
        return []
    kinds = [kind for sequence in pack.sequences for kind in sequence.media]
    storages = frame_storages(pack.media_sizes, kinds, image, video)
    if pack.stored_frames:  # encoded by the cooking worker, or moved as stored (cook repack)
        frames: Sequence[bytes | memoryview] = pack.stored_frames
    else:
        patches = pack.pixel_patches if pack.pixel_patches is not None else np.concatenate(pack.pixel_patch_parts)
        frames = _encode_frames(patches, pack.media_sizes, storages)
    return [
        (fmt.frame_member(index, storage.codec), (memoryview(data),))
        for index, (storage, data) in enumerate(zip(storages, frames, strict=True))
    ]


def _encode_frames(patches: np.ndarray, media_sizes: np.ndarray, storages: Sequence[FrameStorage]) -> list[bytes]:
    """Each visual frame of ``patches`` (uint8 [P, 768], the rows of ``media_sizes``' frames one after
    another) encoded in its storage, in placeholder order."""
    out, first = [], 0
    for (height_px, width_px), storage in zip(frame_sizes(media_sizes), storages, strict=True):
        count = fmt.frame_patches(height_px, width_px)
        out.append(encode_frame(patches[first : first + count], height_px, width_px, storage))
        first += count
    return out


def encode_item_frames(item: MediaItem, image: FrameStorage, video: FrameStorage) -> MediaItem:
    """``item`` with its frames encoded as a pack stores them (``stored_frames``; its patches dropped), the
    bytes ``_frame_members`` encodes from its patches, in its medium's storage (``frame_storages``). A cook
    worker encodes each item so before staging it (a stored frame is ~1/8 of its patches' bytes). An item
    without patches (audio; frames already stored), or in raw storage, is returned as it is."""
    if item.patches is None or item.size is None or not image.stores_frames:
        return item
    sizes = np.array([item.size], np.int32)  # int32 [1, 3]: (frames, H, W)
    storages = frame_storages(sizes, [item.visual_kind or item.kind], image, video)
    return replace(item, patches=None, stored_frames=tuple(_encode_frames(item.patches, sizes, storages)))


def pack_members(
    pack: Pack, storage: FrameStorage = RAW_STORAGE, video_storage: FrameStorage | None = None
) -> list[tuple[str, bytes]]:
    """``[(member name, bytes)]``: ``member_pieces`` joined, the exact bytes of each member in a shard."""
    return [(name, b"".join(pieces)) for name, pieces in member_pieces(pack, storage, video_storage)]
