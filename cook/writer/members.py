"""Pack -> the ordered tar members of one Energon sample (schema v1, SPEC §8)."""

from __future__ import annotations

import json

from cook import format as fmt
from cook.types import Pack


def meta_json(pack: Pack) -> bytes:
    sequences = [
        {
            "source": s.source,
            "length": s.length,
            "targets": s.targets,
            "media": list(s.media),
            **({"truncated": True} if s.truncated else {}),
        }
        for s in pack.sequences
    ]
    body = {"schema_version": fmt.SCHEMA_VERSION, "sequences": sequences}
    return json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def pack_members(pack: Pack) -> list[tuple[str, bytes]]:
    """``[(member name, bytes)]`` in ``format.MEMBERS`` order; optional members only when present."""
    arrays = {
        fmt.INPUT_IDS: pack.input_ids,
        fmt.LOSS_MASK: pack.loss_mask,
        fmt.CU_SEQLENS: pack.cu_seqlens,
        fmt.CU_SEQLENS_PADDED: pack.cu_seqlens_padded,
        fmt.PIXEL_PATCHES: pack.pixel_patches,
        fmt.MEDIA_SIZES: pack.media_sizes,
        fmt.AUDIO_FEATURES: pack.audio_features,
        fmt.AUDIO_LENGTHS: pack.audio_lengths,
    }
    out: list[tuple[str, bytes]] = []
    for name in fmt.MEMBERS:
        if name == fmt.META:
            out.append((name, meta_json(pack)))
            continue
        array = arrays[name]
        if array is not None:
            dtype = fmt.MEMBER_DTYPES[name][0]
            out.append((name, fmt.npy_bytes(array.astype(dtype, copy=False))))
    return out
