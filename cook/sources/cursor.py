"""How far a reader has read its unit, for progress only: ``done`` of ``total``, in the reader's own
measure (bytes of a JSONL span, JSON array or tar file; rows of a Parquet span).

A reader given a ``Cursor`` sets ``total`` when it starts and moves ``done`` before it yields each
record, so the share of the unit read so far is ``done / total``. Nothing a reader yields depends on it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Cursor:
    done: int = 0
    total: int = 0

    @property
    def share(self) -> float:
        """``done / total`` in [0, 1]; 0 while ``total`` is unknown."""
        return min(1.0, self.done / self.total) if self.total > 0 else 0.0
