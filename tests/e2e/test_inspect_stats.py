"""`cook inspect` and `cook stats` on a small cooked dataset (one pack given crafted media): what they show,
their exit codes (an unreadable manifest included), --json and its keys in order, and the --plot PNG."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from cook import format as fmt
from cook.cli.inspect_cmd import marked_text
from cook.cli.main import main
from cook.view.tokens import TokenView
from tests.conftest import pipeline_dict, write_jsonl
from tests.unit.validate.dataset_edits import add_media, free_prompt_span, load, rewrite_pack, save
from tests.unit.validate.packs_data import IDS

RECORDS = [
    {
        "messages": [
            {"role": "user", "content": f"Question {i}: " + "tell me more " * (5 + i % 30)},
            {"role": "assistant", "content": f"Answer {i}. " + "indeed. " * (i % 40)},
        ]
    }
    for i in range(30)
] + [
    {
        "messages": [
            {"role": "user", "content": "colour \x1b[31mred\x1b[0m please"},
            {"role": "assistant", "content": "done"},
        ]
    },
    b"{broken",
    {"messages": [{"role": "robot", "content": "x"}]},
]


@pytest.fixture(scope="module")
def cooked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("inspect")
    write_jsonl(tmp / "raw.jsonl", RECORDS)
    data = pipeline_dict(
        str(tmp / "raw.jsonl"), str(tmp / "out"), packing={"seq_len": 1024, "pad_multiple": 8}, output={"shard_size": 2}
    )
    (tmp / "p.yaml").write_text(yaml.safe_dump(data))
    assert main(["run", str(tmp / "p.yaml"), "--quiet", "--workers", "0"]) == 0
    return tmp / "out"


@pytest.fixture(scope="module")
def with_media(cooked: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Pack 1 gets one 32x32 image (1 embedding) and one 1 s audio clip (13 tokens), placeholders included."""
    out = tmp_path_factory.mktemp("media") / "ds"
    shutil.copytree(cooked, out)

    def change(members: dict[str, bytes]) -> None:
        ids = load(members, fmt.INPUT_IDS)
        seq, start = free_prompt_span(members, 18)
        ids[start : start + 18] = [
            IDS[fmt.IMG_START],
            IDS[fmt.IMAGE_TOKEN],
            IDS[fmt.IMG_END],
            IDS[fmt.AUDIO_START],
            *[IDS[fmt.AUDIO_TOKEN]] * 13,
            IDS[fmt.AUDIO_END],
        ]
        save(members, fmt.INPUT_IDS, ids)
        add_media(members, seq, image_size=(1, 32, 32), audio_frames=100)

    rewrite_pack(out, 1, change)
    return out


SUMMARY_KEYS = ["packs", "sources", "seq_len", "records_in", "tokens", "padded_tokens", "padding_tokens",
                "packing_efficiency", "stored_fill", "fill", "sequence_length", "sources_per_pack", "media_tokens", "stored_bytes", "rejects"]  # fmt: skip
STEPS_KEYS = ["global_batch_size", "steps_per_epoch", "target_tokens_per_step"]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_inspect_shows_sources_text_and_targets(cooked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "inspect", str(cooked), "--pack", "0")
    assert code == 0
    assert out.startswith("pack 0 (pack-000000000) in shard-000000.tar") and "media: none" in out
    shard = cooked / fmt.shard_name(0)
    import tarfile

    with tarfile.open(shard) as tar:
        handle = tar.extractfile(f"{fmt.pack_key(0)}.{fmt.META}")
        assert handle is not None
        sources = [s["source"] for s in json.loads(handle.read())["sequences"]]
    assert all(source in out for source in sources)
    assert "<|im_start|>assistant\n[[<think></think>Answer" in out and "<|im_end|>]]" in out
    assert "\x1b" not in out  # not a terminal: brackets, no colour


def test_inspect_escapes_control_characters(cooked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "inspect", str(cooked), "--source", "raw.jsonl#31")
    assert code == 0 and "colour \\x1b[31mred\\x1b[0m please" in out and "\x1b" not in out
    assert ">" in out.split("text (targets")[0]


def test_inspect_media_summary(with_media: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "inspect", str(with_media), "--pack", "1")
    assert code == 0
    assert "pixel_patches  uint8 [4, 768]" in out and "image  1 x 32 x 32  -> 4 patches, 1 embeddings" in out
    assert "100 frames (1.00 s) -> 13 tokens" in out
    assert "<img><image></img><so_start><so_embedding>×13<so_end>" in out


