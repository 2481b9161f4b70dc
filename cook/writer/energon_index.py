"""``.nv-meta/``: Energon's index, built while the shards are written, plus ``dataset.yaml``.

``energon prepare`` reads every tar header of every shard to build ``index.sqlite``; cook already
knows each member's place while it builds a tar (``ShardLayout``), so the rows go straight into
Energon's own ``SqliteIndexWriter`` as each shard is written, and finishing a run costs only the
sqlite indexes and three small files. The result holds exactly what ``energon prepare`` writes for
the same shards (one ``train`` split holding every shard in order; a test compares the two):

    index.sqlite   samples (key, offset, size) and sample_parts (part, content offset, size) rows
    .info.json     ``WebdatasetInfo``: Energon's version and each shard's pack count
    split.yaml     ``WebdatasetSplits``: the shard names, brace-collapsed as Energon does
    index.uuid     the dataset's identity for Energon's caches; here derived from the shards' sha256
                   (``energon prepare`` draws a random one), so the same shards get the same id

The work sqlite file is built under ``.cook-progress/`` and committed at every checkpoint (before
the run state is saved), so a resumed run keeps the rows of the shards it keeps and deletes the
rest. When the run finishes, ``.nv-meta/index.sqlite`` is built fresh from its rows in shard order
and renamed into place, so its bytes do not depend on how the run was interrupted and resumed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import uuid
from collections.abc import Sequence
from typing import Any

from cook import format as fmt
from cook.errors import interrupts_held
from cook.manifest import ShardInfo
from cook.writer.atomic import atomic_write
from cook.writer.shards import ShardLayout

# Energon's own statements (``SqliteIndexWriter.append_samples`` / ``append_parts``)
_INSERT_SAMPLES = (
    "INSERT INTO samples (tar_file_id, sample_key, sample_index, byte_offset, byte_size) VALUES (?, ?, ?, ?, ?)"
)
_INSERT_PARTS = (
    "INSERT INTO sample_parts (tar_file_id, sample_index, part_name, content_byte_offset, content_byte_size) "
    "VALUES (?, ?, ?, ?, ?)"
)


def progress_index_path(out_dir: str) -> str:
    """Where the index is built during a run (published to ``.nv-meta/`` when the run finishes)."""
    return os.path.join(out_dir, fmt.PROGRESS_DIR, fmt.INDEX_SQLITE)


def dataset_uuid(shards: list[ShardInfo]) -> str:
    """A version-4-shaped UUID from the shards' names and sha256: the same shards, the same id."""
    digest = hashlib.sha256("".join(f"{s.name}:{s.sha256}\n" for s in shards).encode()).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


