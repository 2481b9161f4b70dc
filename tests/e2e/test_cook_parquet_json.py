"""End to end through the CLI: a Parquet file whose structured columns (messages, tools, each message's
tool_calls; llava conversations) hold JSON text, as Hugging Face dumps often store them, cooks to the
same shards, byte for byte, as the same rows stored as nested columns (lists of structs); a row whose
JSON text does not decode is one ``bad_json`` reject naming the column, and the run goes on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from cook import format as fmt
from cook.cli.main import main
from tests.conftest import pipeline_dict

TOOLS = [{"type": "function", "function": {"name": "add", "description": "adds two numbers"}}]


def _chat(i: int) -> dict[str, Any]:
    call = {"id": f"c{i}", "type": "function", "function": {"name": "add", "arguments": json.dumps({"a": i, "b": 2})}}
    return {
        "messages": [
            {"role": "system", "content": "You add."},
            {"role": "user", "content": f'What is {i} + 2? Reply as JSON: ["n"]'},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "content": str(i + 2), "tool_call_id": f"c{i}"},
            {"role": "assistant", "content": f'["{i + 2}"]'},
        ],
        "tools": TOOLS,
    }


CHATS = [_chat(i) for i in range(12)]


def _as_text(chat: dict[str, Any]) -> dict[str, Any]:
    """The row with its structured cells as JSON text (a message's tool_calls too, where it has them)."""
    messages = [{**m, "tool_calls": json.dumps(m["tool_calls"])} if "tool_calls" in m else m for m in chat["messages"]]
    return {"messages": json.dumps(messages), "tools": json.dumps(chat["tools"])}


def _cook(tmp: Path, name: str, rows: list[dict[str, Any]]) -> Path:
    raw = tmp / name / "raw"
    raw.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), raw / "chats.parquet", row_group_size=5)
    out = tmp / name / "out"
    data = pipeline_dict(str(raw), str(out), packing={"seq_len": 512, "pad_multiple": 8}, output={"shard_size": 2})
    (tmp / name / "p.yaml").write_text(yaml.safe_dump(data))
    assert main(["run", str(tmp / name / "p.yaml"), "--quiet", "--workers", "0"]) == 0
    return out


def _shards(out: Path) -> dict[str, bytes]:
    manifest = json.loads((out / fmt.MANIFEST_NAME).read_text())
    return {shard["name"]: (out / shard["name"]).read_bytes() for shard in manifest["shards"]}


def test_json_text_and_nested_columns_cook_identical_shards(tmp_path: Path) -> None:
    nested = _cook(tmp_path, "nested", CHATS)
    text = _cook(tmp_path, "text", [_as_text(chat) for chat in CHATS])
    assert pq.read_schema(tmp_path / "text" / "raw" / "chats.parquet").field("messages").type == pa.string()
    shards = _shards(nested)
    assert len(shards) >= 2 and _shards(text) == shards
    counts = json.loads((text / fmt.MANIFEST_NAME).read_text())["counts"]
    assert (counts["records_in"], counts["sources_packed"], counts["records_rejected"]) == (12, 12, 0)


def test_llava_conversations_as_json_text(tmp_path: Path) -> None:
    turns = [[{"from": "human", "value": f"Say {i}."}, {"from": "gpt", "value": f"{i}"}] for i in range(6)]
    nested = _cook(tmp_path, "nested", [{"conversations": t} for t in turns])
    text = _cook(tmp_path, "text", [{"conversations": json.dumps(t)} for t in turns])
    assert _shards(text) == _shards(nested)


def test_a_row_whose_json_text_does_not_decode_is_bad_json(tmp_path: Path) -> None:
    rows = [_as_text(chat) for chat in CHATS[:4]]
    rows[1]["messages"] = rows[1]["messages"][:-1]  # the closing ] cut off
    rows[2]["tools"] = '[{"type": "function", "type": "function"}]'
    out = _cook(tmp_path, "bad", rows)
    manifest = json.loads((out / fmt.MANIFEST_NAME).read_text())
    rejects = [json.loads(line) for line in (out / fmt.REJECTS_NAME).read_text().splitlines()]
    assert [(r["source"], r["reason"], r["detail"]) for r in rejects] == [
        (
            "chats.parquet#2",
            "bad_json",
            f"column 'messages': Expecting ',' delimiter: line 1 column {len(rows[1]['messages']) + 1} "
            f"(char {len(rows[1]['messages'])})",
        ),
        ("chats.parquet#3", "bad_json", "column 'tools': duplicate key 'type'"),
    ]
    counts = manifest["counts"]
    assert (counts["records_in"], counts["sources_packed"], counts["records_rejected"]) == (4, 2, 2)
    assert counts["records_in"] == counts["sources_packed"] + counts["records_rejected"]
    assert manifest["rejects_by_reason"] == {"bad_json": 2}


def test_the_reference_check_reads_json_text_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``cook validate --reference`` decodes the same JSON-text columns itself: every row is checked."""
    out = _cook(tmp_path, "text", [_as_text(chat) for chat in CHATS])
    capsys.readouterr()
    assert main(["validate", str(out), "--json", "--quiet", "--jobs", "1", "--reference", "100"]) == 0
    ref = json.loads(capsys.readouterr().out)["reference"]
    assert (ref["checked"], ref["matched"], ref["not_checkable_reasons"]) == (12, 12, {})
