"""``cook_manifest.json``: written last, atomically; its presence marks a finished run (SPEC §8)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from typing import Any

from cook import __version__
from cook import format as fmt
from cook.contract import CONTRACT_KEY, Contract
from cook.writer.atomic import atomic_write
from cook.writer.shards import ShardInfo

MANIFEST_SCHEMA_VERSION = 1


def build_manifest(
    *,
    pipeline: dict[str, Any],
    tokenizer_path: str,
    tokenizer_sha256: dict[str, str],
    vocab_size: int,
    pad_id: int,
    control_ids: dict[str, int],
    counts: dict[str, int],
    packing: dict[str, Any],
    rejects_by_reason: dict[str, int],
    shards: list[ShardInfo],
    seq_len: int,
    contract: Contract,
) -> dict[str, Any]:
    packs = counts["packs"]
    return {
        "schema_version": MANIFEST_SCHEMA_VERSION,
        "pack_schema_version": fmt.SCHEMA_VERSION,
        "cook_version": __version__,
        "pipeline": pipeline,
        "tokenizer": {
            "path": tokenizer_path,
            "sha256": tokenizer_sha256,
            "vocab_size": vocab_size,
            "pad_id": pad_id,
            "control_ids": dict(sorted(control_ids.items())),
        },
        "counts": counts,
        "packing_efficiency": counts["tokens"] / (packs * seq_len) if packs else 0.0,
        "packing": packing,
        "rejects_by_reason": dict(sorted(rejects_by_reason.items())),
        "shards": [asdict(s) for s in shards],
        CONTRACT_KEY: contract.to_dict(),  # what the trainer must match (cook.contract)
    }


def write_manifest(out_dir: str, manifest: dict[str, Any]) -> None:
    text = json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    atomic_write(os.path.join(out_dir, fmt.MANIFEST_NAME), text)
