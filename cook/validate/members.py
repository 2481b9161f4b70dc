"""``RawPack`` -> ``Pack``: every pack has the schema-v1 members with the right dtypes and shapes (SPEC §8,
§9), no unknown member and nothing pickled.

Nothing is ever unpickled: ``.npy`` members are parsed by ``npy.read_npy`` (a zero-copy view of the
canonical headers ``np.save`` writes, else ``format.load_npy`` with ``allow_pickle=False``; an object
array is reported as ``pickle_member``), and members named like pickles (``.pyd``,
``.pickle``, ``.pkl``, ...) are reported without being read. A member with the wrong dtype whose values
survive the cast is reported (``dtype``) and then checked further as if cast, so one wrong dtype does
not hide or fake the other invariants. A pack whose required members are missing, unparseable or of
inconsistent shape is reported and not checked further (``parse_pack`` returns ``None``).
"""

from __future__ import annotations

import json
from tokenize import TokenError
from typing import Any, Final

import numpy as np

from cook import format as fmt
from cook.types import Pack, SequenceMeta
from cook.validate.npy import read_npy
from cook.validate.problems import Code, Finding
from cook.validate.shards import MemberData, RawPack

PICKLE_SUFFIXES: Final = (".pyd", ".pickle", ".pkl", ".pth", ".pt")
MEDIA_KINDS: Final = ("image", "video", "tiles", "audio")
_SEQUENCE_KEYS: Final = frozenset((*fmt.SEQUENCE_KEYS, fmt.SEQUENCE_TRUNCATED_KEY))
_SEQUENCE_REQUIRED: Final = fmt.SEQUENCE_KEYS
_REQUIRED_SET: Final = frozenset(_SEQUENCE_REQUIRED)
_PAIRS: Final = (fmt.VISUAL_MEMBERS, fmt.AUDIO_MEMBERS)


def parse_pack(raw: RawPack) -> tuple[Pack | None, list[Finding]]:
    """The pack's members as a ``Pack`` (None when it cannot be checked further) and what is wrong."""
    findings = _member_names(raw)
    arrays: dict[str, np.ndarray] = {}
    for name, (dtype, ndim, trailing) in fmt.MEMBER_DTYPES.items():
        if name in raw.members:
            array = _load_member(name, raw.members[name], dtype, ndim, trailing, findings)
            if array is not None:
                arrays[name] = array
    sequences = parse_meta(raw.members[fmt.META], findings) if fmt.META in raw.members else None
    unusable = any(name not in arrays for name in fmt.REQUIRED_MEMBERS if name != fmt.META) or any(
        name in raw.members and name not in arrays for name in fmt.VISUAL_MEMBERS + fmt.AUDIO_MEMBERS
    )
    half_pair = any((first in arrays) != (second in arrays) for first, second in _PAIRS)
    if sequences is None or unusable or half_pair or not _shapes_agree(arrays, len(sequences), findings):
        return None, findings  # reported above; the remaining invariants cannot be checked on this pack
    pack = Pack(
        input_ids=arrays[fmt.INPUT_IDS],
        loss_mask=arrays[fmt.LOSS_MASK],
        cu_seqlens=arrays[fmt.CU_SEQLENS],
        cu_seqlens_padded=arrays[fmt.CU_SEQLENS_PADDED],
        sequences=sequences,
        pixel_patches=arrays.get(fmt.PIXEL_PATCHES),
        media_sizes=arrays.get(fmt.MEDIA_SIZES),
        audio_features=arrays.get(fmt.AUDIO_FEATURES),
        audio_lengths=arrays.get(fmt.AUDIO_LENGTHS),
    )
    return pack, findings


