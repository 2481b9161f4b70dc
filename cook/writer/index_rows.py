"""Each shard's Energon index rows, left by the worker that wrote it, for ``energon_index.publish_index``.

    .cook-progress/index-rows/shard-NNNNNN.tar.json   {"info": the shard's manifest entry,
                                                      "keys", "offsets", "parts": its ShardLayout}

Written atomically after the shard and its ``.tar.idx``, before the worker reports the shard, so a
committed shard always has its rows. A resumed run keeps the rows files of the shards it keeps
(``rows_missing`` checks them) and removes the rest (``remove_rows_from``); the shards it writes
again get theirs again, byte for byte.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict

from cook import format as fmt
from cook.manifest import ShardInfo
from cook.writer.atomic import atomic_write
from cook.writer.shards import ShardLayout

ROWS_DIR = "index-rows"  # in the progress directory: one JSON file per shard written


def rows_dir(out_dir: str) -> str:
    return os.path.join(out_dir, fmt.PROGRESS_DIR, ROWS_DIR)


def rows_path(out_dir: str, shard_index: int) -> str:
    """Where the worker that writes shard ``shard_index`` leaves its rows."""
    return os.path.join(rows_dir(out_dir), fmt.shard_name(shard_index) + ".json")


def write_rows(out_dir: str, shard_index: int, info: ShardInfo, layout: ShardLayout) -> None:
    """Leave shard ``shard_index``'s manifest entry and Energon rows for ``publish_index`` (atomically)."""
    body = {"info": asdict(info), "keys": layout.keys, "offsets": layout.offsets, "parts": layout.parts}
    os.makedirs(rows_dir(out_dir), exist_ok=True)
    atomic_write(rows_path(out_dir, shard_index), json.dumps(body, separators=(",", ":")))


def read_rows(out_dir: str, shard_index: int) -> tuple[ShardInfo, ShardLayout]:
    with open(rows_path(out_dir, shard_index), encoding="utf-8") as handle:
        body = json.load(handle)
    parts = tuple((i, part, offset, size) for i, part, offset, size in body["parts"])
    return ShardInfo(**body["info"]), ShardLayout(tuple(body["keys"]), tuple(body["offsets"]), parts)


def rows_missing(out_dir: str, shard_count: int) -> list[str]:
    """The rows files of shards ``[0, shard_count)`` that are not there (a resumed run needs them all)."""
    try:
        present = set(os.listdir(rows_dir(out_dir)))
    except FileNotFoundError:
        present = set()
    names = (os.path.basename(rows_path(out_dir, i)) for i in range(shard_count))
    return [name for name in names if name not in present]


def remove_rows_from(out_dir: str, kept: int) -> None:
    """Remove the rows files of shards ``kept`` and after (a resumed run writes them again)."""
    keep = {os.path.basename(rows_path(out_dir, i)) for i in range(kept)}
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(rows_dir(out_dir)):
            if name not in keep:
                os.unlink(os.path.join(rows_dir(out_dir), name))
