"""What a validation finds: stable error codes, one ``Problem`` per broken invariant, and the rules a
pack is checked against.

Codes are part of the CLI contract (``cook validate --json``): never rename one, only add. Each check
function yields ``Finding``s (code, detail); the shard scan attaches the shard and pack key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from cook import format as fmt


class Code(StrEnum):
    # shards (tar + .tar.idx)
    SHARD_MISSING = "shard_missing"  # listed in the manifest, not on disk
    SHARD_UNLISTED = "shard_unlisted"  # a .tar on disk the manifest does not list
    SHARD_UNREADABLE = "shard_unreadable"  # the file cannot be opened or read
    TAR_TRUNCATED = "tar_truncated"  # a member or the end-of-archive marker is cut off
    TAR_CORRUPT = "tar_corrupt"  # bad header checksum, unsupported member type, trailing data
    IDX_MISSING = "idx_missing"
    IDX_MISMATCH = "idx_mismatch"  # offsets differ from the actual sample header offsets
    PACK_KEY = "pack_key"  # key not pack_key(first_pack + i), or a sample split in two
    # members
    MEMBER_MISSING = "member_missing"
    MEMBER_UNKNOWN = "member_unknown"
    MEMBER_DUPLICATE = "member_duplicate"
    PICKLE_MEMBER = "pickle_member"  # .pyd/.pickle/.pkl member, or an object (pickled) .npy
    NPY_INVALID = "npy_invalid"  # not parseable as .npy
    DTYPE = "dtype"
    SHAPE = "shape"
    META_INVALID = "meta_invalid"  # meta.json not schema v1
    # boundaries and masks
    CU_SEQLENS = "cu_seqlens"
    PAD_MULTIPLE = "pad_multiple"
    PACK_LENGTH = "pack_length"  # T > packing.seq_len
    META_LENGTH = "meta_length"
    META_TARGETS = "meta_targets"
    LOSS_MASK_VALUES = "loss_mask_values"
    LOSS_MASK_START = "loss_mask_start"
    LOSS_MASK_PADDING = "loss_mask_padding"
    # tokens and media
    TOKEN_RANGE = "token_range"
    PADDING_TOKEN = "padding_token"  # a padding position that is not the pad id
    PLACEHOLDER_COUNT = "placeholder_count"  # <image> / <so_embedding> tokens != media embeddings
    PATCH_COUNT = "patch_count"  # pixel_patches rows != sum of frames * (H/16) * (W/16)
    MEDIA_SIZES = "media_sizes"  # a media_sizes row impossible for its kind
    FRAME_MEMBER = "frame_member"  # frame.<k> members misnumbered, mixed codecs, beside pixel_patches, unreadable
    FRAME_CODEC = "frame_codec"  # a frame member's header is not an RGB image of its name's codec
    FRAME_SIZE = "frame_size"  # a frame member's width x height != its media_sizes row
    MEDIA_COUNT = "media_count"  # meta.json media items disagree with media_sizes / audio_lengths rows
    MEDIA_KIND = "media_kind"  # a visual kind the manifest's media.image.mode cannot produce
    AUDIO_LENGTHS = "audio_lengths"
    PLACEHOLDER_BLOCK = "placeholder_block"  # --deep: placeholder runs do not match the media, in order
    TARGET_SPAN = "target_span"  # --deep: a target span that does not end with <|im_end|>
    # dataset and manifest
    MANIFEST_INVALID = "manifest_invalid"
    MANIFEST_COUNT = "manifest_count"
    MANIFEST_SHARD = "manifest_shard"  # a shard entry's packs / first_pack / bytes disagree
    RECORDS_IN = "records_in"  # records_in != sources_packed + records_rejected
    REJECTS_COUNT = "rejects_count"
    REJECTS_INVALID = "rejects_invalid"
    SHA256 = "sha256"
    SOURCE_DUPLICATE = "source_duplicate"  # a source packed twice, or both packed and rejected
    NV_META = "nv_meta"  # dataset.yaml, split.yaml, .info.json, or index.sqlite rows that disagree with the shards
    # what megatron.energon needs to load the directory at all (checked without --deep)
    NO_PACKS = "no_packs"  # the shards hold no pack (e.g. every record was rejected): nothing to load
    NV_META_MISSING = "nv_meta_missing"  # .nv-meta/ lacks dataset.yaml, split.yaml, .info.json or index.sqlite
    SPLIT_EMPTY = "split_empty"  # split.yaml's train split names no shard (absent, empty, or all excluded)
    ENERGON_LOAD = "energon_load"  # --deep


Finding = tuple[Code, str]  # (code, detail naming the member and what is wrong)


@dataclass(frozen=True, slots=True)
class Problem:
    """One broken invariant. ``shard``/``key`` are "" when it concerns the whole dataset or shard."""

    code: str
    shard: str
    key: str
    detail: str


def problem(code: Code, detail: str, shard: str = "", key: str = "") -> Problem:
    """A ``Problem`` of the whole dataset (or of ``shard`` / ``key`` when given)."""
    return Problem(code.value, shard, key, detail)


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """Token facts a pack is checked against; ``None`` skips the checks that need it.

    ``control_ids`` maps each of ``format.CONTROL_TOKENS`` to its id in the dataset's tokenizer.
    """

    vocab_size: int | None = None
    pad_id: int | None = None
    control_ids: Mapping[str, int] = field(default_factory=dict)

    @property
    def image_id(self) -> int | None:
        return self.control_ids.get(fmt.IMAGE_TOKEN)

    @property
    def audio_id(self) -> int | None:
        return self.control_ids.get(fmt.AUDIO_TOKEN)


@dataclass(frozen=True, slots=True)
class PackRules:
    """What the manifest promises about every pack (``None``: unknown, the check is skipped)."""

    seq_len: int | None
    pad_multiple: int | None
    image_mode: str | None  # media.image.mode: "dynamic" | "tiles"
    frame_storage: str | None = None  # media.image.storage: "raw" | "png" | "jpeg"
    video_frame_storage: str | None = None  # media.video.storage (None: as frame_storage)
    tokens: TokenInfo = field(default_factory=TokenInfo)
    deep: bool = False
