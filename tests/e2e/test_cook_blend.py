"""`cook blend` through the CLI on small cooked datasets: the YAML Energon loads and samples by weight
through ``make_loader``, the exact report numbers, contract mismatches and non-datasets refused with
nothing written, a dataset reached twice warned about, and ``cook stats blend.yaml``."""

from __future__ import annotations

import itertools
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from megatron.energon import WorkerConfig

from cook import format as fmt
from cook.cli.main import main
from cook.packfiles import read_npy
from cook.reader import ContractMismatch, Expectation, make_loader
from tests.unit.reader.reader_data import conversations, cook_jsonl, stored_packs


def _rows(count: int, word: str) -> list[dict[str, Any]]:
    """``conversations`` with ``word`` in every turn, so that no pack of one part equals one of another."""
    rows = conversations(count, words=7)
    for row in rows:
        for message in row["messages"]:
            message["content"] = f"{word} {message['content']}"
    return rows


@pytest.fixture(scope="module")
def chat(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cook_jsonl(tmp_path_factory.mktemp("blend_chat"), _rows(16, "apple"), seq_len=128, shard_size=4)


@pytest.fixture(scope="module")
def code(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cook_jsonl(tmp_path_factory.mktemp("blend_code"), _rows(30, "zebra"), seq_len=128, shard_size=4)


@pytest.fixture(scope="module")
def longer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cook_jsonl(tmp_path_factory.mktemp("blend_long"), _rows(8, "apple"), seq_len=256, shard_size=4)


def _counts(dataset: Path) -> dict[str, int]:
    return json.loads((dataset / fmt.MANIFEST_NAME).read_text())["counts"]


def _blend(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str]:
    code = main(["blend", *args, "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out) if code == 0 else None, err


def test_report_numbers_are_exact(chat: Path, code: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "blend.yaml"
    rc, report, err = _blend(capsys, "chat=3", str(chat), "code=1", str(code), "--output", str(output),
                             "--global-batch-size", "4", "--steps", "100")  # fmt: skip
    assert rc == 0 and "warning" not in err
    a, b = _counts(chat), _counts(code)
    per_pack_a, per_pack_b = 0.75 * a["target_tokens"] / a["packs"], 0.25 * b["target_tokens"] / b["packs"]
    assert report["seq_len"] == 128 and report["warnings"] == []
    assert report["target_tokens_per_pack"] == pytest.approx(per_pack_a + per_pack_b, rel=1e-12)
    efficiency = (0.75 * a["tokens"] / a["packs"] + 0.25 * b["tokens"] / b["packs"]) / 128
    assert report["packing_efficiency"] == pytest.approx(efficiency, rel=1e-12)
    first, second = report["parts"]
    assert (first["name"], first["weight"], first["packs"], first["tokens"], first["target_tokens"]) == (
        "chat",
        3.0,
        a["packs"],
        a["tokens"],
        a["target_tokens"],
    )
    assert (second["name"], second["packs"], second["target_tokens"]) == ("code", b["packs"], b["target_tokens"])
    assert (first["sample_share"], second["sample_share"]) == (0.75, 0.25)
    assert first["target_token_share"] == pytest.approx(per_pack_a / (per_pack_a + per_pack_b), rel=1e-12)
    assert first["target_token_share"] + second["target_token_share"] == pytest.approx(1.0)
    assert first["steps_per_epoch"] == pytest.approx(a["packs"] / 3.0, rel=1e-12)  # 4 packs a step, 3 of chat
    assert second["steps_per_epoch"] == pytest.approx(b["packs"] / 1.0, rel=1e-12)
    assert first["epochs"] == pytest.approx(300 / a["packs"], rel=1e-12)
    assert second["epochs"] == pytest.approx(100 / b["packs"], rel=1e-12)


def test_table_and_yaml(chat: Path, code: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "data").mkdir()
    inside = tmp_path / "data" / "chat"
    shutil.copytree(chat, inside)
    output = tmp_path / "blend.yaml"
    assert main(["blend", "chat=2.5", str(inside), "code=1", str(code), "--output", str(output)]) == 0
    out, err = capsys.readouterr()
    assert err == f"cook blend: wrote {output}\n"
    header, row_a, row_b = out.splitlines()[:3]
    assert header.split() == [
        "part",
        "weight",
        "packs",
        "target",
        "tokens",
        "samples",
        "targets",
        "steps/epoch",
        "epochs",
    ]
    assert row_a.split()[:5] == ["chat", "2.5", str(_counts(chat)["packs"]), f"{_counts(chat)['target_tokens']:,}",
                                 "71.43%"]  # fmt: skip
    assert row_b.split()[-2:] == ["-", "-"]
    document = yaml.safe_load(output.read_text())
    assert document["__class__"] == "MetadatasetV2"
    assert document["splits"]["train"]["blend"] == [
        {"weight": 2.5, "path": "data/chat", "subflavors": {"blend_part": "chat"}},  # under the YAML's dir: relative
        {"weight": 1.0, "path": str(code.resolve()), "subflavors": {"blend_part": "code"}},
    ]


def _fingerprints(*datasets: tuple[str, Path]) -> dict[bytes, str]:
    """Each pack's input_ids bytes -> the part it belongs to (every pack distinct)."""
    found = {}
    total = 0
    for name, dataset in datasets:
        for members in stored_packs(dataset).values():
            found[read_npy(members[fmt.INPUT_IDS]).astype(np.int64).tobytes()] = name
            total += 1
    assert len(found) == total
    return found


def test_energon_samples_the_parts_by_weight(chat: Path, code: Path, tmp_path: Path) -> None:
    output = tmp_path / "blend.yaml"
    assert main(["blend", "chat=3", str(chat), "code=1", str(code), "--output", str(output)]) == 0
    part_of = _fingerprints(("chat", chat), ("code", code))
    config = WorkerConfig(rank=0, world_size=1, num_workers=0, seed_offset=7)
    loader = make_loader(output, batch_size=1, worker_config=config)
    drawn = Counter(part_of[batch.input_ids[0].numpy().tobytes()] for batch in itertools.islice(loader, 1200))
    # 1,200 draws at p = 0.75: standard deviation 1.25%; the bound is 5 of them
    assert abs(drawn["chat"] / 1200 - 0.75) < 0.0625, drawn
    assert drawn["chat"] + drawn["code"] == 1200
    with pytest.raises(ContractMismatch, match=r"out does not match the trainer: seq_len 128 != 256"):
        make_loader(output, batch_size=1, worker_config=config, expect=Expectation(seq_len=256))  # every part checked


def test_contract_mismatch_is_refused_before_writing(
    chat: Path, longer: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "blend.yaml"
    assert main(["blend", "chat=1", str(chat), "long=1", str(longer), "--output", str(output)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "cook: error: blended datasets chat and long have different contracts: seq_len 128 != 256\n"
    assert not output.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["a=1", "{raw}"],
            "blend part a: {raw} has no cook_manifest.json (not a cooked dataset, or an unfinished run)",
        ),
        (["a=1", "{chat}", "b=0", "{chat}"], "blend part b: weight '0' must be a number > 0"),
        (["a=x", "{chat}"], "blend part a: weight 'x' must be a number > 0"),
        (["a=1", "{chat}", "b=1"], "usage: give NAME=WEIGHT DIR pairs; 'b=1' has no partner"),
        (["{chat}", "a=1"], "usage: '{chat}' is not NAME=WEIGHT (e.g. chat=3)"),
        (["a=1", "{chat}", "a=2", "{chat}"], "blend: part name(s) a given more than once"),
        (["a=1", "{chat}", "--steps", "10"], "--steps: must be >= 1 and needs --global-batch-size"),
    ],
)
def test_bad_parts_exit_2_with_one_line(
    args: list[str], message: str, chat: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    output = tmp_path / "blend.yaml"
    fill = {"raw": str(raw), "chat": str(chat)}
    argv = [arg.format(**fill) for arg in args]
    assert main(["blend", *argv, "--output", str(output)]) == 2
    assert capsys.readouterr().err == f"cook: error: {message.format(**fill)}\n"
    assert not output.exists()


def test_unreadable_manifest_exits_2(chat: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(chat, broken)
    (broken / fmt.MANIFEST_NAME).write_text("{")
    assert main(["blend", "a=1", str(broken), "--output", str(tmp_path / "b.yaml")]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"cook: error: blend part a: {broken / fmt.MANIFEST_NAME}: cannot be read")
        and err.count("\n") == 1
    )


def test_a_dataset_reached_twice_warns(
    chat: Path, code: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    link = tmp_path / "link"
    link.symlink_to(chat)
    copy = tmp_path / "copy"
    shutil.copytree(chat, copy)
    output = tmp_path / "blend.yaml"
    rc, report, err = _blend(capsys, "a=1", str(chat), "b=1", str(code), "c=1", str(link), "d=1", str(copy),
                             "--output", str(output))  # fmt: skip
    assert rc == 0 and output.is_file()
    twice = "Energon draws it as two parts, with the sum of their weights"
    assert report["warnings"] == [
        f"parts a and c are one dataset (same directory): {twice}",
        f"parts a and d are one dataset (same manifest sha256): {twice}",
    ]
    assert [line for line in err.splitlines() if "warning" in line] == [
        f"cook blend: warning: {line}" for line in report["warnings"]
    ]


def test_stats_of_a_blend(chat: Path, code: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "blend.yaml"
    assert main(["blend", "chat=3", str(chat), "code=1", str(code), "--output", str(output), "--json"]) == 0
    blend = json.loads(capsys.readouterr().out)
    assert main(["stats", str(chat), "--json", "--global-batch-size", "2"]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert main(["stats", str(output), "--json", "--global-batch-size", "2"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert [(p["name"], p["weight"], p["path"]) for p in stats["parts"]] == [
        ("chat", 3.0, str(chat.resolve())),
        ("code", 1.0, str(code.resolve())),
    ]
    assert stats["parts"][0]["stats"] == alone
    assert stats["blend"]["global_batch_size"] == 2
    assert [p["target_token_share"] for p in stats["blend"]["parts"]] == [
        p["target_token_share"] for p in blend["parts"]
    ]
    assert main(["stats", str(output)]) == 0
    text = capsys.readouterr().out
    assert f"== part chat (weight 3): {chat.resolve()}\npacks " in text
    assert f"== blend {output}\npart " in text
    assert main(["stats", str(output), "--html", str(tmp_path / "s.html")]) == 2
    assert "give one cooked dataset, not the blend" in capsys.readouterr().err


@pytest.mark.parametrize("content", [b"a: 1\n", b"", b"\xff\xfe\x00binary"])
def test_stats_of_a_file_that_is_no_blend_exits_2(
    content: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "other.yaml"
    path.write_bytes(content)
    assert main(["stats", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"cook: error: {path}: not a blend of weight/path entries (") and err.count("\n") == 1
