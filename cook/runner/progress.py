"""Progress on stderr: a live bar on a terminal, a line every ``interval_s`` otherwise."""

from __future__ import annotations

import sys
import time
from typing import Any


class Progress:
    def __init__(self, total_units: int, interval_s: float = 10.0, enabled: bool = True) -> None:
        self.records = self.tokens = self.rejects = self.units = 0
        self.total_units = total_units
        self.start = time.monotonic()
        self._last_line = self.start
        self._interval_s = interval_s
        self._enabled = enabled
        self._bar: Any = None
        if enabled and sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=total_units, unit="unit", file=sys.stderr, dynamic_ncols=True)

    def update(self, records: int, tokens: int, rejects: int) -> None:
        self.units += 1
        self.records += records
        self.tokens += tokens
        self.rejects += rejects
        if self._bar is not None:
            self._bar.set_postfix(records=self.records, tokens=self.tokens, rejects=self.rejects, refresh=False)
            self._bar.update(1)
        elif self._enabled and (time.monotonic() - self._last_line >= self._interval_s):
            self._last_line = time.monotonic()
            print(self.line(), file=sys.stderr, flush=True)

    def line(self) -> str:
        elapsed = time.monotonic() - self.start
        rate = self.records / elapsed if elapsed else 0.0
        left = (self.total_units - self.units) * elapsed / self.units if self.units else float("nan")
        return (
            f"cook: {self.units}/{self.total_units} units, {self.records} records ({rate:.0f}/s), "
            f"{self.tokens} tokens, {self.rejects} rejects, ETA {left:.0f}s"
        )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
