"""``rejects.jsonl``: one line per rejected record, in input order, finalized atomically."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable

from cook import format as fmt
from cook.types import RejectRecord


def reject_line(record: RejectRecord) -> str:
    body = {"source": record.source, "reason": record.reason.value, "detail": record.detail}
    return json.dumps(body, ensure_ascii=False, sort_keys=True) + "\n"


class RejectsWriter:
    """Appends to ``rejects.jsonl.partial``; ``close`` renames it to ``rejects.jsonl``."""

    def __init__(self, out_dir: str) -> None:
        self.path = os.path.join(out_dir, fmt.REJECTS_NAME)
        self._handle = open(self.path + ".partial", "w", encoding="utf-8")  # noqa: SIM115
        self.by_reason: Counter[str] = Counter()

    def write(self, records: Iterable[RejectRecord]) -> None:
        for record in records:
            self._handle.write(reject_line(record))
            self.by_reason[record.reason.value] += 1

    @property
    def count(self) -> int:
        return sum(self.by_reason.values())

    def close(self) -> None:
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._handle.close()
        os.replace(self.path + ".partial", self.path)
