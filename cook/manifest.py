"""``cook_manifest.json`` as types: what a finished run records (SPEC §8), one frozen dataclass per
section. The JSON key names are the field names; the version is ``format.MANIFEST_SCHEMA_VERSION``;
``schemas/manifest.v1.schema.json`` describes the file and a test validates written manifests with it.

    Manifest(pipeline, tokenizer=TokenizerEntry, tokenizer_backend, counts=Counts,
             packing=PackingEntry, rejects_by_reason, shards=(ShardInfo, ...), seq_len, contract,
             lineage=(LineageEntry, ...)).to_dict()
    load_manifest(DIR) -> Manifest.from_dict(json) -> Manifest          (or ManifestError: one line)

Every reader of a dataset's manifest goes through ``load_manifest``. ``cook validate`` is the one
exception: it checks the raw JSON itself, to report every bad key rather than the first.

Sections whose contents another typed object defines (the resolved pipeline: ``PipelineConfig``;
the backend's self-check: ``BackendChoice``; the packing statistics: ``PackingStats``) arrive here
already as that object's ``to_dict()``/``asdict``, since those types live in higher layers.

Keys added within schema v1 are optional when read: ``tokenizer_backend`` and ``contract`` are None
without them, ``lineage`` (written by ``cook repack`` only) empty, the truncation counts 0, and
``seq_len`` (written since it was added) falls back to ``pipeline.packing.seq_len``, the value it records.
``packing_efficiency`` and ``stored_fill`` are written from the counts and not read back: the properties
recompute them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Final

from cook import __version__
from cook import format as fmt
from cook.contract import CONTRACT_KEY, Contract
from cook.dataset_stats import packing_efficiency, stored_fill

_KIND_NAMES: Final = {int: "an integer", str: "a string", dict: "an object", list: "a list"}
_PACKING_KEYS: Final = ("algorithm", "windows", "windows_short_of_pack_count_multiple")
LINEAGE_KEY: Final = "lineage"
_LINEAGE_KINDS: Final = {"path": str, "manifest_sha256": str, "sequences": int}
_SHARD_KINDS: Final = {"name": str, "packs": int, "first_pack": int, "bytes": int, "sha256": str}
_CONTRACT_KINDS: Final = {
    "tokenizer_path": str,
    "tokenizer_sha256": dict,
    "chat_format": str,
    "template_sha256": str,
    "vocab_size": int,
    "control_ids": dict,
    "media": dict,
    "seq_len": int,
    "pad_multiple": int,
}


class ManifestError(ValueError):
    """A manifest that cannot be read as schema v1; the message is one line naming the file and the key."""


@dataclass(frozen=True)
class ShardInfo:
    """One written shard: ``shards[i]`` of the manifest."""

    name: str
    packs: int
    first_pack: int
    bytes: int
    sha256: str

    def to_dict(self) -> dict[str, Any]:
        """The entry's JSON object (its fields are flat: ``asdict``'s recursion and copies cost ~17 µs
        a shard, a million of them in a big run's manifest)."""
        return dict(vars(self))


@dataclass(frozen=True)
class TokenizerEntry:
    """The manifest's ``tokenizer``: the directory, its files' sha256 and the ids the checks need."""

    path: str
    sha256: Mapping[str, str]
    vocab_size: int
    pad_id: int
    control_ids: Mapping[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "sha256": dict(self.sha256), "control_ids": dict(sorted(self.control_ids.items()))}


@dataclass(frozen=True)
class PackingEntry:
    """The manifest's ``packing``: the ``PackingStats`` fields plus how the run packed."""

    stats: Mapping[str, Any]  # asdict(PackingStats)
    algorithm: str
    windows: int
    windows_short_of_pack_count_multiple: int

    def to_dict(self) -> dict[str, Any]:
        return {**self.stats, **{key: getattr(self, key) for key in _PACKING_KEYS}}


@dataclass(frozen=True)
class LineageEntry:
    """One entry of the manifest's optional ``lineage``: a cooked dataset ``cook repack`` read, its
    manifest's sha256 and how many sequences it gave."""

    path: str
    manifest_sha256: str
    sequences: int


@dataclass(frozen=True)
class Manifest:
    pipeline: Mapping[str, Any]  # PipelineConfig.to_dict()
    tokenizer: TokenizerEntry
    tokenizer_backend: Mapping[str, Any] | None  # BackendChoice.to_dict(); None: written before it was recorded
    counts: fmt.Counts
    packing: PackingEntry
    rejects_by_reason: Mapping[str, int]
    shards: tuple[ShardInfo, ...]
    seq_len: int  # packing.seq_len: every pack's capacity
    contract: Contract | None  # what the trainer must match (cook.contract); None: written before it existed
    cook_version: str = __version__
    lineage: tuple[LineageEntry, ...] = ()  # cook repack: the datasets it read, in order; () for cook run

    @property
    def packing_efficiency(self) -> float:
        """tokens / (packs × seq_len) (``cook.dataset_stats.packing_efficiency``)."""
        return packing_efficiency(self.counts.tokens, self.counts.packs, self.seq_len)

    @property
    def stored_fill(self) -> float:
        """tokens / stored tokens (``cook.dataset_stats.stored_fill``)."""
        return stored_fill(self.counts.tokens, self.counts.tokens + self.counts.padding_tokens)

    def to_dict(self, shards: bool = True) -> dict[str, Any]:
        """The manifest's JSON object (``shards`` False: without the ``shards`` key, which
        ``cook.writer.manifest`` encodes apart)."""
        data = {
            "schema_version": fmt.MANIFEST_SCHEMA_VERSION,
            "pack_schema_version": fmt.SCHEMA_VERSION,
            "cook_version": self.cook_version,
            "pipeline": dict(self.pipeline),
            "tokenizer": self.tokenizer.to_dict(),
            "counts": self.counts.to_dict(),
            "packing_efficiency": self.packing_efficiency,
            "stored_fill": self.stored_fill,
            "packing": self.packing.to_dict(),
            "rejects_by_reason": dict(sorted(self.rejects_by_reason.items())),
            "seq_len": self.seq_len,
        }
        if shards:
            data["shards"] = [s.to_dict() for s in self.shards]
        if self.tokenizer_backend is not None:
            data["tokenizer_backend"] = dict(self.tokenizer_backend)
        if self.contract is not None:
            data[CONTRACT_KEY] = self.contract.to_dict()
        if self.lineage:
            data[LINEAGE_KEY] = [asdict(entry) for entry in self.lineage]
        return data

    @classmethod
    def from_dict(cls, data: object, source: str = fmt.MANIFEST_NAME) -> Manifest:
        """The inverse of ``to_dict``; raises ``ManifestError`` ("``source``: what is wrong") for a
        manifest of another schema version or with a key missing or of the wrong type."""
        try:
            return _parse(data)
        except ManifestError as err:
            raise ManifestError(f"{source}: {err}") from None


