"""``interrupts_held``: a SIGINT during the block arrives right after it, as KeyboardInterrupt."""

from __future__ import annotations

import os
import signal

import pytest

from cook.errors import interrupts_held


def test_an_interrupt_inside_arrives_after_the_block() -> None:
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_held():
            os.kill(os.getpid(), signal.SIGINT)
            reached.append("end of the block")  # not interrupted here
        reached.append("after the block")  # the held SIGINT is delivered before this
    assert reached == ["end of the block"]
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, set())  # the mask is back


def test_the_mask_is_restored_when_the_block_raises() -> None:
    with pytest.raises(ValueError), interrupts_held():
        raise ValueError("inside")
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, set())
