import io
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cook.errors import ConfigError, Rejected, RejectReason
from cook.sources import SOURCES, list_inputs
from cook.types import RawRecord
from tests.conftest import write_jsonl


def reason(record: RawRecord) -> str:
    """The reason a source could not read ``record``, "ok" when it could."""
    return "ok" if record.failure is None else record.failure.reason


def _tar(path: Path, members: list[tuple[str, bytes]], kinds: dict[str, bytes] | None = None) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            if kinds and name in kinds:
                info.type = kinds[name]
                info.linkname = "/etc/passwd"
                info.size = 0
                tar.addfile(info)
            else:
                tar.addfile(info, io.BytesIO(data))
    return path


def test_jsonl_streams_with_line_sources_and_failures(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "a.jsonl",
        [{"x": 1}, b"{not json", b"\xff\xfe{}", b"   ", [1, 2], b'{"a": 1, "a": 2}', {"y": 2}],
    )
    out = list(SOURCES["jsonl"](str(path), 1 << 20))
    assert [o.source.rsplit("#", 1)[1] for o in out] == ["1", "2", "3", "5", "6", "7"]
    kinds = [reason(o) for o in out]
    assert kinds == [
        "ok",
        RejectReason.BAD_JSON,
        RejectReason.BAD_UTF8,
        RejectReason.BAD_TYPE,
        RejectReason.BAD_JSON,
        "ok",
    ]
    assert out[0].fields == {"x": 1} and out[0].origin == str(path)
    assert out[1].fields == {} and out[1].origin == str(path)
    with pytest.raises(Rejected) as info:
        out[1].read()
    assert info.value.reason == RejectReason.BAD_JSON and info.value is out[1].failure


def test_jsonl_size_checked_before_parse_and_deep_nesting(tmp_path: Path) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    path = write_jsonl(tmp_path / "a.jsonl", [{"text": "x" * 500}, b'{"a": ' + deep + b"}"])
    out = list(SOURCES["jsonl"](str(path), 400))
    assert [reason(o) for o in out] == [RejectReason.TOO_LARGE, RejectReason.TOO_LARGE]
    out = list(SOURCES["jsonl"](str(path), 1 << 22))
    assert [reason(o) for o in out] == ["ok", RejectReason.BAD_JSON]


def test_parquet_rows_streamed(tmp_path: Path) -> None:
    table = pa.table({"messages": [[{"role": "user", "content": "hi"}]] * 3000, "n": list(range(3000))})
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=700)
    out = list(SOURCES["parquet"](str(tmp_path / "a.parquet"), 1 << 20))
    assert len(out) == 3000
    assert out[2999].source.endswith("a.parquet#3000") and out[2999].fields["n"] == 2999
    assert out[0].fields["messages"] == [{"role": "user", "content": "hi"}]


def test_parquet_unreadable_file_is_one_failure(tmp_path: Path) -> None:
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 this is not parquet")
    out = list(SOURCES["parquet"](str(tmp_path / "bad.parquet"), 1 << 20))
    assert [(o.source, reason(o)) for o in out] == [(f"{tmp_path / 'bad.parquet'}#<file>", RejectReason.BAD_ARCHIVE)]


def test_wds_groups_members_and_rejects_unsafe(tmp_path: Path) -> None:
    path = _tar(
        tmp_path / "s.tar",
        [
            ("s1.json", b'{"conversations": []}'),
            ("s1.jpg", b"JPEGDATA"),
            ("s2.json", b"{bad"),
            ("../evil.json", b"{}"),
            ("s4.json", b"{}"),
            ("s4.link.jpg", b""),
            ("s5.txt", b"no json"),
        ],
        kinds={"s4.link.jpg": tarfile.SYMTYPE},
    )
    out = list(SOURCES["wds"](str(path), 1 << 20))
    by_source = {o.source.rsplit("#", 1)[1]: o for o in out}
    assert set(by_source) == {"s1", "s2", "../evil", "s4", "s5"}
    assert by_source["s1"].members == {"s1.jpg": b"JPEGDATA"}
    assert reason(by_source["s2"]) == RejectReason.BAD_JSON
    assert reason(by_source["../evil"]) == RejectReason.UNSAFE_MEMBER
    assert reason(by_source["s4"]) == RejectReason.UNSAFE_MEMBER
    assert reason(by_source["s5"]) == RejectReason.MISSING_FIELD


def test_wds_truncated_archive_keeps_earlier_samples(tmp_path: Path) -> None:
    path = _tar(tmp_path / "s.tar", [(f"k{i}.json", b'{"text": "' + b"x" * 3000 + b'"}') for i in range(4)])
    data = path.read_bytes()
    path.write_bytes(data[: 512 * 9])
    out = list(SOURCES["wds"](str(path), 1 << 20))
    assert reason(out[0]) == "ok"
    assert out[-1].source.endswith("s.tar#<archive>") and reason(out[-1]) == RejectReason.BAD_ARCHIVE


def test_list_inputs_sorted_and_errors(tmp_path: Path) -> None:
    for name in ["b.jsonl", "a.parquet", "c.tar", "notes.md"]:
        (tmp_path / name).write_bytes(b"")
    assert [f for f, _ in list_inputs(str(tmp_path), "auto")] == [
        str(tmp_path / n) for n in ["a.parquet", "b.jsonl", "c.tar"]
    ]
    assert [fmt for _, fmt in list_inputs(str(tmp_path), "auto")] == ["parquet", "jsonl", "wds"]
    with pytest.raises(ConfigError, match="matches no input"):
        list_inputs(str(tmp_path / "*.nothing"), "auto")
    with pytest.raises(ConfigError, match=r"input\.format"):
        list_inputs(str(tmp_path / "notes.md"), "auto")
