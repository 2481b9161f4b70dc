"""RejectLog.catch: the one place a Rejected becomes a RejectRecord; anything else goes through."""

from __future__ import annotations

import pytest

from cook.errors import Rejected, RejectReason
from cook.runner.reject_log import RejectLog
from cook.types import RawRecord, RejectRecord


def test_a_rejected_stops_the_steps_and_is_kept_in_order() -> None:
    log = RejectLog()
    done = []
    with log.catch("a.jsonl#1"):
        RawRecord.failed("a.jsonl#1", "a.jsonl", RejectReason.BAD_JSON, "Expecting value").read()
        done.append(1)
    with log.catch("a.jsonl#2"):
        done.append(2)
    with log.catch("a.jsonl#3"):
        raise Rejected(RejectReason.TOO_LONG, "2000 tokens > packing.seq_len=1024")
    assert done == [2]
    assert log.records == [
        RejectRecord("a.jsonl#1", RejectReason.BAD_JSON, "Expecting value"),
        RejectRecord("a.jsonl#3", RejectReason.TOO_LONG, "2000 tokens > packing.seq_len=1024"),
    ]


def test_a_bug_is_not_a_reject() -> None:
    log = RejectLog()
    with pytest.raises(KeyError), log.catch("a.jsonl#1"):
        raise KeyError("messages")
    assert log.records == []
