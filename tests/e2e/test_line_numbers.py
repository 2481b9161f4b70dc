"""JSONL line numbers through the CLI: a file cut into many units (their first lines counted by the
workers' ``LineCountTask``s, never by the driver) cooks to the same bytes as the same file in one unit,
and every source id and reject names its true line."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from cook import format as fmt
from cook.cli.main import main
from cook.packfiles import ONLY_META, iter_packs
from tests.conftest import pipeline_dict

RECORDS = 700


def _raw(path: Path) -> dict[int, str]:
    """Chats of varied lengths, one per line, with a broken line every 37 and a blank one every 101;
    returns line number -> what the line holds (``chat``, ``broken`` or ``blank``)."""
    lines, kinds = [], {}
    for i in range(RECORDS):
        number = len(lines) + 1
        if i % 101 == 50:
            lines.append("")
            kinds[number] = "blank"
        elif i % 37 == 3:
            lines.append('{"messages": [')
            kinds[number] = "broken"
        else:
            text = f"q{i} " + "why " * (i * 13 % 90)
            chat = [{"role": "user", "content": text}, {"role": "assistant", "content": f"a{i} " + "so " * (i % 40)}]
            lines.append(json.dumps({"messages": chat}))
            kinds[number] = "chat"
    path.write_text("".join(line + "\n" for line in lines))
    return kinds


def _cook(tmp: Path, raw: Path, name: str, unit_bytes: int) -> Path:
    out = tmp / name
    data = pipeline_dict(
        str(raw), str(out), packing={"seq_len": 512, "buffer_size": 64}, input={"unit_bytes": unit_bytes}
    )
    pipeline = tmp / f"{name}.yaml"
    pipeline.write_text(yaml.safe_dump(data))
    assert main(["run", str(pipeline), "--workers", "0", "--quiet"]) == 0
    return out


def _digests(out: Path) -> dict[str, str]:
    names = [*sorted(p.name for p in out.glob("shard-*.tar")), fmt.REJECTS_NAME]
    return {name: hashlib.sha256((out / name).read_bytes()).hexdigest() for name in names}


def test_many_units_cook_the_same_bytes_and_true_line_numbers(tmp_path: Path) -> None:
    raw = tmp_path / "chats.jsonl"
    kinds = _raw(raw)
    many = _cook(tmp_path, raw, "many", unit_bytes=2_000)
    one = _cook(tmp_path, raw, "one", unit_bytes=2**30)
    assert len(_digests(many)) > 3 and _digests(many) == _digests(one)
    packed = [
        entry["source"]
        for _, raw_pack in iter_packs(str(many), skip=ONLY_META)
        for entry in json.loads(bytes(raw_pack.members[fmt.META]))["sequences"]
    ]
    rejected = [json.loads(line)["source"] for line in (many / fmt.REJECTS_NAME).read_text().splitlines()]
    assert sorted(int(s.rpartition("#")[2]) for s in packed) == [n for n, kind in kinds.items() if kind == "chat"]
    assert [int(s.rpartition("#")[2]) for s in rejected] == [n for n, kind in kinds.items() if kind == "broken"]
    counts = json.loads((many / fmt.MANIFEST_NAME).read_text())["counts"]
    assert counts["records_in"] == counts["sources_packed"] + counts["records_rejected"] == len(packed) + len(rejected)


@pytest.mark.parametrize("unit_bytes", [1, 997])
def test_units_of_a_line_or_less_still_number_every_line(tmp_path: Path, unit_bytes: int) -> None:
    raw = tmp_path / "chats.jsonl"
    kinds = _raw(raw)
    out = _cook(tmp_path, raw, "tiny", unit_bytes)
    rejected = [json.loads(line)["source"] for line in (out / fmt.REJECTS_NAME).read_text().splitlines()]
    assert [int(s.rpartition("#")[2]) for s in rejected] == [n for n, kind in kinds.items() if kind == "broken"]