def load_manifest(dataset_dir: str) -> Manifest:
    """``DIR/cook_manifest.json`` as a ``Manifest``; ``ManifestError`` when it cannot be read or parsed."""
    path = os.path.join(dataset_dir, fmt.MANIFEST_NAME)
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as err:  # ValueError: not JSON, or not UTF-8
        raise ManifestError(f"{path}: cannot be read ({err})") from None
    return Manifest.from_dict(data, path)


def _get(data: Mapping[str, Any], key: str, kind: type, where: str = "") -> Any:
    """``data[key]`` when it is a ``kind`` (a bool is not an integer), else ``ManifestError``."""
    value = data.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise ManifestError(f"{where}{key} is missing or not {_KIND_NAMES[kind]}")
    return value


def _mapping(data: Mapping[str, Any], key: str, kind: type, where: str = "") -> dict[str, Any]:
    """``data[key]``, an object whose every value is a ``kind``."""
    section: dict[str, Any] = _get(data, key, dict, where)
    for name in section:
        _get(section, name, kind, f"{where}{key}.")
    return section


def _parse(data: object) -> Manifest:
    if not isinstance(data, dict):
        raise ManifestError("is not a JSON object")
    for key, want in (("schema_version", fmt.MANIFEST_SCHEMA_VERSION), ("pack_schema_version", fmt.SCHEMA_VERSION)):
        if _get(data, key, int) != want:
            raise ManifestError(f"{key} is {data[key]}, this cook reads {want}")
    pipeline = _get(data, "pipeline", dict)
    tokenizer = _get(data, "tokenizer", dict)
    counts = _get(data, "counts", dict)
    for key in fmt.MANIFEST_COUNT_KEYS:
        if key in fmt.COUNT_KEYS or key in counts:
            _get(counts, key, int, "counts.")
    packing = _get(data, "packing", dict)
    for key in _PACKING_KEYS:
        _get(packing, key, str if key == "algorithm" else int, "packing.")
    return Manifest(
        pipeline=pipeline,
        tokenizer=TokenizerEntry(
            path=_get(tokenizer, "path", str, "tokenizer."),
            sha256=_mapping(tokenizer, "sha256", str, "tokenizer."),
            vocab_size=_get(tokenizer, "vocab_size", int, "tokenizer."),
            pad_id=_get(tokenizer, "pad_id", int, "tokenizer."),
            control_ids=_mapping(tokenizer, "control_ids", int, "tokenizer."),
        ),
        tokenizer_backend=_get(data, "tokenizer_backend", dict) if "tokenizer_backend" in data else None,
        counts=fmt.Counts.from_dict(counts),
        packing=PackingEntry(
            stats={k: v for k, v in packing.items() if k not in _PACKING_KEYS},
            **{key: packing[key] for key in _PACKING_KEYS},
        ),
        rejects_by_reason=_mapping(data, "rejects_by_reason", int),
        shards=tuple(ShardInfo(**entry) for entry in _entries(data, "shards", _SHARD_KINDS)),
        seq_len=_seq_len(data, pipeline),
        contract=_contract(data[CONTRACT_KEY]) if CONTRACT_KEY in data else None,
        cook_version=_get(data, "cook_version", str),
        lineage=tuple(LineageEntry(**e) for e in _entries(data, LINEAGE_KEY, _LINEAGE_KINDS))
        if LINEAGE_KEY in data
        else (),
    )


def _entries(data: Mapping[str, Any], key: str, kinds: dict[str, type]) -> list[dict[str, Any]]:
    """``data[key]``, a list of objects whose every ``kinds`` key has its kind."""
    out = []
    for index, entry in enumerate(_get(data, key, list)):
        if not isinstance(entry, dict):
            raise ManifestError(f"{key}[{index}] is not an object")
        out.append({name: _get(entry, name, kind, f"{key}[{index}].") for name, kind in kinds.items()})
    return out


def _seq_len(data: Mapping[str, Any], pipeline: Mapping[str, Any]) -> int:
    """``seq_len``; a manifest written before it was recorded has it only in ``pipeline.packing``."""
    if "seq_len" in data:
        return int(_get(data, "seq_len", int))
    return int(_get(_get(pipeline, "packing", dict, "pipeline."), "seq_len", int, "pipeline.packing."))


def _contract(data: object) -> Contract:
    if not isinstance(data, dict):
        raise ManifestError(f"{CONTRACT_KEY} is not an object")
    for key, kind in _CONTRACT_KINDS.items():
        _get(data, key, kind, f"{CONTRACT_KEY}.")
    return Contract.from_dict(data)
