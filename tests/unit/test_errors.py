"""``interrupts_held``: a SIGINT during the block arrives right after it, as KeyboardInterrupt."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from cook.errors import interrupts_held


def _interrupt_in_the_block() -> list[str]:
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_held():
            os.kill(os.getpid(), signal.SIGINT)
            reached.append("end of the block")  # not interrupted here
        reached.append("after the block")  # the held SIGINT is delivered before this
    return reached


def test_an_interrupt_inside_arrives_after_the_block() -> None:
    assert _interrupt_in_the_block() == ["end of the block"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is back


def test_held_while_another_thread_could_take_the_signal() -> None:
    """A process signal goes to any thread that does not block it: a mask on the main thread alone let it
    through as soon as another thread ran (a `make test` failure); the swapped handler holds it anyway."""
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        for _ in range(20):
            assert _interrupt_in_the_block() == ["end of the block"]
    finally:
        stop.set()
        other.join()


def test_the_handler_is_restored_when_the_block_raises() -> None:
    with pytest.raises(ValueError), interrupts_held():
        raise ValueError("inside")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_quiet_block_raises_nothing() -> None:
    with interrupts_held():
        pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
