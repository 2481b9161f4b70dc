"""DatasetWriter: the driver's side of the output directory, behind one interface.

Workers write the shards, their ``.tar.idx`` and their Energon index rows (``cook.writer.shards``,
``cook.writer.energon_index.write_rows``), and one worker job publishes ``.nv-meta/`` from those rows
(``energon_index.publish_index``) once every shard is committed. The driver writes the rest through
this facade: ``rejects.jsonl`` and ``cook_manifest.json``.

A run finishes in steps that can each be interrupted and repeated with the same result:

    1. ``.nv-meta/`` (the publishing worker job: index.sqlite built from the rows, .info.json,
       split.yaml, index.uuid, dataset.yaml), each file written atomically
    2. ``rejects.jsonl.partial`` renamed to ``rejects.jsonl`` (a resumed run renames it back first:
       ``cook.writer.rejects.roll_back_rejects``)
    3. ``cook_manifest.json``, last: its presence marks the run finished

Steps 2 and 3 are ``publish``; the caller removes its progress directory after step 3.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

from cook.manifest import Manifest
from cook.writer.manifest import write_manifest
from cook.writer.rejects import RejectsWriter


class DatasetWriter:
    def __init__(self, out_dir: str, rejects_bytes: int, by_reason: dict[str, int]) -> None:
        self.out_dir = out_dir
        self.rejects = RejectsWriter(out_dir, rejects_bytes, by_reason)

    def add_rejects(self, lines: str, by_reason: Iterable[tuple[str, int]]) -> None:
        """Append a unit's reject lines (``rejects.reject_line``s, made by its worker) and their counts."""
        self.rejects.write(lines, by_reason)

    def rejects_position(self) -> tuple[int, dict[str, int]]:
        """Bytes written to the rejects file so far and the count per reason (no flush)."""
        return self.rejects.tell(), dict(self.rejects.by_reason)

    def sync(self) -> None:
        """Make the rejects durable; called before the run state that counts them."""
        self.rejects.sync()

    def publish(self, manifest: Manifest) -> None:
        """Steps 2 and 3: the rejects file under its final name, then the manifest."""
        self.rejects.close()
        write_manifest(self.out_dir, manifest)

    def close(self) -> None:
        """Leave without publishing (error or interrupt): files stay for a resumed run."""
        with contextlib.suppress(ValueError, OSError):
            self.rejects.sync()
