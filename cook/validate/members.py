"""``RawPack`` -> its members as arrays, and meta.json's sequences as columns: every pack has the schema-v1
members with the right dtypes and shapes (SPEC §8, §9), no unknown member and nothing pickled.

    RawPack -parse_members-> PackMembers (arrays + meta.json's entries) -sequence_columns (many packs at once)
            -> SequenceColumns;  parse_pack: both for one pack, as a ``types.Pack``

Nothing is ever unpickled: ``.npy`` members are parsed by ``packfiles.read_npy`` (``allow_pickle=False``;
an object array is reported as ``pickle_member``), and members named like pickles (``.pyd``, ``.pickle``,
``.pkl``, ...) are reported without being read. A member with the wrong dtype whose values survive the
cast is reported (``dtype``) and then checked further as if cast, so one wrong dtype does not hide or
fake the other invariants. A pack whose required members are missing, unparseable or of inconsistent
shape is reported and not checked further (``parse_members`` returns ``None``). meta.json is parsed with
msgspec into typed entries (``SequenceEntry``: the schema of schemas/packed_sample.v1.schema.json, so the
library checks every key, type and bound and names the first entry that breaks it), then laid out as
columns for a whole batch of packs at once by ``sequence_columns``.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Annotated, Final, Literal, cast

import msgspec
import numpy as np

from cook import format as fmt
from cook.packfiles import NPY_ERRORS, MemberData, RawPack, read_npy
from cook.types import Pack, SequenceMeta
from cook.validate.frames import frame_patches
from cook.validate.problems import Code, Finding

PICKLE_SUFFIXES: Final = (".pyd", ".pickle", ".pkl", ".pth", ".pt")
_PAIRS: Final = (fmt.VISUAL_MEMBERS, fmt.AUDIO_MEMBERS)
_MEDIA_MEMBERS: Final = fmt.VISUAL_MEMBERS + fmt.AUDIO_MEMBERS
_REQUIRED_ARRAYS: Final = frozenset(fmt.REQUIRED_MEMBERS) - {fmt.META}


MediaKind = Literal["image", "video", "tiles", "audio"]
_Count = Annotated[int, msgspec.Meta(ge=1, le=2**63 - 1)]  # an integer >= 1 that fits int64 (not a bool or float)


class SequenceEntry(msgspec.Struct, forbid_unknown_fields=True, frozen=True, gc=False):
    """One entry of meta.json's ``sequences`` (``format.SEQUENCE_KEYS``, then the optional truncated flag)."""

    source: Annotated[str, msgspec.Meta(min_length=1)]
    length: _Count
    targets: _Count
    media: list[MediaKind]  # each media item's kind, in placeholder order
    truncated: bool | msgspec.UnsetType = msgspec.UNSET  # present, and true, only on a truncated sequence

    @classmethod
    def of(cls, meta: SequenceMeta) -> SequenceEntry:
        media = cast(list[MediaKind], list(meta.media))
        return cls(meta.source, meta.length, meta.targets, media, True if meta.truncated else msgspec.UNSET)

    def to_meta(self) -> SequenceMeta:
        return SequenceMeta(self.source, self.length, self.targets, tuple(self.media), self.truncated is True)


class _MetaBody(msgspec.Struct, forbid_unknown_fields=True, frozen=True, gc=False):
    """meta.json: exactly ``format.META_BODY_KEYS``."""

    schema_version: int
    sequences: Annotated[list[SequenceEntry], msgspec.Meta(min_length=1)]


_META_DECODER: Final = msgspec.json.Decoder(_MetaBody)
assert SequenceEntry.__struct_fields__ == (*fmt.SEQUENCE_KEYS, fmt.SEQUENCE_TRUNCATED_KEY)
assert _MetaBody.__struct_fields__ == fmt.META_BODY_KEYS
_COLUMNS: Final = tuple(map(operator.attrgetter, fmt.SEQUENCE_KEYS))  # source, length, targets, media


