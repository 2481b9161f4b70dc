"""``cook_manifest.json``: written last, atomically; its presence marks a finished run (SPEC §8).

The file is ``json.dumps(manifest.to_dict(), indent=2, sort_keys=True, ensure_ascii=False)`` and a
newline. Its ``shards`` list is nearly all of a big run's manifest, one entry a shard, and ``json``
with ``indent`` encodes in Python: with ``asdict`` 24.7 µs a shard, the driver's largest cost per
shard (bench_driver). So the shards are encoded by orjson, ``SHARDS_PER_PIECE`` at a time, in the
same layout (1.9 µs a shard), and the
rest (pipeline, counts, packing: strings of any kind, floats) by ``json``; a test holds the two
byte-identical. With a million shards the file is never one string in memory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence

import orjson

from cook import format as fmt
from cook.manifest import Manifest, ShardInfo
from cook.writer.atomic import atomic_open

SHARDS_PER_PIECE = 4096  # shard entries encoded and written at a time (~0.8 MB)
_STAND_IN = "\0shards\0"  # the shards' place while the rest is encoded
_AT = '\n  "shards": ' + json.dumps(_STAND_IN)  # a top-level key: the only line indented by exactly 2


def write_manifest(out_dir: str, manifest: Manifest) -> None:
    """Write ``out_dir``'s manifest atomically, its shards a piece at a time."""
    head = manifest.to_dict(shards=False)
    head["shards"] = _STAND_IN
    before, after = json.dumps(head, indent=2, sort_keys=True, ensure_ascii=False).split(_AT)
    with atomic_open(os.path.join(out_dir, fmt.MANIFEST_NAME)) as handle:
        handle.write(f'{before}\n  "shards": '.encode())
        for piece in _shard_pieces(manifest.shards):
            handle.write(piece)
        handle.write(f"{after}\n".encode())


def _shard_pieces(shards: Sequence[ShardInfo]) -> Iterator[bytes]:
    """The ``shards`` list as ``json`` writes it at depth 1 of ``indent=2``: ``[]``, or ``[``, the
    entries (4 spaces in, their keys 6, sorted) joined by ``,``, and ``]`` 2 spaces in."""
    if not shards:
        yield b"[]"
        return
    yield b"[\n"
    for start in range(0, len(shards), SHARDS_PER_PIECE):
        entries = [shard.to_dict() for shard in shards[start : start + SHARDS_PER_PIECE]]
        body = orjson.dumps(entries, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)  # [\n  {...},\n  {...}\n]
        yield (b",\n" if start else b"") + b"  " + body[2:-2].replace(b"\n", b"\n  ")
    yield b"\n  ]"
