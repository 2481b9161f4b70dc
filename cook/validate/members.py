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
orjson; its sequence entries are checked for a whole batch of packs at once by ``sequence_columns``.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from itertools import chain
from typing import Any, Final

import numpy as np
import orjson

from cook import format as fmt
from cook.packfiles import NPY_ERRORS, MemberData, RawPack, read_npy
from cook.types import Pack, SequenceMeta
from cook.validate.frames import frame_patches
from cook.validate.problems import Code, Finding

PICKLE_SUFFIXES: Final = (".pyd", ".pickle", ".pkl", ".pth", ".pt")
MEDIA_KINDS: Final = frozenset(("image", "video", "tiles", "audio"))
_SEQUENCE_KEYS: Final = frozenset((*fmt.SEQUENCE_KEYS, fmt.SEQUENCE_TRUNCATED_KEY))
_REQUIRED: Final = frozenset(fmt.SEQUENCE_KEYS)
_COLUMNS: Final = tuple(map(operator.itemgetter, fmt.SEQUENCE_KEYS))  # source, length, targets, media
_TRUNCATED: Final = operator.methodcaller("get", fmt.SEQUENCE_TRUNCATED_KEY)
_PAIRS: Final = (fmt.VISUAL_MEMBERS, fmt.AUDIO_MEMBERS)
_MEDIA_MEMBERS: Final = fmt.VISUAL_MEMBERS + fmt.AUDIO_MEMBERS
_REQUIRED_ARRAYS: Final = frozenset(fmt.REQUIRED_MEMBERS) - {fmt.META}


