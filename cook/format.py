"""The on-disk format of a cooked dataset: the single source of truth (SPEC §6, §8).

Writer, validator and reader import these names; none of them redefines a constant. Any change here
is a format change: bump ``SCHEMA_VERSION`` and record it in CHANGELOG.md.

A cooked dataset directory holds::

    shard-000000.tar  shard-000000.tar.idx  ...     packs, one Energon sample each
    .nv-meta/dataset.yaml split.yaml .info.json index.sqlite index.uuid
    cook_manifest.json  rejects.jsonl

Each pack (tar sample key ``pack-000000042``) holds the members of ``MEMBERS`` below.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

import numpy as np

SCHEMA_VERSION: Final = 1  # a pack's meta.json: 1 = every member an array (.npy) or meta.json
# 2 = the pack also holds stored frames (``frame.<k>.png|jpg``), which a reader of 1 would not find
# patches in; raw packs stay 1, so raw shards are byte-identical to before stored frames
FRAME_SCHEMA_VERSION: Final = 2
PACK_SCHEMA_VERSIONS: Final = (SCHEMA_VERSION, FRAME_SCHEMA_VERSION)  # what this reader and validate accept
SUBFLAVOR: Final = {"cook": "packed_v1"}

# ---------------------------------------------------------------- names in the output directory
MANIFEST_NAME: Final = "cook_manifest.json"
REJECTS_NAME: Final = "rejects.jsonl"
RUN_RECORD_NAME: Final = ".cook-run.json"  # what a finished run was made of (pipeline, inputs): a rerun is a no-op
NV_META_DIR: Final = ".nv-meta"
DATASET_YAML: Final = "dataset.yaml"
SPLIT_YAML: Final = "split.yaml"
INFO_JSON: Final = ".info.json"
INDEX_SQLITE: Final = "index.sqlite"  # Energon's sample index
INDEX_UUID: Final = "index.uuid"  # Energon's dataset identity (cache key)
INDEX_SUFFIX: Final = ".idx"  # beside each shard: shard-000000.tar.idx
LOCK_NAME: Final = ".cook.lock"
PROGRESS_DIR: Final = ".cook-progress"

# ---------------------------------------------------------------- cook_manifest.json
MANIFEST_SCHEMA_VERSION: Final = 1
# manifest ``counts``: every manifest of schema 1 holds COUNT_KEYS; TRUNCATION_COUNT_KEYS came later
COUNT_KEYS: Final = (
    "records_in",
    "sources_packed",
    "records_rejected",
    "packs",
    "tokens",
    "target_tokens",
    "padding_tokens",
)
TRUNCATION_COUNT_KEYS: Final = ("truncated_sequences", "truncated_tokens")
MANIFEST_COUNT_KEYS: Final = COUNT_KEYS + TRUNCATION_COUNT_KEYS
# what the shards themselves count (a written shard reports these); the driver counts the records
RECORD_COUNT_KEYS: Final = ("records_in", "records_rejected")
PACKED_COUNT_KEYS: Final = tuple(key for key in MANIFEST_COUNT_KEYS if key not in RECORD_COUNT_KEYS)


@dataclass(frozen=True)
class Counts:
    """The manifest's ``counts``: one field per ``MANIFEST_COUNT_KEYS`` entry, in that order (a test
    keeps them equal). Shards report the ``PACKED_COUNT_KEYS`` part; the driver adds the records.

    >>> (Counts(packs=1, tokens=5) + Counts(packs=2, tokens=7)).to_dict()["tokens"]
    12
    """

    records_in: int = 0
    sources_packed: int = 0
    records_rejected: int = 0
    packs: int = 0
    tokens: int = 0
    target_tokens: int = 0
    padding_tokens: int = 0
    truncated_sequences: int = 0
    truncated_tokens: int = 0

    def __add__(self, other: Counts) -> Counts:
        theirs = vars(other)
        return Counts(**{key: mine + theirs[key] for key, mine in vars(self).items()})

    def to_dict(self, keys: tuple[str, ...] = MANIFEST_COUNT_KEYS) -> dict[str, int]:
        """``{key: value}`` for ``keys`` (all of them by default), in that order."""
        return {key: getattr(self, key) for key in keys}

    @classmethod
    def from_dict(cls, data: Mapping[str, int]) -> Counts:
        """The inverse of ``to_dict``; a key it lacks counts 0 (a manifest from before truncation)."""
        return cls(*(int(data.get(key, 0)) for key in MANIFEST_COUNT_KEYS))


# ---------------------------------------------------------------- meta.json (one per pack, SPEC §4)
META_BODY_KEYS: Final = ("schema_version", "sequences")
SEQUENCE_KEYS: Final = ("source", "length", "targets", "media")  # every sequence entry holds these
SEQUENCE_TRUNCATED_KEY: Final = "truncated"  # present, and true, only on a sequence cut to seq_len

PACK_KEY_PREFIX: Final = "pack-"
PACK_KEY_DIGITS: Final = 9
SHARD_PREFIX: Final = "shard-"
SHARD_DIGITS: Final = 6


def padded_lengths(lengths: np.ndarray, pad_multiple: int) -> np.ndarray:
    """Each sequence rounded up to a multiple of ``pad_multiple`` (SPEC §7): the spans between
    consecutive ``cu_seqlens_padded`` entries. int64 [N] -> int64 [N].

    >>> padded_lengths(np.array([5, 8, 1]), 4).tolist()
    [8, 8, 4]
    """
    return -(-lengths // pad_multiple) * pad_multiple


def pack_key(index: int) -> str:
    """``pack_key(42) == 'pack-000000042'``: zero-padded so keys sort in pack order."""
    return f"{PACK_KEY_PREFIX}{index:0{PACK_KEY_DIGITS}d}"


def shard_name(index: int) -> str:
    """``shard_name(3) == 'shard-000003.tar'``."""
    return f"{SHARD_PREFIX}{index:0{SHARD_DIGITS}d}.tar"


# ---------------------------------------------------------------- pack members (schema v1)
INPUT_IDS: Final = "input_ids.npy"  # int32 [T]
LOSS_MASK: Final = "loss_mask.npy"  # uint8 [T]
CU_SEQLENS: Final = "cu_seqlens.npy"  # int32 [n+1]
CU_SEQLENS_PADDED: Final = "cu_seqlens_padded.npy"  # int32 [n+1]
PIXEL_PATCHES: Final = "pixel_patches.npy"  # uint8 [P, 768]   (absent when no visual media)
MEDIA_SIZES: Final = "media_sizes.npy"  # int32 [M, 3]      (absent when no visual media)
AUDIO_FEATURES: Final = "audio_features.npy"  # float16 [C, F, 128] (absent when no audio)
AUDIO_LENGTHS: Final = "audio_lengths.npy"  # int32 [C]          (absent when no audio)
META: Final = "meta.json"

REQUIRED_MEMBERS: Final = (INPUT_IDS, LOSS_MASK, CU_SEQLENS, CU_SEQLENS_PADDED, META)
VISUAL_MEMBERS: Final = (PIXEL_PATCHES, MEDIA_SIZES)
AUDIO_MEMBERS: Final = (AUDIO_FEATURES, AUDIO_LENGTHS)
MEMBERS: Final = REQUIRED_MEMBERS + VISUAL_MEMBERS + AUDIO_MEMBERS
TEXT_PACK_MEMBERS: Final = frozenset(REQUIRED_MEMBERS)  # a text pack's members, as a set

# Stored frames (``media.image.storage`` png | jpeg): instead of ``pixel_patches.npy`` each visual frame
# (an image, one tile, one video frame), at its grid size from ``media_sizes``, is one image member
# ``frame.<k>.png`` / ``frame.<k>.jpg``, k = 0, 1, ... in placeholder order; its patches are the 16x16
# blocks of the decoded frame, in pixel_patches order (``cook.frames``). Each frame's codec is its
# medium's (``media.image.storage`` for images and tiles, ``media.video.storage`` for video frames), so
# one pack may hold .png and .jpg frames; such a pack's meta.json has ``FRAME_SCHEMA_VERSION``.
FRAME_STORAGE: Final = ("raw", "png", "jpeg")  # media.image/video.storage values; raw = pixel_patches.npy
FRAME_CODECS: Final = {"png": "png", "jpeg": "jpg"}  # codec -> member extension
FRAME_PIL_FORMATS: Final = {"png": "PNG", "jpeg": "JPEG"}  # codec -> what Pillow reports on open
JPEG_QUALITY: Final = 95  # media.image.jpeg_quality default
JPEG_SUBSAMPLING: Final = "4:4:4"  # chroma: never subsampled
PNG_COMPRESS_LEVEL: Final = 1  # zlib level of stored PNG frames (fixed): photo-like frames as small as at 6
FRAME_MEMBER_PATTERN: Final = re.compile(r"frame\.(0|[1-9][0-9]{0,8})\.(png|jpg)")


def frame_member(index: int, codec: str) -> str:
    """``frame_member(3, "jpeg") == 'frame.3.jpg'``: the member of visual frame ``index``."""
    return f"frame.{index}.{FRAME_CODECS[codec]}"


def parse_frame_member(name: str) -> tuple[int, str] | None:
    """``'frame.3.jpg'`` -> ``(3, "jpeg")``; None for a name that is not a frame member."""
    if not name.startswith("frame."):  # most members: no regular expression
        return None
    match = FRAME_MEMBER_PATTERN.fullmatch(name)
    if match is None:
        return None
    return int(match.group(1)), "png" if match.group(2) == "png" else "jpeg"


def frame_names(names: Iterable[str]) -> list[tuple[int, str, str]]:
    """``[(index, member name, codec)]`` of the frame members among ``names``, by index.

    >>> frame_names(["meta.json", "frame.1.jpg", "frame.0.png"])
    [(0, 'frame.0.png', 'png'), (1, 'frame.1.jpg', 'jpeg')]
    """
    return sorted((p[0], name, p[1]) for name in names if (p := parse_frame_member(name)) is not None)


# member -> (dtype, ndim, fixed trailing dims or None)
MEMBER_DTYPES: Final[dict[str, tuple[np.dtype, int, tuple[int, ...]]]] = {
    INPUT_IDS: (np.dtype("<i4"), 1, ()),
    LOSS_MASK: (np.dtype("u1"), 1, ()),
    CU_SEQLENS: (np.dtype("<i4"), 1, ()),
    CU_SEQLENS_PADDED: (np.dtype("<i4"), 1, ()),
    PIXEL_PATCHES: (np.dtype("u1"), 2, (768,)),
    MEDIA_SIZES: (np.dtype("<i4"), 2, (3,)),
    AUDIO_FEATURES: (np.dtype("<f2"), 3, (128,)),
    AUDIO_LENGTHS: (np.dtype("<i4"), 1, ()),
}

# ---------------------------------------------------------------- chat format and placeholders
IM_START: Final = "<|im_start|>"
IM_END: Final = "<|im_end|>"
THINK_START: Final = "<think>"
THINK_END: Final = "</think>"
IMG_START: Final = "<img>"
IMG_END: Final = "</img>"
IMAGE_TOKEN: Final = "<image>"
AUDIO_START: Final = "<so_start>"
AUDIO_TOKEN: Final = "<so_embedding>"
AUDIO_END: Final = "<so_end>"
PAD_TOKEN: Final = "<|pad|>"  # the demo tokenizer's pad; a user tokenizer's own pad_token wins

CONTROL_TOKENS: Final = (
    IM_START,
    IM_END,
    THINK_START,
    THINK_END,
    IMAGE_TOKEN,
    IMG_START,
    IMG_END,
    AUDIO_START,
    AUDIO_TOKEN,
    AUDIO_END,
)
ROLES: Final = ("system", "user", "assistant", "tool")


def video_frame_line(group_index: int, seconds: float) -> str:
    """Text before each frame group's ``<img>``: ``'Frame 1 sampled at 0.50 seconds: '``."""
    return f"Frame {group_index + 1} sampled at {seconds:.2f} seconds: "