def _member_names(raw: RawPack) -> list[Finding]:
    findings: list[Finding] = []
    for name in raw.members:
        if name.lower().endswith(PICKLE_SUFFIXES):
            findings.append((Code.PICKLE_MEMBER, f"member {name} is a pickle (never loaded)"))
        elif name not in fmt.MEMBERS:
            findings.append((Code.MEMBER_UNKNOWN, f"member {name} is not a schema-v1 member"))
    for name in fmt.REQUIRED_MEMBERS:
        if name not in raw.members:
            findings.append((Code.MEMBER_MISSING, f"required member {name} is missing"))
    for first, second in _PAIRS:
        if (first in raw.members) != (second in raw.members):
            have, lack = (first, second) if first in raw.members else (second, first)
            findings.append((Code.MEMBER_MISSING, f"{have} is present without {lack}"))
    return findings


def _load_member(
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
    except (OSError, EOFError, SyntaxError, TokenError, RecursionError) as err:  # np.load parses the header dict
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


def parse_meta(data: MemberData, findings: list[Finding]) -> tuple[SequenceMeta, ...] | None:
    """``meta.json`` (schemas/packed_sample.v1.schema.json) -> its sequences, or None if it is not v1."""
    try:
        body = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        findings.append((Code.META_INVALID, f"{fmt.META} is not JSON: {err}"))
        return None
    if not isinstance(body, dict) or set(body) != set(fmt.META_BODY_KEYS):
        keys = sorted(body) if isinstance(body, dict) else type(body).__name__
        findings.append((Code.META_INVALID, f"{fmt.META} must hold exactly schema_version and sequences, got {keys}"))
        return None
    if body["schema_version"] != fmt.SCHEMA_VERSION:
        findings.append((Code.META_INVALID, f"{fmt.META} schema_version {body['schema_version']!r} != 1"))
        return None
    entries = body["sequences"]
    if not isinstance(entries, list) or not entries:
        findings.append((Code.META_INVALID, f"{fmt.META} sequences must be a non-empty list"))
        return None
    sequences = []
    for i, entry in enumerate(entries):
        problem = "" if _sequence_ok(entry) else _sequence_problem(entry)
        if problem:
            findings.append((Code.META_INVALID, f"{fmt.META} sequences[{i}]: {problem}"))
            return None
        sequences.append(SequenceMeta.from_meta(entry))
    return tuple(sequences)


def _sequence_ok(entry: Any) -> bool:
    """The fast path of ``_sequence_problem`` for a well-formed entry (the common case)."""
    return (
        type(entry) is dict
        and _REQUIRED_SET <= entry.keys() <= _SEQUENCE_KEYS
        and type(entry["source"]) is str
        and bool(entry["source"])
        and type(entry["length"]) is int
        and entry["length"] >= 1
        and type(entry["targets"]) is int
        and entry["targets"] >= 1
        and type(entry["media"]) is list
        and all(type(kind) is str and kind in MEDIA_KINDS for kind in entry["media"])
        and entry.get("truncated", True) is True
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _sequence_problem(entry: Any) -> str:
    if not isinstance(entry, dict):
        return f"is a {type(entry).__name__}, not an object"
    unknown = sorted(set(entry) - _SEQUENCE_KEYS)
    missing = [key for key in _SEQUENCE_REQUIRED if key not in entry]
    if unknown or missing:
        return f"unknown keys {unknown}, missing keys {missing}"
    if not isinstance(entry["source"], str) or not entry["source"]:
        return "source must be a non-empty string"
    if not _is_int(entry["length"]) or entry["length"] < 1:
        return f"length {entry['length']!r} must be an integer >= 1"
    if not _is_int(entry["targets"]) or entry["targets"] < 1:
        return f"targets {entry['targets']!r} must be an integer >= 1"
    media = entry["media"]
    if not isinstance(media, list) or any(kind not in MEDIA_KINDS for kind in media):
        return f"media {media!r} must list kinds among {list(MEDIA_KINDS)}"
    if "truncated" in entry and entry["truncated"] is not True:
        return "truncated, when present, must be true"
    return ""
