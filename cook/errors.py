"""The three kinds of error in cook, and the stable reason codes of rejected records.

- ``Rejected(reason, detail)``: bad data. The runner writes the record to ``rejects.jsonl`` and the
  run goes on.
- ``ConfigError``: a bad pipeline file, flag or usage. The CLI prints one line and exits 2.
- anything else is a bug and exits 1.

An interrupt (Ctrl-C) is ``KeyboardInterrupt``: the work done is kept and a rerun goes on. Imports of
native libraries run inside ``interrupts_held()``, because a SIGINT that lands inside a native
start-up (torch's) aborts the interpreter (SIGABRT) instead.

Reason codes are part of the on-disk contract (``rejects.jsonl``): never rename one, only add.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import Any


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold SIGINT for the block: an interrupt during it arrives right after, as ``KeyboardInterrupt``.

    The SIGINT handler is swapped for one that only notes the signal; a signal mask would not do, as it
    holds the calling thread only, and the kernel hands a process signal to any thread that does not
    block it (Ray's, tqdm's), whose arrival Python then raises in the main thread at once. Outside the
    main thread (where Python runs no handler and raises no ``KeyboardInterrupt``) the block just runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:
        _restore_sigint(previous)
        if caught:
            signal.raise_signal(signal.SIGINT)  # to the handler that was there: KeyboardInterrupt by default


def _restore_sigint(previous: Any) -> None:
    signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)


class SteppedInterrupts:
    """SIGINT for a loop that alternates waits and steps of its own (the driver's; set up on the main
    thread only). While ``waiting`` it raises ``KeyboardInterrupt`` at once, as Python's own handler
    does; during a step it is noted and raised by ``check`` once the step is whole, so whoever catches
    it finds a whole state to save. One handler for the loop, not ``interrupts_held`` around each step:
    a swap costs ~7 µs, per job in the driver."""

    def __init__(self) -> None:
        self.waiting = False
        self.noted = False
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> SteppedInterrupts:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
            self._installed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            _restore_sigint(self._previous)

    def _on_sigint(self, signum: int, frame: Any) -> None:
        if self.waiting:
            raise KeyboardInterrupt
        self.noted = True

    def check(self) -> None:
        """Raise the interrupt noted during the step, if any."""
        if self.noted:
            self.noted = False
            raise KeyboardInterrupt


class RejectReason(StrEnum):
    # structure of the raw record
    BAD_JSON = "bad_json"
    BAD_UTF8 = "bad_utf8"
    BAD_TYPE = "bad_type"
    MISSING_FIELD = "missing_field"
    TOO_LARGE = "too_large"
    UNKNOWN_FORMAT = "unknown_format"
    BAD_ARCHIVE = "bad_archive"
    UNSAFE_MEMBER = "unsafe_member"
    # conversation
    BAD_ROLE = "bad_role"
    EMPTY_TURN = "empty_turn"
    NO_TARGET = "no_target"
    BAD_MARKUP = "bad_markup"
    MEDIA_COUNT_MISMATCH = "media_count_mismatch"
    TEMPLATE_ERROR = "template_error"  # the tokenizer's chat template failed on the record
    # media
    MEDIA_MISSING = "media_missing"
    MEDIA_UNSAFE = "media_unsafe"
    MEDIA_DECODE = "media_decode"
    MEDIA_LIMIT = "media_limit"
    MEDIA_UNSUPPORTED = "media_unsupported"
    # packing
    TOO_LONG = "too_long"
    # runtime
    TIMEOUT = "timeout"
    WORKER_CRASH = "worker_crash"


class Rejected(Exception):
    """A record that cannot be cooked. Carries a stable ``reason`` and a human ``detail``."""

    def __init__(self, reason: RejectReason, detail: str = "") -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail


class ConfigError(Exception):
    """A bad pipeline file, override or CLI usage. The message is one line naming the key."""
