"""The one place a ``Rejected`` becomes a ``RejectRecord`` (STYLE.md: any L2 stage raises
``Rejected(reason)``, the runner records it in ``rejects.jsonl``).

Every stage raises ``Rejected`` for a bad record: a source's failure when its record is ``read()``,
a cooker, media, a tokenized conversation's ``sample()``, the packer's fit. The worker runs each
record's steps under ``catch(source)``; a ``Rejected`` raised there ends that record's steps and is
kept as a ``RejectRecord``, in the order the rejects were raised::

    log = RejectLog()
    with log.catch("a.jsonl#3"):
        raise Rejected(RejectReason.BAD_ROLE, "messages[0].role 'robot'")
    log.records == [RejectRecord("a.jsonl#3", RejectReason.BAD_ROLE, "messages[0].role 'robot'")]

Any other exception is a bug and goes through.
"""

from __future__ import annotations

from types import TracebackType

from cook.errors import Rejected
from cook.types import RejectRecord


class RejectLog:
    """The rejects of one unit, in the order they were raised."""

    def __init__(self) -> None:
        self.records: list[RejectRecord] = []
        self._source = ""

    def catch(self, source: str) -> RejectLog:
        """A context in which the steps of record ``source`` run: a ``Rejected`` stops them and is kept."""
        self._source = source
        return self

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> bool:
        if isinstance(error, Rejected):
            self.records.append(RejectRecord(self._source, error.reason, error.detail))
            return True
        return False