def test_inspect_exit_codes(cooked: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(capsys, "inspect", str(cooked), "--pack", "999")[0] == 2
    assert _run(capsys, "inspect", str(cooked), "--pack", "-1")[0] == 2
    assert _run(capsys, "inspect", str(cooked), "--source", "nowhere.jsonl#1")[0] == 2
    code, out, err = _run(capsys, "inspect", str(tmp_path))
    assert code == 2 and out == "" and err.count("\n") == 1


def test_marked_text_in_colour() -> None:
    import numpy as np

    ids, mask = np.array([1, 2, 3, 5, 5, 5]), np.array([0, 1, 1, 0, 0, 0])
    view = TokenView(decode=lambda t: "".join(f"<{i}>" for i in t))
    text = marked_text(ids, mask, view, {5: "<image>"}, color=True)
    assert text == "<1>\x1b[1;32m<2><3>\x1b[0m<image>×3"


def test_inspect_without_a_tokenizer_shows_ids_and_control_tokens_by_name(
    with_media: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No tokenizer loads: each id is a number, the manifest's control ids are named, a placeholder
    run is collapsed, and every token stays apart from the next (``<image>`` then ``</img>``)."""
    code, out, err = _run(capsys, "inspect", str(with_media), "--pack", "1", "--tokenizer", "/nonexistent")
    assert code == 0 and "showing token ids" in err
    text = out.split("text (targets in [[brackets]])\n", 1)[1]
    assert (
        f"{fmt.IMG_START} {fmt.IMAGE_TOKEN} {fmt.IMG_END} {fmt.AUDIO_START} {fmt.AUDIO_TOKEN}×13 {fmt.AUDIO_END} "
        in text
    )
    assert "<|im_start|> " in text
    plain = text.split(f"{fmt.AUDIO_END} ", 1)[1].split(f"{fmt.IM_END}", 1)[0].replace("[[", " ")
    assert plain.split() and all(word.isdigit() for word in plain.split())  # the text between: ids
    assert "[[" in text and not re.search(r"\]\]\S|\s\]\]", text)  # a target run is marked apart: ``[[209 13]] 198``


def test_stats_json_matches_the_manifest(cooked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "stats", str(cooked), "--json")
    stats, manifest = json.loads(out), json.loads((cooked / fmt.MANIFEST_NAME).read_text())
    assert code == 0 and out.count("\n") == 1
    assert stats["packs"] == manifest["counts"]["packs"] and stats["sources"] == manifest["counts"]["sources_packed"]
    assert stats["packing_efficiency"] == manifest["packing_efficiency"]
    assert stats["stored_fill"] == manifest["stored_fill"]
    assert stats["padding_tokens"] == manifest["counts"]["padding_tokens"]
    assert stats["rejects"] == manifest["rejects_by_reason"] == {"bad_json": 1, "bad_role": 1}
    assert sum(stats["fill"]["histogram"]["counts"]) == stats["packs"]
    assert sum(stats["sources_per_pack"]["histogram"]["counts"]) == stats["packs"]
    assert sum(stats["sequence_length"]["histogram"]["counts"]) == stats["sources"]
    lengths = stats["sequence_length"]
    assert lengths["min"] <= lengths["median"] <= lengths["p90"] <= lengths["max"] <= 1024
    assert stats["media_tokens"] == {
        "image": 0,
        "video": 0,
        "audio": 0,
        "image_share": 0.0,
        "video_share": 0.0,
        "audio_share": 0.0,
    }
    assert list(stats) == [*SUMMARY_KEYS, "truncated_sequences", "truncated_tokens"]
    stored = stats["stored_bytes"]
    assert stored["image"] == stored["video"] == stored["audio"] == 0 and stored["text"] > 0
    assert stored["text_per_token"] == stored["text"] / stats["tokens"]
    assert list(stats["fill"]) == ["min", "median", "p90", "max", "mean", "histogram"]
    code, out, _ = _run(capsys, "stats", str(cooked), "--json", "--global-batch-size", "4")
    steps = json.loads(out)
    assert list(steps) == [*SUMMARY_KEYS, "truncated_sequences", "truncated_tokens", *STEPS_KEYS]
    assert {k: v for k, v in steps.items() if k not in STEPS_KEYS} == stats


@pytest.mark.parametrize("command", ["stats", "inspect"])
def test_an_unreadable_manifest_is_one_line(
    cooked: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(cooked, broken)
    manifest = json.loads((broken / fmt.MANIFEST_NAME).read_text())
    del manifest["counts"]["packs"]
    (broken / fmt.MANIFEST_NAME).write_text(json.dumps(manifest))
    code, out, err = _run(capsys, command, str(broken))
    path = broken / fmt.MANIFEST_NAME
    assert (code, out) == (1, "")
    assert err == f"cook: error: {path}: counts.packs is missing or not an integer; run cook validate\n"


def test_stats_media_share_table_and_plot(with_media: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "stats", str(with_media), "--json")
    media = json.loads(out)["media_tokens"]
    assert code == 0 and (media["image"], media["video"], media["audio"]) == (1, 0, 13) and media["audio_share"] > 0
    png = tmp_path / "stats.png"
    code, out, _ = _run(capsys, "stats", str(with_media), "--plot", str(png))
    assert code == 0 and "packing efficiency" in out and "sources per pack" in out and "bad_json" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    assert _run(capsys, "stats", str(tmp_path))[0] == 2


def test_stats_plot_without_matplotlib_is_one_line(
    cooked: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    png = tmp_path / "stats.png"
    code, out, err = _run(capsys, "stats", str(cooked), "--plot", str(png))
    assert code == 2 and out == "" and not png.exists()
    assert err.strip().count("\n") == 0 and "cook[plot]" in err and "matplotlib" in err
