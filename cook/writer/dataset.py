"""DatasetWriter: the driver's side of the output directory, behind one interface.

Workers write the shards and their ``.tar.idx`` (``cook.writer.shards``). The driver writes the
rest through this facade: ``rejects.jsonl``, Energon's index rows (``cook.writer.energon_index``;
queued as shards are committed and inserted in bulk at each ``sync``), ``.nv-meta/`` and
``cook_manifest.json``.

``publish`` finishes a run in steps that can each be interrupted and repeated with the same result:

    1. ``.nv-meta/`` (index.sqlite rebuilt from the work index, .info.json, split.yaml, index.uuid,
       dataset.yaml), each file written atomically
    2. ``rejects.jsonl.partial`` renamed to ``rejects.jsonl`` (a resumed run renames it back first:
       ``cook.writer.rejects.roll_back_rejects``)
    3. ``cook_manifest.json``, last: its presence marks the run finished

The caller removes its progress directory after step 3.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

from cook.manifest import Manifest, ShardInfo
from cook.types import RejectRecord
from cook.writer.energon_index import EnergonIndex
from cook.writer.manifest import write_manifest
from cook.writer.rejects import RejectsWriter
from cook.writer.shards import ShardLayout

QUEUED_SHARDS = 64  # index rows of this many shards are queued at most before they are inserted


class DatasetWriter:
    def __init__(self, out_dir: str, kept_shards: int, rejects_bytes: int, by_reason: dict[str, int]) -> None:
        self.out_dir = out_dir
        self.rejects = RejectsWriter(out_dir, rejects_bytes, by_reason)
        self.index = EnergonIndex(out_dir, kept_shards)
        self._rows: list[tuple[int, ShardLayout]] = []  # shards committed since the last sync

    def add_rejects(self, records: Iterable[RejectRecord]) -> None:
        self.rejects.write(records)

    def rejects_position(self) -> tuple[int, dict[str, int]]:
        """Bytes written to the rejects file so far and the count per reason (no flush)."""
        return self.rejects.tell(), dict(self.rejects.by_reason)

    def open_index(self) -> None:
        """Open Energon's index writer unless it is open (the first time imports Energon and torch:
        ~1.4 s): the driver calls it while the first jobs cook, not at the first shard commit, when
        the workers would wait on it."""
        self.index.open()

    def add_shard(self, shard_index: int, layout: ShardLayout) -> None:
        """Queue the shard's index rows: they go in, with the rows of every shard queued since, at ``sync``
        or once ``QUEUED_SHARDS`` wait (inserted then, made durable at ``sync``: memory stays bounded
        between the driver's timed checkpoints)."""
        self._rows.append((shard_index, layout))
        if len(self._rows) >= QUEUED_SHARDS:
            self._add_rows()

    def _add_rows(self) -> None:
        if self._rows:
            self.index.add_shards(self._rows)
            self._rows = []

    def sync(self) -> None:
        """Make the rejects and index rows durable; called before the run state that counts them."""
        self.rejects.sync()
        self._add_rows()
        self.index.commit()

    def publish(self, shards: list[ShardInfo], manifest: Manifest) -> None:
        self._add_rows()
        self.index.finish(shards)
        self.rejects.close()
        write_manifest(self.out_dir, manifest)

    def close(self) -> None:
        """Leave without publishing (error or interrupt): files stay for a resumed run."""
        with contextlib.suppress(ValueError, OSError):
            self.rejects.sync()
