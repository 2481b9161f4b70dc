"""``.nv-meta/``: Energon's index, built from rows each shard's writer leaves, plus ``dataset.yaml``.

``energon prepare`` reads every tar header of every shard to build ``index.sqlite``. cook's worker
already knows each member's place while it builds a tar (``ShardLayout``), so it writes the shard's
rows beside the run's progress (``cook.writer.index_rows``: ``.cook-progress/index-rows/<shard>.json``,
atomically, before it reports the shard). Once every shard is committed, one worker job (``publish_index``)
builds ``.nv-meta/`` from those files in shard order. The driver never touches a row: its cost does
not grow with packs or members. The result holds exactly what ``energon prepare`` writes for the
same shards (one ``train`` split holding every shard in order; a test compares the two):

    index.sqlite   samples (key, offset, size) and sample_parts (part, content offset, size) rows
    .info.json     ``WebdatasetInfo``: Energon's version and each shard's pack count
    split.yaml     ``WebdatasetSplits``: the shard names, brace-collapsed as Energon does
    index.uuid     the dataset's identity for Energon's caches; here derived from the shards' sha256
                   (``energon prepare`` draws a random one), so the same shards get the same id
    dataset.yaml   cook's sample type (``format.dataset_yaml``)

A shard's rows file carries its manifest entry too, so the publishing worker needs nothing but the
shard count. ``index.sqlite`` is built fresh under a temporary name and renamed into place: its bytes
depend only on the shards, however the run was interrupted and resumed, and a publish interrupted
midway is repeated with the same result.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import uuid

from cook import format as fmt
from cook.errors import interrupts_held
from cook.manifest import ShardInfo
from cook.writer.atomic import atomic_write
from cook.writer.index_rows import read_rows

# Energon's own statements (``SqliteIndexWriter.append_samples`` / ``append_parts``)
_INSERT_SAMPLES = (
    "INSERT INTO samples (tar_file_id, sample_key, sample_index, byte_offset, byte_size) VALUES (?, ?, ?, ?, ?)"
)
_INSERT_PARTS = (
    "INSERT INTO sample_parts (tar_file_id, sample_index, part_name, content_byte_offset, content_byte_size) "
    "VALUES (?, ?, ?, ?, ?)"
)


def dataset_uuid(shards: list[ShardInfo]) -> str:
    """A version-4-shaped UUID from the shards' names and sha256: the same shards, the same id."""
    digest = hashlib.sha256("".join(f"{s.name}:{s.sha256}\n" for s in shards).encode()).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


def publish_index(out_dir: str, shard_count: int) -> None:
    """Write ``.nv-meta/`` for shards ``[0, shard_count)`` from their rows files: Energon's index files
    when there are shards, ``dataset.yaml`` always; each file atomically."""
    meta = os.path.join(out_dir, fmt.NV_META_DIR)
    os.makedirs(meta, exist_ok=True)
    if shard_count:
        shards = build_sqlite(out_dir, shard_count, os.path.join(meta, fmt.INDEX_SQLITE))
        _write_split(meta, shards)
    atomic_write(os.path.join(meta, fmt.DATASET_YAML), fmt.dataset_yaml())


def build_sqlite(out_dir: str, shard_count: int, path: str) -> list[ShardInfo]:
    """``index.sqlite`` at ``path``, fresh, from the rows of shards ``[0, shard_count)`` in shard order,
    written atomically; returns the shards' manifest entries."""
    with interrupts_held():  # torch's native start-up under Energon: an interrupt there aborts
        from megatron.energon.epathlib import EPath
        from megatron.energon.flavors.webdataset.indexing import SqliteIndexWriter

    tmp = f"{path}.tmp-{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    index = SqliteIndexWriter(EPath(tmp))  # creates the tables
    shards = []
    for shard in range(shard_count):
        info, layout = read_rows(out_dir, shard)
        offsets = layout.offsets
        samples = [(shard, key, i, offsets[i], offsets[i + 1] - offsets[i]) for i, key in enumerate(layout.keys)]
        index.db.executemany(_INSERT_SAMPLES, samples)
        index.db.executemany(_INSERT_PARTS, [(shard, *part) for part in layout.parts])
        shards.append(info)
    index.close()  # creates the lookup indexes and commits
    with open(tmp, "rb+") as handle:
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    return shards


def _write_split(meta: str, shards: list[ShardInfo]) -> None:
    import yaml

    with interrupts_held():
        from megatron.energon import __version__
        from megatron.energon.bracecollapse import collapse
        from megatron.energon.flavors.webdataset.structs import WebdatasetInfo, WebdatasetSplits
        from megatron.energon.typed_converter import to_json_object

    info = WebdatasetInfo(energon_version=__version__, shard_counts={s.name: s.packs for s in shards})
    atomic_write(os.path.join(meta, fmt.INFO_JSON), json.dumps(to_json_object(info), indent=2))
    splits = WebdatasetSplits(split_parts={"train": collapse([s.name for s in shards], keep_order=True)})
    atomic_write(os.path.join(meta, fmt.SPLIT_YAML), yaml.dump(to_json_object(splits), sort_keys=False))
    atomic_write(os.path.join(meta, fmt.INDEX_UUID), dataset_uuid(shards))
