"""Test data for the reader: hand-built packs (crude Energon samples of raw member bytes) and tiny
datasets cooked in-process (``cook run --workers 0``)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from cook import format as fmt
from cook.cli.main import main
from tests.conftest import pipeline_dict, write_jsonl

PAD_ID = 0


def crude_pack(
    sequences: list[tuple[list[int], list[int]]],
    pad_multiple: int,
    key: str = "pack-000000000",
    **extra: np.ndarray,
) -> dict[str, Any]:
    """A crude sample as Energon hands it to the cooker: ``(ids, target mask)`` per sequence, each padded."""
    lengths = np.array([len(ids) for ids, _ in sequences])
    padded = -(-lengths // pad_multiple) * pad_multiple
    cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    cu_padded = np.concatenate([[0], np.cumsum(padded)]).astype(np.int32)
    ids = np.full(cu_padded[-1], PAD_ID, dtype=np.int32)
    mask = np.zeros(cu_padded[-1], dtype=np.uint8)
    for (seq_ids, seq_mask), start in zip(sequences, cu_padded[:-1], strict=True):
        ids[start : start + len(seq_ids)] = seq_ids
        mask[start : start + len(seq_ids)] = seq_mask
    meta = {
        "schema_version": fmt.SCHEMA_VERSION,
        "sequences": [
            {"source": f"t.jsonl#{i + 1}", "length": len(s), "targets": int(sum(m)), "media": []}
            for i, (s, m) in enumerate(sequences)
        ],
    }
    arrays = {fmt.INPUT_IDS: ids, fmt.LOSS_MASK: mask, fmt.CU_SEQLENS: cu, fmt.CU_SEQLENS_PADDED: cu_padded, **extra}
    crude: dict[str, Any] = {name: fmt.npy_bytes(array) for name, array in arrays.items()}
    crude[fmt.META] = json.dumps(meta).encode()
    crude["__key__"] = key
    crude["__restore_key__"] = ("Webdataset", 0)
    return crude


def conversations(count: int, words: int = 6) -> list[dict[str, Any]]:
    return [
        {
            "messages": [
                {"role": "user", "content": f"Question {i}: " + "why " * (i % words)},
                {"role": "assistant", "content": f"Answer {i}. " + "because " * (i % (words + 3))},
            ]
        }
        for i in range(count)
    ]


def cook_jsonl(tmp: Path, rows: list[dict[str, Any]], seq_len: int, shard_size: int, pad_multiple: int = 8) -> Path:
    """Cook ``rows`` in-process into ``tmp / "out"``; returns the dataset directory."""
    write_jsonl(tmp / "raw.jsonl", rows)
    data = pipeline_dict(
        str(tmp / "raw.jsonl"),
        str(tmp / "out"),
        packing={"seq_len": seq_len, "pad_multiple": pad_multiple},
        output={"shard_size": shard_size},
    )
    (tmp / "pipeline.yaml").write_text(yaml.safe_dump(data))
    assert main(["run", str(tmp / "pipeline.yaml"), "--workers", "0", "--quiet"]) == 0
    return tmp / "out"


def stored_packs(dataset: Path) -> dict[str, dict[str, bytes]]:
    """Every pack's members, read straight from the shards with tarfile (not through the reader)."""
    manifest = json.loads((dataset / fmt.MANIFEST_NAME).read_text())
    packs: dict[str, dict[str, bytes]] = {}
    for shard in manifest["shards"]:
        with tarfile.open(dataset / shard["name"]) as tar:
            for member in tar:
                key, _, name = member.name.partition(".")
                handle = tar.extractfile(member)
                assert handle is not None
                packs.setdefault(key, {})[name] = handle.read()
    return packs
