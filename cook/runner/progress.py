"""Progress of long work on stderr (SPEC §2): a live bar on a terminal, a line every ``interval_s``
otherwise. The one progress display of the CLI: ``cook run`` counts input bytes, ``cook validate``
shards.

``update(amount, **counts)`` moves the bar by ``amount`` of ``total`` and adds to named counters,
shown beside it. ``cook run`` counts input bytes (every unit's span is known from the plan, so the bar
has a true total and an ETA however records are sized), with records, tokens and rejects beside it::

    cook: 25% of 4.0 MB, 10 records (5/s), 500 tokens, 1 rejects, ETA 6s
    cook validate: 30% of 10 shards, ETA 5s
"""

from __future__ import annotations

import sys
import time
from typing import Any


class Progress:
    def __init__(
        self,
        total: int,
        interval_s: float = 10.0,
        enabled: bool = True,
        *,
        desc: str = "cook",
        unit: str = "B",
        last_line: bool = False,
    ) -> None:
        """``unit`` "B" shows the total in MB; ``last_line`` also prints a line when the work is done."""
        self.total, self.done, self.desc, self.unit = total, 0, desc, unit
        self.counts: dict[str, int] = {}
        self.start = time.monotonic()
        self._last_line = self.start
        self._interval_s = interval_s
        self._enabled = enabled
        self._print_last = last_line
        self._bar: Any = None
        if enabled and sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(
                total=total, unit=unit, unit_scale=unit == "B", file=sys.stderr, dynamic_ncols=True, desc=desc
            )

    def update(self, amount: int, **counts: int) -> None:
        self.done += amount
        for name, value in counts.items():
            self.counts[name] = self.counts.get(name, 0) + value
        if self._bar is not None:
            self._bar.set_postfix(self.counts, refresh=False)
            self._bar.update(amount)
        elif self._enabled and (
            time.monotonic() - self._last_line >= self._interval_s or (self._print_last and self.done >= self.total)
        ):
            self._last_line = time.monotonic()
            print(self.line(), file=sys.stderr, flush=True)

    def line(self) -> str:
        elapsed = time.monotonic() - self.start
        share = self.done / self.total if self.total else 1.0
        left = elapsed * (1 - share) / share if share else float("nan")
        total = f"{self.total / 1e6:,.1f} MB" if self.unit == "B" else f"{self.total} {self.unit}"
        parts = [f"{self.desc}: {share:.0%} of {total}"]
        for i, (name, value) in enumerate(self.counts.items()):
            rate = f" ({value / elapsed if elapsed else 0.0:.0f}/s)" if i == 0 else ""
            parts.append(f"{value} {name}{rate}")
        return ", ".join([*parts, f"ETA {left:.0f}s"])

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
