"""A packed sequence's ``source`` -> its raw record, re-read from the input, -> ``RefRecord`` (the
conversation as Hugging Face takes it), for ``cook validate --reference``.

This is a second, independent reader of the documented input formats (SPEC §4), not cook's: it
shares no code with ``cook.sources`` or ``cook.cookers``, so a bug there cannot hide here.

    source "chat.jsonl#12"  (input.path "data/")  -> line 12 of data/chat.jsonl (a seek, not a parse)
    source "rows.parquet#7" (input.path "data/*") -> row 7 (from 1) of data/rows.parquet
    {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]}
        -> RefRecord(messages=(RefMessage("user", "Hi"), RefMessage("assistant", "Yo", target=True)))

Records this reader does not re-render are *not checkable*, with a reason: media parts, WebDataset
or JSON-array inputs, the llava / granary cookers, an input file that is not there any more.
"""

from __future__ import annotations

import dataclasses
import json
import mmap
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from cook import format as fmt

_GLOB_MAGIC: Final = re.compile(r"[*?[]")
_CHUNK_BYTES: Final = 64 << 20  # newlines are counted this many bytes at a time
_AUTO_FIELDS: Final = (("messages", "openai"), ("conversations", "llava"), ("audio_filepath", "granary"))
_PREFORMATTED_TURN: Final = re.compile(
    re.escape(fmt.IM_START) + "(" + "|".join(fmt.ROLES) + ")\n(.*?)" + re.escape(fmt.IM_END) + "\n?", re.S
)


class NotCheckable(Exception):
    """This record cannot be re-rendered here; the message is the reason (a short phrase)."""


@dataclass(frozen=True)
class RefMessage:
    """One turn as Hugging Face's ``messages`` take it. ``content``: the text parts joined."""

    role: str
    content: str
    reasoning: str | None = None  # ``reasoning_content``
    tool_calls: tuple[Any, ...] = ()  # the record's ``tool_calls``, as written
    target: bool = False  # trained on: an assistant turn by ``train_on`` or its own ``loss`` flag
    extra: tuple[tuple[str, str], ...] = ()  # ``tool_call_id`` and ``name``, when the message has them
    content_absent: bool = False  # ``content`` null or missing (Hugging Face then drops the key)


@dataclass(frozen=True)
class RefRecord:
    source: str
    messages: tuple[RefMessage, ...]
    tools: Any = None  # the record's ``tools``, as written (None when absent or empty)
    preformatted: bool = False  # chat markup already applied (``cooker: preformatted``)


@dataclass
class InputFiles:
    """Where the sources of one dataset live: ``input.path`` and ``input.format`` of its manifest."""

    input_path: str
    input_format: str = "auto"
    _lines: dict[str, np.ndarray] = field(default_factory=dict)  # file -> int64 [L] offset of each newline
    _groups: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)

    def root(self) -> str:
        """The directory a source name is relative to (as cook names sources: SPEC §8, CHANGELOG)."""
        if os.path.isdir(self.input_path):
            return self.input_path
        magic = _GLOB_MAGIC.search(self.input_path)
        prefix = self.input_path if magic is None else self.input_path[: magic.start()]
        return os.path.dirname(prefix) or os.curdir

    def read(self, source: str) -> dict[str, Any]:
        """The raw record named ``source`` (``<file>#<line or row>``); raises ``NotCheckable``."""
        name, _, key = source.rpartition("#")
        path = os.path.join(self.root(), name)
        kind = self._format(path)
        if kind in ("jsonl", "parquet") and (not key.isdigit() or int(key) < 1):
            raise NotCheckable("source is not <file>#<line or row>")
        if kind == "jsonl":
            return self._jsonl_row(path, int(key))
        if kind == "parquet":
            return self._parquet_row(path, int(key))
        raise NotCheckable(kind)

    def _format(self, path: str) -> str:
        if path.lower().endswith(".tar") and self.input_format in ("auto", "wds"):
            return "webdataset"
        if not os.path.isfile(path):
            raise NotCheckable("input file not found")
        suffix = os.path.splitext(path)[1].lower()
        if suffix == ".json" and self.input_format in ("auto", "jsonl"):
            with open(path, "rb") as handle:
                head = handle.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
            return "JSON array input" if head[:1] == b"[" else "jsonl"
        kind = (
            self.input_format
            if self.input_format != "auto"
            else {".jsonl": "jsonl", ".parquet": "parquet"}.get(suffix, "webdataset")
        )
        return "webdataset" if kind == "wds" else kind

    def _jsonl_row(self, path: str, line: int) -> dict[str, Any]:
        """Line ``line`` (from 1) of a JSONL file: its newlines are counted once, then one seek."""
        if path not in self._lines:
            self._lines[path] = _newlines(path)
        newlines = self._lines[path]
        if line - 1 > len(newlines):
            raise NotCheckable(f"the file has no line {line}")
        start = 0 if line == 1 else int(newlines[line - 2]) + 1
        with open(path, "rb") as handle:
            handle.seek(start)
            data = handle.readline()
        return _json_object(data.removeprefix(b"\xef\xbb\xbf") if line == 1 else data)

    def _parquet_row(self, path: str, row: int) -> dict[str, Any]:
        import pyarrow.parquet as pq

        parquet = pq.ParquetFile(path)
        first = 1
        for group in range(parquet.metadata.num_row_groups):
            rows = parquet.metadata.row_group(group).num_rows
            if row < first + rows:
                if (path, group) not in self._groups:
                    self._groups = {(path, group): parquet.read_row_group(group).to_pylist()}  # one group cached
                return _json_text_columns(dict(self._groups[(path, group)][row - first]))
            first += rows
        raise NotCheckable(f"the file has no row {row}")


