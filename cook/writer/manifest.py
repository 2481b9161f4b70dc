"""``cook_manifest.json``: written last, atomically; its presence marks a finished run (SPEC §8)."""

from __future__ import annotations

import json
import os

from cook import format as fmt
from cook.manifest import Manifest
from cook.writer.atomic import atomic_open

_PIECE = 1 << 16  # characters of JSON written at a time


def write_manifest(out_dir: str, manifest: Manifest) -> None:
    """Stream the manifest's JSON into the file a piece at a time: with a million shards it is never
    one string (and its encoded copy) in memory."""
    encoder = json.JSONEncoder(indent=2, sort_keys=True, ensure_ascii=False)
    with atomic_open(os.path.join(out_dir, fmt.MANIFEST_NAME)) as handle:
        piece: list[str] = []
        size = 0
        for chunk in encoder.iterencode(manifest.to_dict()):
            piece.append(chunk)
            size += len(chunk)
            if size >= _PIECE:
                handle.write("".join(piece).encode("utf-8"))
                piece, size = [], 0
        piece.append("\n")
        handle.write("".join(piece).encode("utf-8"))
