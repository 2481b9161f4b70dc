"""One pack pinned byte for byte. If this fails, the on-disk format or the tokenization changed:
that is a format change — bump format.SCHEMA_VERSION if readers must notice, record it in
CHANGELOG.md, and update the digests here."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
import yaml

from cook import format as fmt
from cook.cli.main import main
from tests.conftest import pipeline_dict, write_jsonl

ROWS = [
    {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "<think>greet</think>Hello!"},
        ]
    },
    {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]},
    {"conversations": [{"from": "human", "value": "Name a colour."}, {"from": "gpt", "value": "Blue."}]},
]
GOLDEN_SHARD_SHA256 = "7c36c9ff0327a194dc874b653061a884d9cd9aedf33936972aaebdfd4670c52e"


@pytest.mark.parametrize("switches", [[], ["--set", "ray.direct_io=true"]], ids=["buffered", "direct_io"])
def test_one_pack_is_byte_identical_to_the_golden(tmp_path: Path, switches: list[str]) -> None:
    (tmp_path / "in").mkdir()
    write_jsonl(tmp_path / "in" / "golden.jsonl", ROWS)
    data = pipeline_dict("in/golden.jsonl", str(tmp_path / "out"), packing={"seq_len": 256, "pad_multiple": 8})
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(data))
    cwd = os.getcwd()
    os.chdir(tmp_path)  # a fixed working directory (source ids are relative to the input root anyway)
    try:
        assert main(["run", "p.yaml", "--workers", "0", "--quiet", *switches]) == 0
    finally:
        os.chdir(cwd)
    manifest = json.loads((tmp_path / "out" / fmt.MANIFEST_NAME).read_text())
    assert manifest["counts"]["packs"] == 1 and manifest["counts"]["sources_packed"] == 3
    shard = (tmp_path / "out" / fmt.shard_name(0)).read_bytes()
    assert hashlib.sha256(shard).hexdigest() == manifest["shards"][0]["sha256"] == GOLDEN_SHARD_SHA256
