"""``rejects.jsonl``: one line per rejected record, in input order, finalized atomically."""

from __future__ import annotations

import contextlib
import json
import os

from cook import format as fmt
from cook.types import RejectRecord


def reject_line(record: RejectRecord) -> str:
    body = {"source": record.source, "reason": record.reason.value, "detail": record.detail}
    return json.dumps(body, ensure_ascii=False, sort_keys=True) + "\n"


def partial_path(out_dir: str) -> str:
    """Where a run writes its rejects; ``DatasetWriter.publish`` renames it to ``rejects.jsonl``."""
    return os.path.join(out_dir, fmt.REJECTS_NAME + ".partial")


def roll_back_rejects(out_dir: str, length: int) -> None:
    """Before resuming: rename back a ``rejects.jsonl`` that an interrupted finish already renamed,
    then cut the partial file to the ``length`` bytes the resumed state counts."""
    final, partial = os.path.join(out_dir, fmt.REJECTS_NAME), partial_path(out_dir)
    if os.path.exists(final) and not os.path.exists(partial):
        os.replace(final, partial)
    with contextlib.suppress(FileNotFoundError), open(partial, "r+b") as handle:
        handle.truncate(length)
