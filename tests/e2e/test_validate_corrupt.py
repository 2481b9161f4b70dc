"""`cook validate` on a corpus of corrupted datasets made from one good cook: each corruption is caught
with its own error code, and the crafted ones (tar rewritten, .tar.idx, sha256, bytes and counts
recomputed) break ONLY the intended invariant. The clean dataset passes (exit 0), a non-dataset exits 2.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import yaml

from cook import format as fmt
from cook.cli.main import main
from tests.conftest import pipeline_dict, write_jsonl
from tests.unit.validate.dataset_edits import add_media, edit_manifest, free_prompt_span, load, rewrite_pack, save
from tests.unit.validate.packs_data import IDS

RECORDS = [
    {
        "messages": [
            {"role": "user", "content": f"Question {i}: " + "please explain why " * 12},
            {"role": "assistant", "content": f"Answer {i}. " + "because. " * (i % 50)},
        ]
    }
    for i in range(40)
] + [b"{broken", {"messages": [{"role": "user", "content": "no answer"}]}]


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("validate")
    write_jsonl(tmp / "raw.jsonl", RECORDS)
    data = pipeline_dict(
        str(tmp / "raw.jsonl"),
        str(tmp / "clean"),
        packing={"seq_len": 1024, "pad_multiple": 8},
        output={"shard_size": 2},
    )
    (tmp / "p.yaml").write_text(yaml.safe_dump(data))
    assert main(["run", str(tmp / "p.yaml"), "--quiet", "--workers", "0"]) == 0
    return tmp / "clean"


@pytest.fixture
def copy(clean: Path, tmp_path: Path) -> Path:
    out = tmp_path / "ds"
    shutil.copytree(clean, out)
    return out


def validate(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict]:
    code = main(["validate", str(path), "--json", "--quiet", "--jobs", "1", *extra])
    out = capsys.readouterr().out
    assert out.count("\n") == 1, out  # exactly one JSON object
    return code, json.loads(out)


def codes(report: dict) -> set[str]:
    return {error["code"] for error in report["errors"]}


def test_clean_dataset_passes(clean: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = validate(clean, capsys)
    manifest = json.loads((clean / fmt.MANIFEST_NAME).read_text())
    assert code == 0 and report["valid"] and report["errors"] == [] and report["errors_total"] == 0
    assert report["packs"] == manifest["counts"]["packs"] > 3  # several shards
    assert report["sources"] == manifest["counts"]["sources_packed"] == 40
    assert set(report) >= {"valid", "packs", "sources", "errors"}


def test_parallel_and_deep_agree_on_the_clean_dataset(clean: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One process, two jobs and ``--deep`` give the same verdict and the same counts."""
    keys = ("valid", "packs", "sources", "errors", "errors_total")
    serial = validate(clean, capsys)
    for flags in (("--jobs", "2"), ("--deep",)):
        code, report = validate(clean, capsys, *flags)
        assert code == serial[0] == 0, (flags, report["errors"])
        assert {k: report[k] for k in keys} == {k: serial[1][k] for k in keys}, flags


def test_not_a_dataset_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for path in (tmp_path / "missing", tmp_path):
        assert main(["validate", str(path), "--json"]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.count("\n") == 1
    (tmp_path / fmt.MANIFEST_NAME).write_text("{}")
    assert main(["validate", str(tmp_path)]) == 2  # no .nv-meta


def _shard(root: Path, index: int = 0) -> Path:
    return root / fmt.shard_name(index)


def test_truncated_tar(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shard = _shard(copy, 1)
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])  # inside a pack
    code, report = validate(copy, capsys)
    assert code == 1 and "tar_truncated" in codes(report)
    assert "sha256" in codes(report)


