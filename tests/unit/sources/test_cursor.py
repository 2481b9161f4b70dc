"""A reader's ``Cursor`` says how far it has read when each record comes: bytes of a JSONL span,
JSON array or tar, rows of a Parquet span; it ends on the total."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from cook.sources import SOURCES, Cursor
from tests.conftest import write_jsonl


def _positions(fmt: str, path: Path, span: tuple[int, int] | None = None) -> tuple[list[int], int]:
    """``cursor.done`` as each record is handed on, and ``cursor.total``."""
    cursor = Cursor()
    done = [cursor.done for _ in SOURCES[fmt](str(path), 1 << 20, span, cursor=cursor)]
    return done, cursor.total


def test_jsonl_counts_the_bytes_of_its_span(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "a.jsonl", [{"a": 1}, b"   ", {"bb": 22}, {"c": 3}])
    lines = [len(line) for line in path.read_bytes().splitlines(keepends=True)]  # 9, 4, 11, 9
    assert _positions("jsonl", path) == ([9, 24, 33], 33)
    start = lines[0] + lines[1]
    assert _positions("jsonl", path, (start, start + lines[2])) == ([11], 11)


def test_json_array_counts_bytes(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_bytes(b'[{"a": 1}, {"a": 2}]')
    assert _positions("json", path) == ([10, 20], 20)


def test_wds_counts_archive_bytes(tmp_path: Path) -> None:
    path = tmp_path / "s.tar"
    with tarfile.open(path, "w") as tar:
        for i in range(3):
            for ext, data in (("json", b"{}"), ("jpg", b"x" * 2000)):
                info = tarfile.TarInfo(f"s{i}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    done, total = _positions("wds", path)
    assert total == path.stat().st_size and len(done) == 3
    assert 0 < done[0] < done[1] < done[2] == total


def test_parquet_counts_rows_of_its_row_groups(tmp_path: Path) -> None:
    pq.write_table(pa.table({"n": list(range(10))}), tmp_path / "a.parquet", row_group_size=4)
    assert _positions("parquet", tmp_path / "a.parquet") == (list(range(1, 11)), 10)
    assert _positions("parquet", tmp_path / "a.parquet", (1, 3)) == (list(range(1, 7)), 6)
