"""``cook_manifest.json`` as types: what a finished run records (SPEC §8), one frozen dataclass per
section. The JSON key names are the field names; the version is ``format.MANIFEST_SCHEMA_VERSION``;
``schemas/manifest.v1.schema.json`` describes the file and a test validates written manifests with it.

    Manifest(pipeline, tokenizer=TokenizerEntry, tokenizer_backend, counts=Counts,
             packing=PackingEntry, rejects_by_reason, shards=(ShardInfo, ...), seq_len).to_dict()

Sections whose contents another typed object defines (the resolved pipeline: ``PipelineConfig``;
the backend's self-check: ``BackendChoice``; the packing statistics: ``PackingStats``) arrive here
already as that object's ``to_dict()``/``asdict``, since those types live in higher layers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from cook import __version__
from cook import format as fmt
from cook.contract import CONTRACT_KEY, Contract


@dataclass(frozen=True)
class ShardInfo:
    """One written shard: ``shards[i]`` of the manifest."""

    name: str
    packs: int
    first_pack: int
    bytes: int
    sha256: str


@dataclass(frozen=True)
class TokenizerEntry:
    """The manifest's ``tokenizer``: the directory, its files' sha256 and the ids the checks need."""

    path: str
    sha256: Mapping[str, str]
    vocab_size: int
    pad_id: int
    control_ids: Mapping[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "sha256": dict(self.sha256),
            "vocab_size": self.vocab_size,
            "pad_id": self.pad_id,
            "control_ids": dict(sorted(self.control_ids.items())),
        }


@dataclass(frozen=True)
class PackingEntry:
    """The manifest's ``packing``: the ``PackingStats`` fields plus how the run packed."""

    stats: Mapping[str, Any]  # asdict(PackingStats)
    algorithm: str
    windows: int
    windows_short_of_pack_count_multiple: int

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.stats,
            "algorithm": self.algorithm,
            "windows": self.windows,
            "windows_short_of_pack_count_multiple": self.windows_short_of_pack_count_multiple,
        }


@dataclass(frozen=True)
class Manifest:
    pipeline: Mapping[str, Any]  # PipelineConfig.to_dict()
    tokenizer: TokenizerEntry
    tokenizer_backend: Mapping[str, Any]  # BackendChoice.to_dict(): which encoder made the ids, its self-check
    counts: fmt.Counts
    packing: PackingEntry
    rejects_by_reason: Mapping[str, int]
    shards: tuple[ShardInfo, ...]
    seq_len: int
    contract: Contract  # what the trainer must match (cook.contract)

    @property
    def packing_efficiency(self) -> float:
        packs = self.counts.packs
        return self.counts.tokens / (packs * self.seq_len) if packs else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": fmt.MANIFEST_SCHEMA_VERSION,
            "pack_schema_version": fmt.SCHEMA_VERSION,
            "cook_version": __version__,
            "pipeline": dict(self.pipeline),
            "tokenizer": self.tokenizer.to_dict(),
            "tokenizer_backend": dict(self.tokenizer_backend),
            "counts": self.counts.to_dict(),
            "packing_efficiency": self.packing_efficiency,
            "packing": self.packing.to_dict(),
            "rejects_by_reason": dict(sorted(self.rejects_by_reason.items())),
            "shards": [asdict(s) for s in self.shards],
            CONTRACT_KEY: self.contract.to_dict(),
        }
