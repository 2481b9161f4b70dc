"""A ``.json`` file holding one top-level JSON array -> RawRecord per element, streamed (SPEC §4).

Source id ``<name>#<element>``, elements counted from 1, as Hugging Face ``datasets`` reads such a
file (``load_dataset("json", ...)``). The file is one work unit; it is never loaded whole. It is
read ``CHUNK_BYTES`` at a time and a byte-level scanner finds where each element ends: the depth of
``[``/``{`` outside strings, a ``,`` or the closing ``]`` at the array's own level ending an
element. Nothing is parsed while scanning, and no UTF-8 decoding is needed: no byte of a multi-byte
UTF-8 character is ASCII. Each element's bytes then go through the decoder a JSONL line goes
through (``decode_record``: size checked first, UTF-8, duplicate keys, an object), so every
element succeeds or fails on its own, like the lines of a JSONL file::

    [ {"messages": [...]} , {"bad": tru} , {"dup": 1, "dup": 2} ]
      #1 RawRecord          #2 bad_json    #3 bad_json

Memory holds one element and a chunk: an element over ``input.max_record_bytes`` is ``too_large``
and its bytes are skipped as they are scanned, never kept.

Other failures: an empty slot (``[1,,2]``, a trailing comma) is ``bad_json`` for that slot; a file
that ends before the closing ``]`` is ``bad_json`` for the open slot ("truncated?"); anything but
whitespace after the closing ``]`` is one ``bad_json`` with the pseudo-id ``<name>#<file>``. Brackets
are counted, not matched: ``{"a": [1}`` ends no sooner than its depth says, and the slot it lands in
fails to decode. A file whose first non-blank byte is not ``[`` is read as JSON Lines.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import BinaryIO, Final

from cook.errors import RejectReason
from cook.sources.cursor import Cursor
from cook.sources.decode import decode_record
from cook.sources.files import first_nonblank
from cook.sources.jsonl import read_jsonl
from cook.types import RawRecord

CHUNK_BYTES: Final = 1 << 20
_STRUCTURE: Final = re.compile(rb'[][{},"]')
_STRING_REST: Final = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.DOTALL)  # up to an unescaped quote
_BLANK_RUN: Final = re.compile(rb"[ \t\r\n]*")
_OPEN: Final = frozenset(b"[{")
_QUOTE, _COMMA, _CLOSE_ARRAY, _CLOSE_OBJECT = b'"'[0], b","[0], b"]"[0], b"}"[0]
_END_OF_FILE: Final = -1


class _ArrayScanner:
    """Slots of one JSON array, the file positioned just after its ``[`` (module docstring)."""

    def __init__(self, handle: BinaryIO, max_bytes: int, offset: int) -> None:
        self.handle = handle
        self.max_bytes = max_bytes
        self.buf = b""
        self.base = offset  # file offset of buf[0]
        self.pos = 0  # the scanner's position in buf

    def _refill(self, keep_from: int) -> bool:
        """Drop ``buf[:keep_from]`` and read more (as much again as is kept, at least a chunk)."""
        kept = len(self.buf) - keep_from
        chunk = self.handle.read(max(CHUNK_BYTES, min(kept, self.max_bytes)))
        self.buf = self.buf[keep_from:] + chunk
        self.base += keep_from
        self.pos -= keep_from
        return bool(chunk)

    def slots(self) -> Iterator[tuple[bytes | None, int, int]]:
        """``(element bytes, or None when over max_bytes; its size; the byte that ended it)`` per slot;
        the byte is ``,`` or ``]``, or ``_END_OF_FILE``. Stops after the ``]``."""
        start, skipped, depth, in_string = 0, 0, 0, False
        while True:
            buf = self.buf
            if in_string:
                self.pos = _STRING_REST.match(buf, self.pos).end()  # type: ignore[union-attr]
                if self.pos < len(buf) and buf[self.pos] == _QUOTE:
                    self.pos += 1
                    in_string = False
                    continue
            else:
                found = _STRUCTURE.search(buf, self.pos)
                if found is not None:
                    char, self.pos = buf[found.start()], found.end()
                    if char == _QUOTE:
                        in_string = True
                    elif char in _OPEN:
                        depth += 1
                    elif depth and char in (_CLOSE_ARRAY, _CLOSE_OBJECT):
                        depth -= 1
                    elif not depth and char in (_COMMA, _CLOSE_ARRAY):
                        yield self._slot(start, self.pos - 1, skipped), self.pos - start - 1 + skipped, char
                        if char == _CLOSE_ARRAY:
                            return
                        start, skipped = self.pos, 0
                    continue
                self.pos = len(buf)
            if not skipped:  # the slot's leading blanks are not part of the element
                start = _BLANK_RUN.match(buf, start, self.pos).end()  # type: ignore[union-attr]
            if skipped + self.pos - start > self.max_bytes:  # too large: stop keeping its bytes
                skipped, start = skipped + self.pos - start, self.pos
            if not self._refill(start):
                yield self._slot(0, len(self.buf), skipped), len(self.buf) + skipped, _END_OF_FILE
                return
            start = 0

    def _slot(self, start: int, stop: int, skipped: int) -> bytes | None:
        return None if skipped else self.buf[start:stop].strip()

    def rest_offset(self) -> int | None:
        """File offset of the first non-blank byte after the array, None when there is none."""
        while True:
            rest = self.buf[self.pos :]
            blank = len(rest) - len(rest.lstrip())
            if blank < len(rest):
                return self.base + self.pos + blank
            self.pos = len(self.buf)
            if not self._refill(self.pos):
                return None


def read_json(
    path: str,
    max_record_bytes: int,
    span: tuple[int, int] | None = None,
    first_index: int = 1,
    name: str | None = None,
    cursor: Cursor | None = None,
) -> Iterator[RawRecord]:
    """The records of a JSON array file. The file is always one whole unit: ``span`` and
    ``first_index`` are accepted and ignored."""
    name = path if name is None else name
    cursor = Cursor() if cursor is None else cursor
    with open(path, "rb") as handle:
        offset, byte = first_nonblank(handle)
        if byte != b"[":
            yield from read_jsonl(path, max_record_bytes, name=name, cursor=cursor)
            return
        offset += 1  # just after the array's [
        handle.seek(offset)
        cursor.total = os.fstat(handle.fileno()).st_size
        scanner = _ArrayScanner(handle, max_record_bytes, offset)
        end = _END_OF_FILE
        for index, (data, size, end) in enumerate(scanner.slots(), start=1):
            source = f"{name}#{index}"
            cursor.done = scanner.base + scanner.pos
            if end == _CLOSE_ARRAY and index == 1 and data == b"":
                continue  # [] holds no records
            if data is None:
                yield RawRecord.failed(source, path, RejectReason.TOO_LARGE, f"{size} bytes > input.max_record_bytes")
            elif end == _END_OF_FILE:
                detail = "the file ends inside the JSON array, before its ] (truncated?)"
                yield RawRecord.failed(source, path, RejectReason.BAD_JSON, detail)
            elif not data:
                detail = "empty array element (a stray or trailing comma)"
                yield RawRecord.failed(source, path, RejectReason.BAD_JSON, detail)
            else:
                yield decode_record(data, source, path, max_record_bytes)
        if end == _CLOSE_ARRAY:
            after = scanner.rest_offset()
            if after is not None:
                detail = f"text after the JSON array's closing ] at byte {after}"
                yield RawRecord.failed(f"{name}#<file>", path, RejectReason.BAD_JSON, detail)