class EnergonIndex:
    """Energon's ``index.sqlite`` rows, appended shard by shard; ``finish`` publishes ``.nv-meta/``."""

    def __init__(self, out_dir: str, kept_shards: int) -> None:
        self.out_dir = out_dir
        self.work_path = progress_index_path(out_dir)
        self.kept_shards = kept_shards
        self._writer: Any = None
        # Energon (torch under it: ~1.4 s) is imported by ``open``, on the driver's own thread, once the
        # first jobs are out (DatasetWriter.open_index). It used to be imported on a daemon thread
        # while the run started; an interrupt then left that thread mid-import at exit, which can
        # abort the interpreter.

    def _open(self) -> Any:
        with interrupts_held():  # torch's native start-up under Energon: an interrupt there aborts
            from megatron.energon.epathlib import EPath
            from megatron.energon.flavors.webdataset.indexing import SqliteIndexWriter

        os.makedirs(os.path.dirname(self.work_path), exist_ok=True)
        if self.kept_shards == 0:
            if os.path.exists(self.work_path):
                os.unlink(self.work_path)
            return SqliteIndexWriter(EPath(self.work_path))  # creates the tables
        if not os.path.exists(self.work_path):
            raise RuntimeError(f"cannot resume: {self.work_path} is missing; rerun with --overwrite")
        # resume: open without resetting the tables, drop the rows of the shards rolled back
        writer = SqliteIndexWriter(EPath(self.work_path), enable_sample_tables=False, reset_tables=False)
        for table in ("samples", "sample_parts"):
            writer.db.execute(f"DELETE FROM {table} WHERE tar_file_id >= ?", (self.kept_shards,))
        writer.enable_sample_tables = True  # so close() creates the lookup indexes
        return writer

    def open(self) -> None:
        if self._writer is None:
            self._writer = self._open()

    @property
    def writer(self) -> Any:
        self.open()
        return self._writer

    def add_shards(self, shards: Sequence[tuple[int, ShardLayout]]) -> None:
        """Add the rows of ``shards`` (shard index, layout), two ``executemany`` in all: the rows
        Energon's ``append_samples`` and ``append_parts`` insert, built without a Python object per row."""
        samples = []
        for shard, layout in shards:
            offsets = layout.offsets
            samples += [(shard, key, i, offsets[i], offsets[i + 1] - offsets[i]) for i, key in enumerate(layout.keys)]
        parts = [(shard, i, part, offset, size) for shard, layout in shards for i, part, offset, size in layout.parts]
        if not samples and not parts:
            return
        db = self.writer.db
        db.executemany(_INSERT_SAMPLES, samples)
        db.executemany(_INSERT_PARTS, parts)

    def commit(self) -> None:
        """Make every row added so far durable (called before the run state that counts them)."""
        if self._writer is not None:
            self._writer.db.commit()

    def finish(self, shards: list[ShardInfo]) -> None:
        """Write ``.nv-meta/``: ``dataset.yaml`` always, Energon's index files when there are shards."""
        meta = os.path.join(self.out_dir, fmt.NV_META_DIR)
        os.makedirs(meta, exist_ok=True)
        if shards:
            self._publish_index(meta, shards)
        atomic_write(os.path.join(meta, fmt.DATASET_YAML), fmt.dataset_yaml())

    def _publish_index(self, meta: str, shards: list[ShardInfo]) -> None:
        import yaml

        with interrupts_held():  # a finish whose shards were all written before: Energon is not imported yet
            from megatron.energon import __version__
            from megatron.energon.bracecollapse import collapse
            from megatron.energon.flavors.webdataset.structs import WebdatasetInfo, WebdatasetSplits
            from megatron.energon.typed_converter import to_json_object

        self.commit()
        self._build_published(os.path.join(meta, fmt.INDEX_SQLITE))
        info = WebdatasetInfo(energon_version=__version__, shard_counts={s.name: s.packs for s in shards})
        atomic_write(os.path.join(meta, fmt.INFO_JSON), json.dumps(to_json_object(info), indent=2))
        splits = WebdatasetSplits(split_parts={"train": collapse([s.name for s in shards], keep_order=True)})
        atomic_write(os.path.join(meta, fmt.SPLIT_YAML), yaml.dump(to_json_object(splits), sort_keys=False))
        atomic_write(os.path.join(meta, fmt.INDEX_UUID), dataset_uuid(shards))

    def _build_published(self, path: str) -> None:
        """A fresh ``index.sqlite`` from the work index's rows in shard order, written atomically.

        Built the same way however the run went (resumed, rows deleted and added again, finish
        interrupted and repeated), so the published file's bytes depend only on the shards.
        """
        from megatron.energon.epathlib import EPath
        from megatron.energon.flavors.webdataset.indexing import SqliteIndexWriter

        tmp = f"{path}.tmp-{os.getpid()}"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        fresh = SqliteIndexWriter(EPath(tmp))
        fresh.db.execute("ATTACH DATABASE ? AS work", (self.work_path,))
        fresh.db.execute("INSERT INTO samples SELECT * FROM work.samples ORDER BY tar_file_id, sample_index")
        fresh.db.execute(
            "INSERT INTO sample_parts SELECT * FROM work.sample_parts "
            "ORDER BY tar_file_id, sample_index, content_byte_offset"
        )
        fresh.db.commit()
        fresh.db.execute("DETACH DATABASE work")
        fresh.close()  # creates the lookup indexes and commits
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
