"""Issue 13 item 12: source ids hold the input file's path relative to the input root, so
``../data/x.jsonl`` and ``/abs/data/x.jsonl`` give the same source strings (and shard bytes)."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from cook import format as fmt
from cook.cli.main import main
from cook.sources import SOURCES, list_inputs, source_name
from tests.conftest import pipeline_dict, write_jsonl


@pytest.mark.parametrize(
    ("input_path", "file", "name"),
    [
        ("data", "data/x.jsonl", "x.jsonl"),  # a directory lists its own files only
        ("data/", "data/x.jsonl", "x.jsonl"),
        ("../data/x.jsonl", "../data/x.jsonl", "x.jsonl"),
        ("/abs/data/x.jsonl", "/abs/data/x.jsonl", "x.jsonl"),
        ("x.jsonl", "x.jsonl", "x.jsonl"),
        ("data/*.jsonl", "data/x.jsonl", "x.jsonl"),
        ("*.jsonl", "x.jsonl", "x.jsonl"),
        ("../data/**/*.jsonl", "../data/a/b/x.jsonl", "a/b/x.jsonl"),
        ("/abs/da*/x.jsonl", "/abs/data/x.jsonl", "data/x.jsonl"),
        ("/abs/data/x[0-9].tar", "/abs/data/x1.tar", "x1.tar"),
    ],
)
def test_source_name_is_relative_to_the_input_root(input_path: str, file: str, name: str) -> None:
    assert source_name(file, input_path) == name


def test_names_of_listed_files(tmp_path: Path) -> None:
    (tmp_path / "data" / "sub").mkdir(parents=True)
    write_jsonl(tmp_path / "data" / "sub" / "x.jsonl", [{"a": 1}])
    write_jsonl(tmp_path / "data" / "y.jsonl", [{"a": 1}])
    for input_path, names in [
        (str(tmp_path / "data"), ["y.jsonl"]),
        (str(tmp_path / "data" / "**" / "*.jsonl"), ["sub/x.jsonl", "y.jsonl"]),
        (str(tmp_path / "data" / "sub" / "x.jsonl"), ["x.jsonl"]),
    ]:
        assert [source_name(f, input_path) for f, _ in list_inputs(input_path, "auto")] == names


def test_every_reader_starts_its_ids_with_the_name(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "a.jsonl", [{"a": 1}, b"{bad"])
    (tmp_path / "a.json").write_text('[{"a": 1}, {"a": 2}] trailing')
    pq.write_table(pa.table({"a": [1, 2]}), tmp_path / "a.parquet")
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 not parquet")
    with tarfile.open(tmp_path / "a.tar", "w") as tar:
        info = tarfile.TarInfo("k1.json")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"{}"))
    (tmp_path / "broken.tar").write_bytes((tmp_path / "a.tar").read_bytes()[:700])
    cases = [
        ("jsonl", "a.jsonl", ["n/a.jsonl#1", "n/a.jsonl#2"]),
        ("json", "a.json", ["n/a.json#1", "n/a.json#2", "n/a.json#<file>"]),
        ("parquet", "a.parquet", ["n/a.parquet#1", "n/a.parquet#2"]),
        ("parquet", "bad.parquet", ["n/bad.parquet#<file>"]),
        ("wds", "a.tar", ["n/a.tar#k1"]),
        ("wds", "broken.tar", ["n/broken.tar#k1", "n/broken.tar#<archive>"]),
    ]
    for fmt_name, file, expected in cases:
        name = f"n/{file}"
        out = list(SOURCES[fmt_name](str(tmp_path / file), 1 << 20, None, 1, name=name))
        assert [o.source for o in out] == expected, (fmt_name, file)
        assert all(getattr(o, "origin", str(tmp_path / file)) == str(tmp_path / file) for o in out)


def _cook(workdir: Path, input_path: str, out: str) -> tuple[bytes, str, list[str]]:
    data = pipeline_dict(input_path, out)
    (workdir / f"{out}.yaml").write_text(yaml.safe_dump(data))
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        assert main(["run", f"{out}.yaml", "--workers", "0", "--quiet"]) == 0
    finally:
        os.chdir(cwd)
    shard = (workdir / out / fmt.shard_name(0)).read_bytes()
    rejects = (workdir / out / fmt.REJECTS_NAME).read_text()
    with tarfile.open(workdir / out / fmt.shard_name(0)) as tar:
        metas = [json.load(tar.extractfile(m)) for m in tar if m.name.endswith(fmt.META)]  # type: ignore[arg-type]
    return shard, rejects, [s["source"] for meta in metas for s in meta["sequences"]]


def test_spelling_of_the_input_path_does_not_change_the_output(tmp_path: Path) -> None:
    """Needs the runner to pass ``name=source_name(unit.path, config.input.path)`` to the reader."""
    (tmp_path / "data").mkdir()
    (tmp_path / "work").mkdir()
    chat = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]}
    write_jsonl(tmp_path / "data" / "x.jsonl", [chat, b"{bad", chat])
    spellings = ["../data/x.jsonl", str(tmp_path / "data" / "x.jsonl"), "../data", "../data/*.jsonl"]
    results = [_cook(tmp_path / "work", spelling, f"out{i}") for i, spelling in enumerate(spellings)]
    shard, rejects, sources = results[0]
    assert sources == ["x.jsonl#1", "x.jsonl#3"]
    assert json.loads(rejects)["source"] == "x.jsonl#2"
    for other in results[1:]:
        assert other == (shard, rejects, sources)
