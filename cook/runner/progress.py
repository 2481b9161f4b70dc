"""Progress on stderr: a live bar on a terminal, a line every ``interval_s`` otherwise.

It counts input bytes (every unit's span is known from the plan, so the bar has a true total and
an ETA however records are sized), with records, tokens and rejects beside it.
"""

from __future__ import annotations

import sys
import time
from typing import Any


class Progress:
    def __init__(self, total_bytes: int, interval_s: float = 10.0, enabled: bool = True) -> None:
        self.records = self.tokens = self.rejects = self.done_bytes = 0
        self.total_bytes = total_bytes
        self.start = time.monotonic()
        self._last_line = self.start
        self._interval_s = interval_s
        self._enabled = enabled
        self._bar: Any = None
        if enabled and sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(
                total=total_bytes, unit="B", unit_scale=True, file=sys.stderr, dynamic_ncols=True, desc="cook"
            )

    def update(self, unit_bytes: int, records: int, tokens: int, rejects: int) -> None:
        self.done_bytes += unit_bytes
        self.records += records
        self.tokens += tokens
        self.rejects += rejects
        if self._bar is not None:
            self._bar.set_postfix(records=self.records, tokens=self.tokens, rejects=self.rejects, refresh=False)
            self._bar.update(unit_bytes)
        elif self._enabled and (time.monotonic() - self._last_line >= self._interval_s):
            self._last_line = time.monotonic()
            print(self.line(), file=sys.stderr, flush=True)

    def line(self) -> str:
        elapsed = time.monotonic() - self.start
        rate = self.records / elapsed if elapsed else 0.0
        share = self.done_bytes / self.total_bytes if self.total_bytes else 1.0
        left = elapsed * (1 - share) / share if share else float("nan")
        return (
            f"cook: {share:.0%} of {self.total_bytes / 1e6:,.1f} MB, {self.records} records ({rate:.0f}/s), "
            f"{self.tokens} tokens, {self.rejects} rejects, ETA {left:.0f}s"
        )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
