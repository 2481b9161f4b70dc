"""Issue 8: every hostile input is rejected with its reason code or handled safely; the run exits 0;
every valid record around them lands; records_in = sources_packed + records_rejected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cook import format as fmt
from cook.cli.main import main
from tests.adversarial.corpus import OK, build_corpus
from tests.conftest import pipeline_dict


@pytest.fixture(scope="module")
def cooked(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], Path]:
    root = tmp_path_factory.mktemp("adversarial")
    expected = build_corpus(root)
    data = pipeline_dict(
        str(root / "data"),
        str(root / "out"),
        input={"media_root": str(root / "media"), "max_record_bytes": 2_000_000},
        packing={"seq_len": 8192, "pad_multiple": 8},
        media={
            "image": {"min_patches": 16, "max_patches": 256},
            "video": {"target_patches": 64, "min_frames": 2, "max_frames": 4},
            "audio": {"max_duration_s": 600},
        },
    )
    (root / "p.yaml").write_text(yaml.safe_dump(data))
    assert main(["run", str(root / "p.yaml"), "--workers", "0", "--quiet"]) == 0
    return expected, root / "out"


def _outcomes(out: Path) -> dict[str, str]:
    outcomes = {}
    for line in (out / fmt.REJECTS_NAME).read_text().splitlines():
        reject = json.loads(line)
        assert reject["source"] not in outcomes, reject
        outcomes[reject["source"]] = reject["reason"]
    manifest = json.loads((out / fmt.MANIFEST_NAME).read_text())
    for shard in manifest["shards"]:
        import tarfile

        with tarfile.open(out / shard["name"]) as tar:
            for member in tar:
                if member.name.endswith(fmt.META):
                    for seq in json.loads(tar.extractfile(member).read())["sequences"]:
                        assert seq["source"] not in outcomes, seq["source"]
                        outcomes[seq["source"]] = OK
    return outcomes


def test_corpus_is_large_enough(cooked: tuple[dict[str, str], Path]) -> None:
    expected, _ = cooked
    assert len(expected) >= 40
    assert len(set(expected.values()) - {OK}) >= 15


def test_every_case_has_its_expected_outcome(cooked: tuple[dict[str, str], Path]) -> None:
    expected, out = cooked
    got = _outcomes(out)
    wrong = {source: (want, got.get(source)) for source, want in expected.items() if got.get(source) != want}
    assert not wrong, json.dumps(wrong, indent=1)
    assert set(got) == set(expected)


def test_accounting_holds(cooked: tuple[dict[str, str], Path]) -> None:
    expected, out = cooked
    counts = json.loads((out / fmt.MANIFEST_NAME).read_text())["counts"]
    assert counts["records_in"] == len(expected)
    assert counts["records_in"] == counts["sources_packed"] + counts["records_rejected"]
    assert counts["sources_packed"] == sum(1 for v in expected.values() if v == OK)


def test_pathological_record_hits_the_time_budget(tmp_path: Path) -> None:
    from PIL import Image

    big = tmp_path / "media"
    big.mkdir()
    Image.new("RGB", (4000, 3000), (1, 2, 3)).save(big / "big.png")
    (tmp_path / "data").mkdir()
    rows = [
        {
            "messages": [
                {"role": "user", "content": [{"type": "image", "image": "big.png"}]},
                {"role": "assistant", "content": "x"},
            ]
        },
        {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]},
    ]
    (tmp_path / "data" / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = pipeline_dict(
        str(tmp_path / "data"),
        str(tmp_path / "out"),
        input={"media_root": str(big)},
        ray={"record_timeout_s": 0.001},
        packing={"seq_len": 16384},
    )
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(data))
    assert main(["run", str(tmp_path / "p.yaml"), "--workers", "0", "--quiet"]) == 0
    rejects = [json.loads(line) for line in (tmp_path / "out" / fmt.REJECTS_NAME).read_text().splitlines()]
    assert [r["reason"] for r in rejects] == ["timeout"]
