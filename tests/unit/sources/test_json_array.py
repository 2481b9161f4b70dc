"""Issue 13 item 5 (sources) / SPEC §4: a ``.json`` file holding one top-level JSON array is read as
its records, streamed, with source ids ``<file>#<element from 1>``; a ``.jsonl`` file that starts
with ``[`` gets a hint in its reject details."""

from __future__ import annotations

import builtins
import json
import random
from pathlib import Path

import pytest
import yaml

import cook.sources.json_array as json_array
from cook import format as fmt
from cook.cli.main import main
from cook.errors import RejectReason
from cook.sources import SOURCES, list_inputs
from cook.sources.jsonl import ARRAY_HINT
from cook.types import RawRecord
from tests.conftest import pipeline_dict


def chat(i: int) -> dict:
    return {"messages": [{"role": "user", "content": f'q{i} "[{{,}}]" ü'}, {"role": "assistant", "content": f"a{i}"}]}


def outcomes(path: Path, max_bytes: int = 1 << 20) -> list[tuple[str, str]]:
    return [
        (o.source.rsplit("#", 1)[1], "ok" if o.failure is None else o.failure.reason.value)
        for o in SOURCES["json"](str(path), max_bytes)
    ]


def test_pretty_printed_array_is_read_as_records(tmp_path: Path) -> None:
    rows = [chat(i) for i in range(5)]
    path = tmp_path / "a.json"
    path.write_text(json.dumps(rows, indent=2, ensure_ascii=False))
    assert list_inputs(str(path), "auto") == [(str(path), "json")]
    assert list_inputs(str(path), "jsonl") == [(str(path), "json")]  # a .json array is never read by line
    out = list(SOURCES["json"](str(path), 1 << 20))
    assert all(isinstance(o, RawRecord) and o.failure is None for o in out)
    assert [o.fields for o in out] == rows
    assert [o.source for o in out] == [f"{path}#{i}" for i in range(1, 6)]
    assert out[0].origin == str(path)


def test_any_layout_and_chunking_gives_the_same_records(tmp_path: Path, monkeypatch) -> None:
    """Elements cut anywhere by the chunk boundaries: inside strings, escapes, UTF-8 characters."""
    rng = random.Random(13)
    path = tmp_path / "a.json"
    for _ in range(60):
        rows = [{**chat(i), "x": [None, True, -1.5e3, {"k\\": '\\"'}], "s": "\\" * rng.randint(0, 3)} for i in range(4)]
        path.write_text(json.dumps(rows, indent=rng.choice([None, 1, 4]), ensure_ascii=rng.random() < 0.5))
        monkeypatch.setattr(json_array, "CHUNK_BYTES", rng.randint(1, 9))
        assert [o.fields for o in SOURCES["json"](str(path), 1 << 20)] == rows  # type: ignore[union-attr]


def test_each_element_succeeds_or_fails_on_its_own(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(json_array, "CHUNK_BYTES", 7)
    path = tmp_path / "a.json"
    big = json.dumps({"text": "x" * 200}).encode()
    path.write_bytes(
        b'\xef\xbb\xbf [ {"a": 1}, {"a": tru}, {"d": 1, "d": 2}, [1], {"b": "\xff"}, ' + big + b', , {"a": 2}, ]'
    )
    assert outcomes(path, max_bytes=100) == [
        ("1", "ok"),
        ("2", "bad_json"),
        ("3", "bad_json"),
        ("4", "bad_type"),
        ("5", "bad_utf8"),
        ("6", "too_large"),
        ("7", "bad_json"),  # empty slot
        ("8", "ok"),
        ("9", "bad_json"),  # trailing comma
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (b"[]", []),
        (b" \n[ \n ]\n", []),
        (b'[{"a": 1}, {"a": 2', [("1", "ok"), ("2", "bad_json")]),  # truncated
        (b'[{"a": 1}] [{"a": 2}]', [("1", "ok"), ("<file>", "bad_json")]),  # text after the array
        (b'{"a": 1}\n{"a": 2}\n', [("1", "ok"), ("2", "ok")]),  # JSON Lines under a .json name
    ],
)
def test_edges(tmp_path: Path, text: bytes, expected: list) -> None:
    path = tmp_path / "a.json"
    path.write_bytes(text)
    assert outcomes(path) == expected


def test_truncated_and_trailing_details(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_bytes(b'[{"a": 1}, {"a": 2')
    assert "truncated" in list(SOURCES["json"](str(path), 1 << 20))[1].failure.detail  # type: ignore[union-attr]


def test_json_lines_in_a_json_file_keep_jsonl_planning(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text(json.dumps(chat(0)) + "\n")
    assert list_inputs(str(path), "auto") == [(str(path), "jsonl")]


def test_streamed_not_loaded_whole(tmp_path: Path, monkeypatch) -> None:
    """The first record is yielded after about one chunk has been read, whatever the file size;
    no read asks for more than a chunk (the elements are small)."""
    path = tmp_path / "big.json"
    path.write_text(json.dumps([chat(i) for i in range(20_000)], indent=1))
    monkeypatch.setattr(json_array, "CHUNK_BYTES", 4096)
    reads: list[int] = []

    class Counting:
        def __init__(self, handle):
            self.handle = handle

        def read(self, n: int = -1) -> bytes:
            data = self.handle.read(n)
            reads.append(len(data))
            return data

        def __getattr__(self, name: str):
            return getattr(self.handle, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc: object) -> None:
            self.handle.close()

    monkeypatch.setattr(json_array, "open", lambda *a, **k: Counting(builtins.open(*a, **k)), raising=False)  # noqa: SIM115
    records = SOURCES["json"](str(path), 1 << 20)
    first = next(records)
    assert isinstance(first, RawRecord) and first.fields == chat(0)
    assert sum(reads) <= 3 * 4096 < path.stat().st_size
    assert sum(1 for _ in records) == 19_999
    assert max(reads) <= 4096


def test_jsonl_that_looks_like_an_array_gets_a_hint(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps([chat(0), chat(1)], indent=2))
    out = list(SOURCES["jsonl"](str(path), 1 << 20))
    assert out and all(o.failure is not None and o.failure.detail.endswith(ARRAY_HINT) for o in out)
    assert "looks like a JSON array" in ARRAY_HINT and "name the file .json" in ARRAY_HINT
    ok = tmp_path / "b.jsonl"
    ok.write_text(json.dumps(chat(0)) + "\n{bad\n")
    assert [o.failure.detail for o in SOURCES["jsonl"](str(ok), 1 << 20) if o.failure is not None] == [
        "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    ]


def test_a_pretty_printed_json_array_file_cooks(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    rows = [chat(i) for i in range(6)]
    (tmp_path / "in" / "a.json").write_text(json.dumps(rows, indent=4))
    data = pipeline_dict(str(tmp_path / "in"), str(tmp_path / "out"))
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(data))
    assert main(["run", str(tmp_path / "p.yaml"), "--workers", "0", "--quiet"]) == 0
    manifest = json.loads((tmp_path / "out" / fmt.MANIFEST_NAME).read_text())
    assert manifest["counts"]["records_in"] == manifest["counts"]["sources_packed"] == 6
    assert manifest["counts"]["records_rejected"] == 0
    assert RejectReason.BAD_JSON.value not in manifest.get("rejects_by_reason", {})