def test_flipped_byte_inside_a_member(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shard = _shard(copy)
    data = bytearray(shard.read_bytes())
    data[512 + 128 + 40] ^= 0x01  # inside input_ids.npy of pack 0 (after its .npy header): one id changes
    shard.write_bytes(bytes(data))
    code, report = validate(copy, capsys)
    assert code == 1 and codes(report) == {"sha256"}


def test_missing_idx(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Path(str(_shard(copy)) + fmt.INDEX_SUFFIX).unlink()
    assert codes(validate(copy, capsys)[1]) == {"idx_missing"}


def test_wrong_idx_offsets(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    idx = Path(str(_shard(copy)) + fmt.INDEX_SUFFIX)
    offsets = np.frombuffer(idx.read_bytes(), "<u8").copy()
    offsets[1] += 512
    idx.write_bytes(offsets.tobytes())
    assert codes(validate(copy, capsys)[1]) == {"idx_mismatch"}


def _cast(name: str, dtype: str) -> Callable[[dict[str, bytes]], None]:
    def change(members: dict[str, bytes]) -> None:
        members[name] = fmt.npy_bytes(fmt.load_npy(members[name]).astype(dtype))

    return change


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (_cast(fmt.LOSS_MASK, "int64"), "dtype"),
        (lambda m: m.__setitem__(fmt.INPUT_IDS, fmt.npy_bytes(fmt.load_npy(m[fmt.INPUT_IDS])[None, :])), "shape"),
        (lambda m: m.pop(fmt.CU_SEQLENS), "member_missing"),
        (lambda m: m.__setitem__("state.pkl", b"\x80\x04K\x01."), "pickle_member"),
        (lambda m: m.__setitem__("notes.txt", b"hi"), "member_unknown"),
    ],
)
def test_member_corruptions(copy: Path, capsys: pytest.CaptureFixture[str], change: Callable, expected: str) -> None:
    rewrite_pack(copy, 1, change)
    assert codes(validate(copy, capsys)[1]) == {expected}


def test_cu_seqlens_not_increasing(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def change(members: dict[str, bytes]) -> None:
        cu = fmt.load_npy(members[fmt.CU_SEQLENS])
        cu[1] = cu[2]
        members[fmt.CU_SEQLENS] = fmt.npy_bytes(cu)

    rewrite_pack(copy, 0, change)
    assert codes(validate(copy, capsys)[1]) == {"cu_seqlens"}


def test_loss_mask_at_a_sequence_start(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def change(members: dict[str, bytes]) -> None:
        mask, meta = load(members, fmt.LOSS_MASK), json.loads(members[fmt.META])
        mask[fmt.load_npy(members[fmt.CU_SEQLENS_PADDED])[1]] = 1
        meta["sequences"][1]["targets"] += 1  # keep meta.json and the manifest in step: only the start is wrong
        save(members, fmt.LOSS_MASK, mask, meta)

    rewrite_pack(copy, 0, change)
    edit_manifest(copy, lambda m: m["counts"].__setitem__("target_tokens", m["counts"]["target_tokens"] + 1))
    assert codes(validate(copy, capsys)[1]) == {"loss_mask_start"}


def test_loss_mask_in_padding(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def change(members: dict[str, bytes]) -> None:
        mask, meta = load(members, fmt.LOSS_MASK), json.loads(members[fmt.META])
        cu_padded = fmt.load_npy(members[fmt.CU_SEQLENS_PADDED])
        i = next(i for i, s in enumerate(meta["sequences"]) if cu_padded[i + 1] - cu_padded[i] > s["length"])
        mask[cu_padded[i] + meta["sequences"][i]["length"]] = 1
        save(members, fmt.LOSS_MASK, mask)

    rewrite_pack(copy, 0, change)
    edit_manifest(copy, lambda m: m["counts"].__setitem__("target_tokens", m["counts"]["target_tokens"] + 1))
    assert codes(validate(copy, capsys)[1]) == {"loss_mask_padding"}


def test_token_id_at_the_vocab_size(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    vocab = json.loads((copy / fmt.MANIFEST_NAME).read_text())["tokenizer"]["vocab_size"]

    def change(members: dict[str, bytes]) -> None:
        ids = load(members, fmt.INPUT_IDS)
        ids[3] = vocab
        save(members, fmt.INPUT_IDS, ids)

    rewrite_pack(copy, 0, change)
    assert codes(validate(copy, capsys)[1]) == {"token_range"}


@pytest.mark.parametrize(("image_tokens", "expected"), [(1, set()), (0, {"placeholder_count"})])
def test_placeholders_against_crafted_media(
    copy: Path, capsys: pytest.CaptureFixture[str], image_tokens: int, expected: set[str]
) -> None:
    """A text pack given one 32x32 image (4 patches, 1 embedding) and one 1 s audio clip (13 tokens)."""

    def change(members: dict[str, bytes]) -> None:
        ids = load(members, fmt.INPUT_IDS)
        seq, start = free_prompt_span(members, 3 + 15)
        ids[start : start + 3] = [IDS[fmt.IMG_START], IDS[fmt.IMAGE_TOKEN] if image_tokens else 100, IDS[fmt.IMG_END]]
        ids[start + 3 : start + 18] = [IDS[fmt.AUDIO_START]] + [IDS[fmt.AUDIO_TOKEN]] * 13 + [IDS[fmt.AUDIO_END]]
        save(members, fmt.INPUT_IDS, ids)
        add_media(members, seq, image_size=(1, 32, 32), audio_frames=100)

    rewrite_pack(copy, 0, change)
    code, report = validate(copy, capsys, "--deep")
    assert codes(report) == expected and code == (0 if not expected else 1)


def test_manifest_count_records_in_and_rejects(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit_manifest(copy, lambda m: m["counts"].__setitem__("tokens", m["counts"]["tokens"] + 1))
    assert codes(validate(copy, capsys)[1]) == {"manifest_count"}
    edit_manifest(
        copy, lambda m: m["counts"].update(tokens=m["counts"]["tokens"] - 1, records_in=m["counts"]["records_in"] + 1)
    )
    assert codes(validate(copy, capsys)[1]) == {"records_in"}
    edit_manifest(copy, lambda m: m["counts"].update(records_in=m["counts"]["records_in"] - 1))
    rejects = copy / fmt.REJECTS_NAME
    rejects.write_text("".join(rejects.read_text().splitlines(keepends=True)[1:]))
    assert codes(validate(copy, capsys)[1]) == {"rejects_count"}


def test_sha256_mismatch(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit_manifest(copy, lambda m: m["shards"][0].__setitem__("sha256", "0" * 64))
    code, report = validate(copy, capsys)
    assert code == 1 and codes(report) == {"sha256"} and report["errors"][0]["shard"] == fmt.shard_name(0)


def test_duplicate_source(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def change(members: dict[str, bytes]) -> None:
        meta = json.loads(members[fmt.META])
        meta["sequences"][1]["source"] = meta["sequences"][0]["source"]
        members[fmt.META] = json.dumps(meta).encode()

    rewrite_pack(copy, 0, change)
    assert codes(validate(copy, capsys)[1]) == {"source_duplicate"}


def test_energon_load_is_checked_with_deep(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    split = copy / fmt.NV_META_DIR / fmt.SPLIT_YAML
    split.write_text(f"split_parts:\n  train:\n  - {fmt.shard_name(0)}\nexclude: []\n")
    assert codes(validate(copy, capsys)[1]) == {"nv_meta"}
    assert codes(validate(copy, capsys, "--deep")[1]) == {"nv_meta", "energon_load"}


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE samples SET byte_offset = byte_offset + 512 WHERE tar_file_id = 0 AND sample_index = 1",
        "DELETE FROM samples WHERE tar_file_id = 1 AND sample_index = 0",
        "DELETE FROM sample_parts WHERE tar_file_id = 0",
        "UPDATE samples SET tar_file_id = 99 WHERE tar_file_id = 0 AND sample_index = 0",
    ],
)
def test_stale_energon_index(copy: Path, capsys: pytest.CaptureFixture[str], statement: str) -> None:
    with contextlib.closing(sqlite3.connect(copy / fmt.NV_META_DIR / fmt.INDEX_SQLITE)) as db:
        db.execute(statement)
        db.commit()
    code, report = validate(copy, capsys)
    assert code == 1 and codes(report) == {"nv_meta"}
    assert "index.sqlite" in report["errors"][0]["detail"]


def test_unreadable_energon_index(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (copy / fmt.NV_META_DIR / fmt.INDEX_SQLITE).write_bytes(b"not a database" * 100)
    assert codes(validate(copy, capsys)[1]) == {"nv_meta"}


def test_text_report_and_error_cap(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for shard in json.loads((copy / fmt.MANIFEST_NAME).read_text())["shards"]:
        Path(str(copy / shard["name"]) + fmt.INDEX_SUFFIX).unlink()
    code, report = validate(copy, capsys, "--max-errors", "2")
    assert code == 1 and len(report["errors"]) == 2 and report["errors_total"] > 2
    assert main(["validate", str(copy), "--quiet"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("INVALID") and "idx_missing" in out