def _newlines(path: str) -> np.ndarray:
    """int64 [L]: the offset of every ``\\n`` in the file, counted in chunks of a mapping."""
    found = []
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if not size:
            return np.zeros(0, np.int64)
        with mmap.mmap(handle.fileno(), size, prot=mmap.PROT_READ) as data:
            for start in range(0, size, _CHUNK_BYTES):
                chunk = np.frombuffer(data, np.uint8, count=min(_CHUNK_BYTES, size - start), offset=start)
                found.append(np.flatnonzero(chunk == 10) + start)
                del chunk  # the mapping closes only with no view left
    return np.concatenate(found)


def _json_object(data: bytes) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except ValueError as err:
        raise NotCheckable(f"the line is not JSON ({err})") from None
    if not isinstance(value, dict):
        raise NotCheckable("the line is not a JSON object")
    return value


def to_record(fields: Mapping[str, Any], source: str, cooker: str, train_on: str) -> RefRecord:
    """The raw record as Hugging Face messages (openai and preformatted rows); raises ``NotCheckable``.
    The cooker that made it: the pipeline's, or for ``auto`` the first field it finds."""
    kind = cooker if cooker != "auto" else next((name for key, name in _AUTO_FIELDS if key in fields), "preformatted")
    if kind == "openai":
        messages, tools = _openai_messages(fields)
        return RefRecord(source, _with_targets(messages, train_on), tools)
    if kind == "preformatted":
        return RefRecord(source, _with_targets(_preformatted_messages(fields), train_on), preformatted=True)
    raise NotCheckable(f"cooker {kind}")


def _openai_messages(fields: Mapping[str, Any]) -> tuple[list[tuple[RefMessage, Any]], Any]:
    rows = fields.get("messages")
    if not isinstance(rows, list):
        raise NotCheckable("'messages' is not a list")
    out = []
    for row in rows:
        if not isinstance(row, dict) or not isinstance(row.get("role"), str):
            raise NotCheckable("a message is not {role, content}")
        reasoning, calls = row.get("reasoning_content"), row.get("tool_calls")
        message = RefMessage(
            role=row["role"],
            content=_text(row.get("content")),
            reasoning=reasoning if isinstance(reasoning, str) else None,
            tool_calls=tuple(calls) if isinstance(calls, list) else (),
            extra=tuple((k, row[k]) for k in ("tool_call_id", "name") if isinstance(row.get(k), str)),
            content_absent=row.get("content") is None,
        )
        out.append((message, row.get("loss")))
    tools = fields.get("tools")
    return out, (None if tools in (None, []) else tools)


def _text(content: Any) -> str:
    """A message's content as one string: a string, nothing, or text parts joined (media: not checkable)."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise NotCheckable("a content is neither a string nor a list of parts")
    texts = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind != "text" or not isinstance(part.get("text"), str):
            raise NotCheckable("media" if isinstance(kind, str) else "a content part is not {type, ...}")
        texts.append(part["text"])
    return "".join(texts)


def _preformatted_messages(fields: Mapping[str, Any]) -> list[tuple[RefMessage, Any]]:
    text = fields.get("text")
    if not isinstance(text, str):
        raise NotCheckable("'text' is not a string")
    turns = [(RefMessage(m.group(1), m.group(2)), None) for m in _PREFORMATTED_TURN.finditer(text)]
    if "".join(m.group(0) for m in _PREFORMATTED_TURN.finditer(text)) != text or not turns:
        raise NotCheckable("the text does not split into ChatML turns")
    return turns


def _with_targets(messages: Sequence[tuple[RefMessage, Any]], train_on: str) -> tuple[RefMessage, ...]:
    """SPEC §5: assistant turns only; a turn's own boolean ``loss`` wins, else ``train_on``."""
    last = max((i for i, (m, _) in enumerate(messages) if m.role == "assistant"), default=-1)
    out = []
    for i, (message, loss) in enumerate(messages):
        if message.role != "assistant":
            target = False
        elif isinstance(loss, bool):
            target = loss
        else:
            target = train_on == "all_assistant" or i == last
        out.append(dataclasses.replace(message, target=target))
    return tuple(out)


JSON_TEXT_COLUMNS = ("messages", "conversations", "tools")  # SPEC §4: Parquet may store these as JSON text


def _json_text_columns(row: dict[str, Any]) -> dict[str, Any]:
    """A Parquet row as its record: the columns SPEC §4 allows as JSON text (and each message's
    ``tool_calls``) decoded, as ``json`` reads them."""
    try:
        for key in JSON_TEXT_COLUMNS:
            if isinstance(row.get(key), str):
                row[key] = json.loads(row[key])
        for message in row.get("messages") or []:
            if isinstance(message, dict) and isinstance(message.get("tool_calls"), str):
                message["tool_calls"] = json.loads(message["tool_calls"])
    except ValueError as err:
        raise NotCheckable(f"a JSON-text column does not decode: {err}") from None
    return row
