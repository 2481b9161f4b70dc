"""Issue 31 item 6: a cook of a few hundred varied generated chats (the bench_text_varied corpus:
content-part lists, reasoning_content and inline <think>, shared system prompts, CJK, RTL, emoji,
code) through the CLI writes the same bytes with ``tokenizer.backend: hf`` and the default fast
backend, so many varied records per batch go through the same ids and masks as Hugging Face's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from bench.bench_text_varied import varied_records
from cook import format as fmt
from cook.cli.main import main
from tests.conftest import DEMO_TOKENIZER, pipeline_dict


def _cook(tmp: Path, raw: Path, backend: str) -> Path:
    out = tmp / f"out-{backend}"
    data = pipeline_dict(
        str(raw),
        str(out),
        tokenizer={"path": str(DEMO_TOKENIZER), "backend": backend, "normalize_thinking": True},
        packing={"seq_len": 4096, "buffer_size": 64},
        cooker="openai",
    )
    (tmp / f"{backend}.yaml").write_text(yaml.safe_dump(data))
    assert main(["run", str(tmp / f"{backend}.yaml"), "--workers", "0", "--quiet"]) == 0
    return out


@pytest.mark.slow  # two cooks of 300 records: ~7 CPU s
def test_varied_records_cook_to_the_same_bytes_on_both_backends(tmp_path: Path) -> None:
    pytest.importorskip("gigatoken")
    raw = tmp_path / "varied.jsonl"
    records = varied_records(300, seed=7)
    raw.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    hf, default = _cook(tmp_path, raw, "hf"), _cook(tmp_path, raw, "auto")
    manifests = [json.loads((out / fmt.MANIFEST_NAME).read_text()) for out in (hf, default)]
    assert manifests[1]["tokenizer_backend"]["name"] == "gigatoken"
    assert manifests[0]["counts"] == manifests[1]["counts"]
    assert manifests[0]["counts"]["records_rejected"] == 0 and manifests[0]["counts"]["sources_packed"] == 300
    assert len(manifests[0]["shards"]) >= 2
    for shard in manifests[0]["shards"]:
        assert (hf / shard["name"]).read_bytes() == (default / shard["name"]).read_bytes()
