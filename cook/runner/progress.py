"""Progress of long work on stderr (SPEC §2): a live bar on a terminal, a line every ``interval_s``
otherwise. The one progress display of the CLI: ``cook run`` counts input bytes, ``cook validate``
shards.

``update(amount, **counts)`` moves the bar by ``amount`` of ``total`` and adds to named counters,
shown beside it. ``cook run`` counts input bytes (every unit's span is known from the plan, so the bar
has a true total and an ETA however records are sized), with records, tokens and rejects beside it::

    cook: 25% of 4.0 MB, 10 records (5/s), 500 tokens, 1 rejects, ETA 6s
    cook validate: 30% of 10 shards, ETA 5s

**Within a unit.** A worker reports how far it has read the unit it cooks (``UnitProgress``: input
bytes and records so far), at most once every ``REPORT_INTERVAL_S`` and once when the unit is cooked
(``UnitReporter``), so the bar moves while a large file cooks, not only when it is done. The driver
adds what each report says beyond the last one of its unit, and when the unit's summary comes, the
rest of the unit: a unit counts its planned bytes and its records exactly once, and the bar ends on
the plan's total.

**ETA and rate.** Neither is shown until the work has a rate: ``MIN_RATE_S`` after the first work
reported, the rate is the work done since that first report over the time since it (the start-up
before it, Ray's or a tokenizer's, is not work, and the first report's own amount took an unknown
time). It is the mean over the run so far, so one slow record or a burst of finished units barely
moves it. The first counter's rate (records/s) is taken the same way.

**Status lines** (``Progress.status``) print above a live bar, never into it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cook.sources.cursor import Cursor

REPORT_INTERVAL_S = 0.5  # a worker's reports of one unit, at most one per this
MIN_RATE_S = 1.0  # no ETA until work has been reported for this long


@dataclass(frozen=True)
class UnitProgress:
    """How far a worker is in a unit: ``bytes_read`` of its planned ``Unit.size_bytes``, ``records`` read."""

    unit: int
    bytes_read: int
    records: int


class UnitReporter:
    """Turns a reader's ``Cursor`` into ``UnitProgress`` reports of one unit, at most one every
    ``interval_s`` (``tick`` is called once per record, and costs a clock read when it reports nothing)."""

    def __init__(
        self, report: Callable[[UnitProgress], object], unit: int, size_bytes: int, cursor: Cursor, interval_s: float
    ) -> None:
        self.report, self.unit, self.size_bytes = report, unit, size_bytes
        self.cursor, self.interval_s = cursor, interval_s
        self._last = time.monotonic()

    def tick(self, records: int) -> None:
        now = time.monotonic()
        if now - self._last >= self.interval_s:
            self._last = now
            self.send(records)

    def send(self, records: int) -> None:
        """Report now; the worker also calls it once the unit is cooked, since its summary may wait a
        while (a window's shards, the driver's other work) before the driver takes it."""
        self.report(UnitProgress(self.unit, int(self.size_bytes * self.cursor.share), records))


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
        self._first: tuple[float, int, dict[str, int]] | None = None  # when, done, counts at the first work
        self._last_line = time.monotonic()
        self._interval_s = interval_s
        self._enabled = enabled
        self._print_last = last_line
        self._bar: Any = None
        if enabled and sys.stderr.isatty():
            from tqdm import tqdm

            self._bar = tqdm(
                total=total,
                unit=unit,
                unit_scale=unit == "B",
                file=sys.stderr,
                dynamic_ncols=True,
                desc=desc,
                bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]",
            )

    @property
    def shown(self) -> bool:
        """Whether the work is shown at all (a bar, or a line now and then)."""
        return self._enabled

    def update(self, amount: int, **counts: int) -> None:
        self.done += amount
        for name, value in counts.items():
            self.counts[name] = self.counts.get(name, 0) + value
        if self._first is None and amount > 0:
            self._first = (time.monotonic(), self.done, dict(self.counts))
        if self._bar is not None:
            self._bar.set_postfix_str(", ".join(self._beside()), refresh=False)
            self._bar.update(amount)
        elif self._enabled and (
            time.monotonic() - self._last_line >= self._interval_s or (self._print_last and self.done >= self.total)
        ):
            self._last_line = time.monotonic()
            print(self.line(), file=sys.stderr, flush=True)

    def _since_first(self) -> float | None:
        """Seconds since the first work reported, once there is a rate (``MIN_RATE_S``); else None."""
        if self._first is None:
            return None
        elapsed = time.monotonic() - self._first[0]
        return elapsed if elapsed >= MIN_RATE_S and self.done > self._first[1] else None

    def _beside(self) -> list[str]:
        """The counters (the first with its rate since the first work, once there is one) and the ETA
        at that rate."""
        elapsed = self._since_first()
        parts = []
        for i, (name, value) in enumerate(self.counts.items()):
            parts.append(f"{value} {name}")
            if i == 0 and elapsed is not None and self._first is not None:
                parts[-1] += f" ({(value - self._first[2].get(name, 0)) / elapsed:.0f}/s)"
        if elapsed is None or self._first is None:
            return parts
        eta = max(0, self.total - self.done) * elapsed / (self.done - self._first[1])
        return [*parts, f"ETA {eta:.0f}s"]

    def line(self) -> str:
        share = self.done / self.total if self.total else 1.0
        total = f"{self.total / 1e6:,.1f} MB" if self.unit == "B" else f"{self.total} {self.unit}"
        return ", ".join([f"{self.desc}: {share:.0%} of {total}", *self._beside()])

    @staticmethod
    def status(message: str) -> None:
        """Print one status line on stderr; a live bar is cleared first and drawn again below it."""
        from tqdm import tqdm

        tqdm.write(message, file=sys.stderr)
        sys.stderr.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