@dataclass(frozen=True, slots=True)
class PackMembers:
    """A pack whose members parsed: its arrays (schema dtypes, shapes that agree) and meta.json's entries."""

    key: str
    arrays: dict[str, np.ndarray]
    entries: list[SequenceEntry]  # meta.json "sequences", one per cu_seqlens step

    @property
    def has_media_members(self) -> bool:
        return not self.arrays.keys().isdisjoint(_MEDIA_MEMBERS)

    def to_pack(self) -> Pack:
        """The ``Pack``."""
        arrays = self.arrays
        return Pack(
            input_ids=arrays[fmt.INPUT_IDS],
            loss_mask=arrays[fmt.LOSS_MASK],
            cu_seqlens=arrays[fmt.CU_SEQLENS],
            cu_seqlens_padded=arrays[fmt.CU_SEQLENS_PADDED],
            sequences=tuple(entry.to_meta() for entry in self.entries),
            pixel_patches=arrays.get(fmt.PIXEL_PATCHES),
            media_sizes=arrays.get(fmt.MEDIA_SIZES),
            audio_features=arrays.get(fmt.AUDIO_FEATURES),
            audio_lengths=arrays.get(fmt.AUDIO_LENGTHS),
        )


@dataclass(frozen=True, slots=True)
class SequenceColumns:
    """meta.json's sequence entries of many packs, one after another, as columns."""

    sources: list[str]
    lengths: np.ndarray  # int64 [S]
    targets: np.ndarray  # int64 [S]
    media: list[list[str]]  # the kinds of each sequence's media items


def parse_pack(raw: RawPack) -> tuple[Pack | None, list[Finding]]:
    """The pack's members as a ``Pack`` (None when it cannot be checked further) and what is wrong; stored
    frames are decoded into its ``pixel_patches``."""
    members, findings = parse_members(raw, decode_frames=True)
    return (None if members is None else members.to_pack()), findings


def parse_members(raw: RawPack, decode_frames: bool = False) -> tuple[PackMembers | None, list[Finding]]:
    """The pack's arrays and meta.json entries (None when they cannot be checked further), and what is wrong.

    Stored frames stand in ``arrays`` as ``pixel_patches`` (``frames.frame_patches``: from their headers,
    or decoded with ``decode_frames``)."""
    text = raw.members.keys() == fmt.TEXT_PACK_MEMBERS
    findings: list[Finding] = [] if text else _member_names(raw)
    arrays: dict[str, np.ndarray] = {}
    stored = 0  # array members present
    for name, data in raw.members.items():
        layout = fmt.MEMBER_DTYPES.get(name)
        if layout is not None:
            stored += 1
            array = load_member(name, data, *layout, findings)
            if array is not None:
                arrays[name] = array
    frames = not text and bool(fmt.frame_names(raw.members))
    entries = meta_entries(raw.members[fmt.META], frames, findings) if fmt.META in raw.members else None
    unusable = len(arrays) != stored or not arrays.keys() >= _REQUIRED_ARRAYS
    if fmt.MEDIA_SIZES in arrays and frames:
        patches = frame_patches(raw.members, arrays[fmt.MEDIA_SIZES], decode_frames, findings)
        if patches is None:
            return None, findings
        arrays[fmt.PIXEL_PATCHES] = patches
    half_pair = not text and any((first in arrays) != (second in arrays) for first, second in _PAIRS)
    if entries is None or unusable or half_pair:
        return None, findings  # reported above; the remaining invariants cannot be checked on this pack
    if not _shapes_agree(arrays, len(entries), findings):
        return None, findings
    return PackMembers(raw.key, arrays, entries), findings


def _member_names(raw: RawPack) -> list[Finding]:
    findings: list[Finding] = []
    for name in raw.members:
        if name.lower().endswith(PICKLE_SUFFIXES):
            findings.append((Code.PICKLE_MEMBER, f"member {name} is a pickle (never loaded)"))
        elif name not in fmt.MEMBERS and fmt.parse_frame_member(name) is None:
            findings.append((Code.MEMBER_UNKNOWN, f"member {name} is not a schema-v1 member"))
    for name in fmt.REQUIRED_MEMBERS:
        if name not in raw.members:
            findings.append((Code.MEMBER_MISSING, f"required member {name} is missing"))
    present = raw.members.keys() | ({fmt.PIXEL_PATCHES} if fmt.frame_names(raw.members) else set())
    for first, second in _PAIRS:
        if (first in present) != (second in present):
            have, lack = (first, second) if first in present else (second, first)
            findings.append((Code.MEMBER_MISSING, f"{have} is present without {lack}"))
    return findings


