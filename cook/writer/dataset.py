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
import os
from collections import Counter
from collections.abc import Iterable

from cook import format as fmt
from cook.manifest import Manifest
from cook.writer.manifest import write_manifest
from cook.writer.rejects import partial_path


class DatasetWriter:
    """Appends to ``rejects.jsonl.partial`` (``rejects_bytes``/``by_reason`` continue a file a resumed run
    already truncated to its last state); ``publish`` renames it to ``rejects.jsonl``, then writes the manifest."""

    def __init__(self, out_dir: str, rejects_bytes: int, by_reason: dict[str, int]) -> None:
        self.out_dir = out_dir
        self.path, self.partial = os.path.join(out_dir, fmt.REJECTS_NAME), partial_path(out_dir)
        self._handle = open(self.partial, "ab" if rejects_bytes else "wb")  # noqa: SIM115
        self.by_reason: Counter[str] = Counter(by_reason)

    def add_rejects(self, lines: str, by_reason: Iterable[tuple[str, int]]) -> None:
        """Append a unit's reject lines (``rejects.reject_line``s, made by its worker) and their counts."""
        self._handle.write(lines.encode("utf-8"))
        for reason, n in by_reason:
            self.by_reason[reason] += n

    def rejects_position(self) -> tuple[int, dict[str, int]]:
        """Bytes written to the rejects file so far (buffered or not) and the count per reason (no flush)."""
        return self._handle.tell(), dict(self.by_reason)

    def sync(self) -> None:
        """Make the rejects durable; called before the run state that counts them."""
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def publish(self, manifest: Manifest) -> None:
        """Steps 2 and 3: the rejects file under its final name, then the manifest."""
        self._close_rejects()
        write_manifest(self.out_dir, manifest)

    def _close_rejects(self) -> None:
        self.sync()
        self._handle.close()
        os.replace(self.partial, self.path)

    def close(self) -> None:
        """Leave without publishing (error or interrupt): files stay for a resumed run."""
        with contextlib.suppress(ValueError, OSError):
            self.sync()
