"""``rejects.jsonl``: one line per rejected record, in input order, finalized atomically."""

from __future__ import annotations

import contextlib
import json
import os
from collections import Counter
from collections.abc import Iterable

from cook import format as fmt
from cook.types import RejectRecord


def reject_line(record: RejectRecord) -> str:
    body = {"source": record.source, "reason": record.reason.value, "detail": record.detail}
    return json.dumps(body, ensure_ascii=False, sort_keys=True) + "\n"


def partial_path(out_dir: str) -> str:
    """Where a run writes its rejects; ``RejectsWriter.close`` renames it to ``rejects.jsonl``."""
    return os.path.join(out_dir, fmt.REJECTS_NAME + ".partial")


def roll_back_rejects(out_dir: str, length: int) -> None:
    """Before resuming: rename back a ``rejects.jsonl`` that an interrupted finish already renamed,
    then cut the partial file to the ``length`` bytes the resumed state counts."""
    final, partial = os.path.join(out_dir, fmt.REJECTS_NAME), partial_path(out_dir)
    if os.path.exists(final) and not os.path.exists(partial):
        os.replace(final, partial)
    with contextlib.suppress(FileNotFoundError), open(partial, "r+b") as handle:
        handle.truncate(length)


class RejectsWriter:
    """Appends to ``rejects.jsonl.partial``; ``close`` renames it to ``rejects.jsonl``.

    ``resume_bytes``/``by_reason`` continue a file a resumed run already truncated to its last state.
    """

    def __init__(self, out_dir: str, resume_bytes: int = 0, by_reason: dict[str, int] | None = None) -> None:
        self.path, self.partial = os.path.join(out_dir, fmt.REJECTS_NAME), partial_path(out_dir)
        self._handle = open(self.partial, "ab" if resume_bytes else "wb")  # noqa: SIM115
        self.by_reason: Counter[str] = Counter(by_reason or {})

    def write(self, lines: str, by_reason: Iterable[tuple[str, int]]) -> None:
        """Append ``lines`` (``reject_line``s, made by a worker) and count them by reason."""
        self._handle.write(lines.encode("utf-8"))
        for reason, n in by_reason:
            self.by_reason[reason] += n

    @property
    def count(self) -> int:
        return sum(self.by_reason.values())

    def tell(self) -> int:
        """Bytes written so far (buffered or not)."""
        return self._handle.tell()

    def sync(self) -> int:
        """Flush to disk; returns the file's length, for the resume state."""
        self._handle.flush()
        os.fsync(self._handle.fileno())
        return self._handle.tell()

    def close(self) -> None:
        self.sync()
        self._handle.close()
        os.replace(self.partial, self.path)
