"""Parquet rows -> RawRecords: the structured columns (messages, conversations, tools, each message's
tool_calls) read the same from nested values and from JSON-text strings; JSON text that does not
decode is bad_json naming the column; no other string is decoded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from cook.errors import RejectReason
from cook.sources import SOURCES

CALLS = [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}]
TOOLS = [{"type": "function", "function": {"name": "add", "description": "adds"}}]
ROW: dict[str, Any] = {
    "messages": [
        {"role": "user", "content": '["not", "decoded"]', "tool_calls": None},
        {"role": "assistant", "content": "{}", "tool_calls": CALLS},
    ],
    "tools": TOOLS,
    "images": '["one file name"].png',
    "text": "[1, 2]",
}


def _read(path: Path, rows: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    pq.write_table(pa.Table.from_pylist(rows), path)
    out = SOURCES["parquet"](str(path), 1 << 20, name=path.name)
    return [(o.source, o.fields if o.failure is None else (o.failure.reason, o.failure.detail)) for o in out]


def test_json_text_columns_read_as_the_nested_columns(tmp_path: Path) -> None:
    as_text = {
        **ROW,
        "messages": json.dumps([{**m, "tool_calls": json.dumps(m["tool_calls"])} for m in ROW["messages"]]),
        "tools": json.dumps(TOOLS),
    }
    nested = _read(tmp_path / "nested.parquet", [ROW])
    assert nested == [("nested.parquet#1", ROW)]
    assert _read(tmp_path / "text.parquet", [as_text]) == [("text.parquet#1", ROW)]


def test_llava_conversations_as_json_text(tmp_path: Path) -> None:
    turns = [{"from": "human", "value": "<image> what?"}, {"from": "gpt", "value": "a cat"}]
    rows = [{"conversations": json.dumps(turns), "image": "cat.jpg"}, {"conversations": None, "image": "x.jpg"}]
    assert _read(tmp_path / "c.parquet", rows) == [
        ("c.parquet#1", {"conversations": turns, "image": "cat.jpg"}),
        ("c.parquet#2", {"conversations": None, "image": "x.jpg"}),
    ]


def test_json_text_that_does_not_decode_is_bad_json(tmp_path: Path) -> None:
    good = json.dumps([{"role": "user", "content": "hi"}])
    rows = [
        {"messages": '[{"role": "user"', "tools": None},
        {"messages": good, "tools": '[{"a": 1, "a": 2}]'},
        {"messages": "[" * 100_000 + "]" * 100_000, "tools": None},
        {"messages": json.dumps([{"role": "assistant", "tool_calls": "[{"}]), "tools": None},
        {"messages": "", "tools": None},
        {"messages": good, "tools": "[]"},
    ]
    assert _read(tmp_path / "b.parquet", rows) == [
        (
            "b.parquet#1",
            (RejectReason.BAD_JSON, "column 'messages': Expecting ',' delimiter: line 1 column 17 (char 16)"),
        ),
        ("b.parquet#2", (RejectReason.BAD_JSON, "column 'tools': duplicate key 'a'")),
        ("b.parquet#3", (RejectReason.BAD_JSON, "column 'messages': JSON nested too deeply")),
        (
            "b.parquet#4",
            (
                RejectReason.BAD_JSON,
                "column 'messages': messages[0].tool_calls: Expecting property name enclosed in double quotes: "
                "line 1 column 3 (char 2)",
            ),
        ),
        ("b.parquet#5", (RejectReason.BAD_JSON, "column 'messages': Expecting value: line 1 column 1 (char 0)")),
        ("b.parquet#6", {"messages": [{"role": "user", "content": "hi"}], "tools": []}),
    ]


def test_json_text_of_the_wrong_shape_is_left_to_the_cooker(tmp_path: Path) -> None:
    """A string that is valid JSON but not a list decodes; the cooker then rejects its type."""
    rows = [{"messages": '"hello"'}, {"messages": "5"}]
    assert _read(tmp_path / "w.parquet", rows) == [
        ("w.parquet#1", {"messages": "hello"}),
        ("w.parquet#2", {"messages": 5}),
    ]