@dataclass(frozen=True, slots=True)
class PackMembers:
    """A pack whose members parsed: its arrays (schema dtypes, shapes that agree) and meta.json's entries."""

    key: str
    arrays: dict[str, np.ndarray]
    entries: list[Any]  # meta.json "sequences", one per cu_seqlens step; checked by sequence_columns

    @property
    def has_media_members(self) -> bool:
        return not self.arrays.keys().isdisjoint(_MEDIA_MEMBERS)

    def to_pack(self) -> Pack:
        """The ``Pack`` (entries already accepted by ``sequence_columns``)."""
        arrays = self.arrays
        return Pack(
            input_ids=arrays[fmt.INPUT_IDS],
            loss_mask=arrays[fmt.LOSS_MASK],
            cu_seqlens=arrays[fmt.CU_SEQLENS],
            cu_seqlens_padded=arrays[fmt.CU_SEQLENS_PADDED],
            sequences=tuple(map(SequenceMeta.from_meta, self.entries)),
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
    if members is None:
        return None, findings
    columns = sequence_columns(members.entries)
    if isinstance(columns, str):
        return None, [*findings, entry_problem(members.entries)]
    return members.to_pack(), findings


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
    entries = _meta_entries(raw.members[fmt.META], frames, findings) if fmt.META in raw.members else None
    unusable = len(arrays) != stored or not arrays.keys() >= _REQUIRED_ARRAYS
    if fmt.MEDIA_SIZES in arrays and frames:
        patches = frame_patches(raw.members, arrays[fmt.MEDIA_SIZES], decode_frames, findings)
        if patches is None:
            return None, findings
        arrays[fmt.PIXEL_PATCHES] = patches
    half_pair = not text and any((first in arrays) != (second in arrays) for first, second in _PAIRS)
    if entries is None or unusable or half_pair:
        return None, findings  # reported above; the remaining invariants cannot be checked on this pack
    shapes: list[Finding] = []
    if not _shapes_agree(arrays, len(entries), shapes):  # a broken meta.json entry explains it first
        findings += [entry_problem(entries)] if isinstance(sequence_columns(entries), str) else shapes
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


def _meta_entries(data: MemberData, frames: bool, findings: list[Finding]) -> list[Any] | None:
    """``meta.json`` (schemas/packed_sample.v1.schema.json) -> its non-empty ``sequences`` list, or None.
    ``schema_version`` is 2 for a pack with frame members (``frames``), else 1."""
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError as err:  # invalid UTF-8 and nesting too deep included
        findings.append((Code.META_INVALID, f"{fmt.META} is not JSON: {err}"))
        return None
    if not isinstance(body, dict) or body.keys() != set(fmt.META_BODY_KEYS):
        keys = sorted(body) if isinstance(body, dict) else type(body).__name__
        findings.append((Code.META_INVALID, f"{fmt.META} must hold exactly schema_version and sequences, got {keys}"))
        return None
    version, want = body["schema_version"], fmt.FRAME_SCHEMA_VERSION if frames else fmt.SCHEMA_VERSION
    if version != want or type(version) is not int:
        held = "frame members" if frames else "no frame members"
        findings.append((Code.META_INVALID, f"{fmt.META} schema_version {version!r} != {want} (a pack with {held})"))
        return None
    entries = body["sequences"]
    if not isinstance(entries, list) or not entries:
        findings.append((Code.META_INVALID, f"{fmt.META} sequences must be a non-empty list"))
        return None
    return entries


def sequence_columns(entries: list[Any]) -> SequenceColumns | str:
    """The rule for meta.json's sequence entries, checked over many at once: each is an object holding
    exactly ``source`` (a non-empty string), ``length`` and ``targets`` (integers >= 1), ``media`` (a list of
    ``MEDIA_KINDS``) and, on a truncated sequence only, ``"truncated": true``. Returns the columns, or
    what is wrong (``entry_problem`` finds the entry)."""
    if not set(map(type, entries)) <= {dict}:
        return f"is a {type(next(e for e in entries if type(e) is not dict)).__name__}, not an object"
    try:
        sources, lengths, targets, media = (list(map(column, entries)) for column in _COLUMNS)
    except KeyError:
        missing = next(entry for entry in entries if not entry.keys() >= _REQUIRED)
        return (
            f"unknown keys {sorted(missing.keys() - _SEQUENCE_KEYS)}, missing keys {sorted(_REQUIRED - missing.keys())}"
        )
    if sum(map(len, entries)) != len(_REQUIRED) * len(entries):  # a "truncated" key, or an unknown one
        flags = list(map(_TRUNCATED, entries))
        if sum(map(len, entries)) != len(_REQUIRED) * len(entries) + sum(flag is True for flag in flags):
            entry = next(e for e, flag in zip(entries, flags, strict=True) if len(e) != len(_REQUIRED) + (flag is True))
            unknown = sorted(entry.keys() - _SEQUENCE_KEYS)
            return f"unknown keys {unknown}, missing keys []" if unknown else "truncated, when present, must be true"
    if not set(map(type, sources)) <= {str} or "" in sources:
        return "source must be a non-empty string"
    length_array, target_array = _counts(lengths), _counts(targets)
    if length_array is None:
        return f"length {_first_bad(lengths)!r} must be an integer >= 1"
    if target_array is None:
        return f"targets {_first_bad(targets)!r} must be an integer >= 1"
    if not set(map(type, media)) <= {list} or not _known_kinds(chain.from_iterable(media)):
        bad = next(kinds for kinds in media if type(kinds) is not list or not _known_kinds(kinds))
        return f"media {bad!r} must list kinds among {sorted(MEDIA_KINDS)}"
    return SequenceColumns(sources, length_array, target_array, media)


def _counts(values: list[Any]) -> np.ndarray | None:
    """int64 [S] of integers >= 1 (not bools, not floats), or None."""
    if not set(map(type, values)) <= {int}:
        return None
    try:
        array = np.array(values, dtype=np.int64)
    except OverflowError:
        return None
    return array if not array.size or int(array.min()) >= 1 else None


def _first_bad(values: list[Any]) -> Any:
    return next(v for v in values if type(v) is not int or not 1 <= v < 2**63)


def _known_kinds(kinds: Any) -> bool:
    kinds = list(kinds)
    return set(map(type, kinds)) <= {str} and MEDIA_KINDS.issuperset(kinds)


def entry_problem(entries: list[Any]) -> Finding:
    """The finding for the first entry of one pack's meta.json that ``sequence_columns`` refuses."""
    for i, entry in enumerate(entries):
        problem = sequence_columns([entry])
        if isinstance(problem, str):
            return Code.META_INVALID, f"{fmt.META} sequences[{i}]: {problem}"
    raise AssertionError("entry_problem of entries sequence_columns accepts")