# ---------------------------------------------------------------- media arithmetic (SPEC §6)
PATCH_SIZE: Final = 16
CHANNELS: Final = 3
PATCH_VALUES: Final = CHANNELS * PATCH_SIZE * PATCH_SIZE  # 768
PIXEL_SHUFFLE: Final = 4  # 2x2 patches -> one embedding
TEMPORAL_PATCH: Final = 2  # frames per video embedding group
TILE_SIZE: Final = 512
TOKENS_PER_TILE: Final = 256
AUDIO_SAMPLE_RATE_HZ: Final = 16_000
AUDIO_HOP: Final = 160  # 10 ms at 16 kHz
AUDIO_CLIP_S: Final = 30
AUDIO_MIN_CLIP_S: Final = 0.1
MEL_BINS: Final = 128
CLIP_MEAN: Final = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD: Final = (0.26862954, 0.26130258, 0.27577711)


def frame_patches(height_px: int, width_px: int) -> int:
    """``(H/16)(W/16)``: the patches (``pixel_patches`` rows) of one frame, image or tile; a 512x512 frame -> 1024."""
    return (height_px // PATCH_SIZE) * (width_px // PATCH_SIZE)


def image_embeddings(height_px: int, width_px: int) -> int:
    """``(H/16)(W/16)/4``: a 512x512 image -> 256 embeddings."""
    return frame_patches(height_px, width_px) // PIXEL_SHUFFLE


def video_embeddings(frames: int, height_px: int, width_px: int) -> int:
    """``frames/2 * (H/16)(W/16)/4``: 8 frames at 512x512 -> 4 * 256 = 1024."""
    return frames // TEMPORAL_PATCH * image_embeddings(height_px, width_px)


def tiles_embeddings(tiles: int) -> int:
    """``256 * tiles`` (the thumbnail counts as a tile)."""
    return TOKENS_PER_TILE * tiles


def audio_clip_tokens(samples: int) -> int:
    """Tokens of one 16 kHz clip: ``L = samples // 160``, then ``L = (L - 1) // 2 + 1`` three times.

    >>> audio_clip_tokens(16_000), audio_clip_tokens(30 * 16_000)
    (13, 375)
    """
    length = samples // AUDIO_HOP
    for _ in range(3):
        length = (length - 1) // 2 + 1
    return length


# ---------------------------------------------------------------- encoding of members
def npy_header(array: np.ndarray) -> bytes:
    """The ``.npy`` header ``np.save(f, array)`` writes before the data: magic, version, dict, padding.

    ``npy_header(a) + a.tobytes(order="A") == np.save``'s bytes for any array ``np.save`` can write
    without pickling, so a writer can send the header and then the array's own buffer (no copy).
    Like ``np.save`` it picks format 1.0, or 2.0 when the header needs over 65535 bytes (a structured
    dtype with many fields). Object dtypes raise ``ValueError``: members are never pickled.
    """
    if array.dtype.hasobject:
        raise ValueError(f"object arrays are never written as .npy (dtype {array.dtype}): they would be pickled")
    header = np.lib.format.header_data_from_array_1_0(array)
    buffer = io.BytesIO()
    try:
        np.lib.format.write_array_header_1_0(buffer, header)
    except ValueError:  # the header does not fit 1.0's uint16 length
        buffer = io.BytesIO()
        np.lib.format.write_array_header_2_0(buffer, header)
    return buffer.getvalue()


def npy_bytes(array: np.ndarray) -> bytes:
    """Serialize one array as ``.npy`` bytes, C order; never pickled, byte-identical for equal arrays.

    The same bytes as ``np.save(f, np.ascontiguousarray(array), allow_pickle=False)``.
    """
    contiguous = np.ascontiguousarray(array)
    return npy_header(contiguous) + contiguous.tobytes()


def load_npy(data: bytes) -> np.ndarray:
    """Parse ``.npy`` bytes with ``allow_pickle=False`` (object arrays raise ``ValueError``)."""
    array: np.ndarray = np.load(io.BytesIO(data), allow_pickle=False)
    return array


def dataset_yaml() -> str:
    """``.nv-meta/dataset.yaml``: a crude dataset with cook's subflavor, for a reader cooker."""
    return "__module__: megatron.energon\n__class__: CrudeWebdataset\nsubflavors:\n" + "".join(
        f"  {key}: {value}\n" for key, value in SUBFLAVOR.items()
    )