def load_member(
    name: str, data: MemberData, dtype: np.dtype, ndim: int, trailing: tuple[int, ...], findings: list[Finding]
) -> np.ndarray | None:
    """Parse one ``.npy`` member and check its dtype and rank; None when it cannot be used."""
    try:
        array = read_npy(data)
    except ValueError as err:
        if "allow_pickle" in str(err) or "Object arrays" in str(err):
            findings.append((Code.PICKLE_MEMBER, f"{name} holds an object (pickled) array; not loaded"))
        else:
            findings.append((Code.NPY_INVALID, f"{name} is not a readable .npy: {err}"))
        return None
    except NPY_ERRORS as err:  # the rest: np.load parsing a damaged header dict
        findings.append((Code.NPY_INVALID, f"{name} is not a readable .npy: {err}"))
        return None
    if array.ndim != ndim or tuple(array.shape[ndim - len(trailing) :]) != trailing:
        want = ", ".join([*"NMF"[: ndim - len(trailing)], *map(str, trailing)])
        findings.append((Code.SHAPE, f"{name} has shape {list(array.shape)}, expected [{want}]"))
        return None
    if array.dtype != dtype:
        findings.append((Code.DTYPE, f"{name} has dtype {array.dtype.str}, expected {dtype.str}"))
        if array.dtype.kind not in "biuf":
            return None
        cast = array.astype(dtype)
        if not np.array_equal(cast, array):
            return None
        array = cast
    return array


def _shapes_agree(arrays: dict[str, np.ndarray], n_sequences: int, findings: list[Finding]) -> bool:
    """T agrees across input_ids/loss_mask, n + 1 across cu_seqlens*, C across the audio members."""
    ok = True
    tokens, mask = arrays[fmt.INPUT_IDS].shape[0], arrays[fmt.LOSS_MASK].shape[0]
    if tokens != mask:
        findings.append((Code.SHAPE, f"{fmt.LOSS_MASK} has {mask} entries, {fmt.INPUT_IDS} has {tokens}"))
        ok = False
    for name in (fmt.CU_SEQLENS, fmt.CU_SEQLENS_PADDED):
        if arrays[name].shape[0] != n_sequences + 1:
            findings.append(
                (Code.SHAPE, f"{name} has {arrays[name].shape[0]} entries, meta.json has {n_sequences} sequences")
            )
            ok = False
    features, lengths = arrays.get(fmt.AUDIO_FEATURES), arrays.get(fmt.AUDIO_LENGTHS)
    if features is not None and lengths is not None and features.shape[0] != lengths.shape[0]:
        findings.append(
            (Code.SHAPE, f"{fmt.AUDIO_FEATURES} has {features.shape[0]} clips, {fmt.AUDIO_LENGTHS} {lengths.shape[0]}")
        )
        ok = False
    return ok


def meta_entries(data: MemberData, frames: bool, findings: list[Finding]) -> list[SequenceEntry] | None:
    """``meta.json`` (schemas/packed_sample.v1.schema.json) -> its non-empty ``sequences`` list, or None.
    ``schema_version`` is 2 for a pack with frame members (``frames``), else 1."""
    try:
        body = _META_DECODER.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError) as err:  # not JSON, not UTF-8, or not this schema (says where)
        findings.append((Code.META_INVALID, f"{fmt.META} does not match the schema: {err}"))
        return None
    version, want = body.schema_version, fmt.FRAME_SCHEMA_VERSION if frames else fmt.SCHEMA_VERSION
    if version != want:
        held = "frame members" if frames else "no frame members"
        findings.append((Code.META_INVALID, f"{fmt.META} schema_version {version!r} != {want} (a pack with {held})"))
        return None
    entries = body.sequences
    for i, entry in enumerate(entries):
        if entry.truncated is False:
            findings.append((Code.META_INVALID, f"{fmt.META} sequences[{i}]: truncated, when present, must be true"))
            return None
    return entries


def sequence_columns(entries: list[SequenceEntry]) -> SequenceColumns:
    """meta.json's sequence entries of many packs, one after another, as columns."""
    source, length, targets, media = _COLUMNS
    count = len(entries)
    return SequenceColumns(
        list(map(source, entries)),
        np.fromiter(map(length, entries), dtype=np.int64, count=count),
        np.fromiter(map(targets, entries), dtype=np.int64, count=count),
        list(map(media, entries)),
    )
