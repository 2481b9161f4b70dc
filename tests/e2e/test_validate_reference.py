"""`cook validate --reference N`: a clean cook matches Hugging Face's apply_chat_template (ids and target
masks) in ChatML mode (the demo tokenizer) and template mode (Llama-3); a cross-record mix (a span of ids
swapped between two packed sequences, shard, .tar.idx, sha256 and Energon index rewritten so that every
SPEC §9 invariant still holds) and a moved target are caught, naming the record and the token position;
records it cannot re-read are counted as not checkable, with the reason.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from PIL import Image

from cook import format as fmt
from cook.cli.main import main
from tests.conftest import REPO, pipeline_dict, write_jsonl
from tests.unit.validate.dataset_edits import load, rewrite_pack, save

LLAMA3 = REPO / "tests" / "assets" / "templates" / "llama3"
WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "a",
    "lazy",
    "dog",
    "東京",
    "naïve",
    "emoji🙂",
    "tab\tand",
    "",
    "spaces",
]


def _text(rng: np.random.Generator, n: int) -> str:
    text = " ".join(str(rng.choice(WORDS)) for _ in range(n))
    edge = rng.integers(6)
    return ("  " + text) if edge == 0 else ("\n" + text + "\n") if edge == 1 else text


def chat_rows(count: int, seed: int = 0) -> list[dict[str, Any]]:
    """Varied OpenAI rows: system turns, several exchanges, reasoning (out of band and inline), text parts,
    loss flags, tools and native tool calls, whitespace at the edges."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(count):
        messages: list[dict[str, Any]] = [{"role": "system", "content": _text(rng, 4)}] if i % 3 == 0 else []
        for turn in range(1 + i % 3):
            messages.append({"role": "user", "content": f"Question {i}.{turn}: " + _text(rng, 5 + i % 11)})
            answer: dict[str, Any] = {"role": "assistant", "content": _text(rng, 3 + i % 17)}
            if i % 5 == 1:
                answer["reasoning_content"] = _text(rng, 6)
            elif i % 5 == 2:
                answer["content"] = f"<think>{_text(rng, 4)}</think>" + answer["content"]
            elif i % 5 == 3:
                answer["content"] = [{"type": "text", "text": _text(rng, 2)}, {"type": "text", "text": " more"}]
            if turn == 0 and i % 7 == 4:
                answer["loss"] = False
            messages.append(answer)
        row: dict[str, Any] = {"messages": messages}
        if i % 9 == 5:
            row["tools"] = [{"type": "function", "function": {"name": "lookup", "parameters": {"q": "string"}}}]
        if i % 10 == 7:
            call = {"type": "function", "function": {"name": "lookup", "arguments": {"q": str(i)}}}
            messages += [
                {"role": "user", "content": "look it up"},
                {"role": "assistant", "content": "Let me look.", "tool_calls": [call]},
                {"role": "tool", "content": f"result {i}"},
                {"role": "assistant", "content": f"It is {i}."},
            ]
        rows.append(row)
    return rows


def _cook(tmp: Path, name: str, tokenizer: dict[str, Any], rows: list[dict[str, Any]], **extra: Any) -> Path:
    inputs = tmp / f"in-{name}"
    inputs.mkdir()
    write_jsonl(inputs / "chat.jsonl", rows)
    data = pipeline_dict(
        str(inputs),
        str(tmp / name),
        tokenizer=tokenizer,
        packing={"seq_len": 1024, "pad_multiple": 8},
        output={"shard_size": 3},
        **extra,
    )
    (tmp / f"{name}.yaml").write_text(yaml.safe_dump(data))
    assert main(["run", str(tmp / f"{name}.yaml"), "--workers", "0", "--quiet"]) == 0
    return tmp / name


@pytest.fixture(scope="module")
def chatml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    long = {"messages": [{"role": "user", "content": "Go on."}, {"role": "assistant", "content": "word " * 1500}]}
    return _cook(tmp_path_factory.mktemp("ref"), "chatml", {}, [*chat_rows(40), long])  # the long one is truncated


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _cook(
        tmp_path_factory.mktemp("ref"), "template", {"path": str(LLAMA3), "chat_format": "template"}, chat_rows(30, 1)
    )


def reference(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()  # what the cook printed
    code = main(["validate", str(path), "--json", "--quiet", "--jobs", "1", *extra])
    out = capsys.readouterr().out
    assert out.count("\n") == 1, out
    return code, json.loads(out)


@pytest.mark.parametrize("fixture", ["chatml", "template"])
def test_clean_cook_matches_the_reference(fixture: str, request: pytest.FixtureRequest, capsys: Any) -> None:
    root = request.getfixturevalue(fixture)
    code, report = reference(root, capsys, "--reference", "500")
    ref = report["reference"]
    assert code == 0 and report["errors"] == [], report["errors"][:3]
    packed = json.loads((root / fmt.MANIFEST_NAME).read_text())["counts"]["sources_packed"]
    assert ref["checked"] == packed and ref["matched"] == packed and ref["mismatches"] == []
    assert ref["masks_compared"] + ref["ids_only"] == packed and ref["masks_compared"] > packed * 3 // 4
    assert ref["not_checkable"] == 0 and ref["skipped_control_text"] == 0
    assert ref["truncated_prefix_only"] == (1 if fixture == "chatml" else 0)  # compared on its cooked prefix
    # text output: one line says how many were checked and matched
    assert main(["validate", str(root), "--quiet", "--reference", "5", "--seed", "3"]) == 0
    assert "5 of 5 requested sequences checked against apply_chat_template, 5 match" in capsys.readouterr().out


def _two_sequences(members: dict[str, bytes]) -> tuple[list[dict[str, Any]], np.ndarray, np.ndarray]:
    sequences = json.loads(members[fmt.META])["sequences"]
    return sequences, load(members, fmt.CU_SEQLENS), load(members, fmt.CU_SEQLENS_PADDED)


def _pack_with_two(root: Path) -> int:
    """The index of the first pack holding two or more sequences."""
    from cook.manifest import load_manifest
    from cook.validate.reference.sample import read_pack

    for shard in load_manifest(str(root)).shards:
        for position in range(shard.packs):
            if len(read_pack(str(root), shard, position)) >= 2:
                return shard.first_pack + position
    raise AssertionError("no pack holds two sequences")


@pytest.mark.parametrize("fixture", ["chatml", "template"])
def test_a_cross_record_mix_is_caught(
    fixture: str, request: pytest.FixtureRequest, tmp_path: Path, capsys: Any
) -> None:
    root = tmp_path / "ds"
    shutil.copytree(request.getfixturevalue(fixture), root)
    index, width, where = _pack_with_two(root), 4, {}

    def swap(members: dict[str, bytes]) -> None:  # 4 ids near the end of sequence 0 <-> of sequence 1
        sequences, bounds, starts = _two_sequences(members)
        ids = load(members, fmt.INPUT_IDS)
        at = [int(bounds[i + 1] - bounds[i]) - 8 for i in (0, 1)]  # in the last answer of each
        a, b = int(starts[0]) + at[0], int(starts[1]) + at[1]
        span_a, span_b = ids[a : a + width].copy(), ids[b : b + width].copy()
        first = int(np.flatnonzero(span_a != span_b)[0])  # the first token the swap changes
        ids[a : a + width], ids[b : b + width] = span_b, span_a
        save(members, fmt.INPUT_IDS, ids)
        where.update({sequences[0]["source"]: at[0] + first, sequences[1]["source"]: at[1] + first})

    rewrite_pack(root, index, swap)
    code, report = reference(root, capsys, "--reference", "500")
    assert code == 1
    assert {e["code"] for e in report["errors"]} == {"reference_mismatch"}  # every SPEC §9 invariant holds
    found = {m["source"]: m["position"] for m in report["reference"]["mismatches"]}
    assert found == where  # both records, at the first token the swap changed
    assert all(e["key"] == fmt.pack_key(index) for e in report["errors"])
    # the text report names the record and the position
    assert main(["validate", str(root), "--quiet", "--reference", "500"]) == 1
    out = capsys.readouterr().out
    source, position = next(iter(found.items()))
    assert "INVALID" in out and f"{source}: input_ids differ at token {position}" in out


def test_a_moved_target_is_caught(chatml: Path, tmp_path: Path, capsys: Any) -> None:
    """One target token and one prompt token of the same sequence trade mask bits: counts still agree."""
    root = tmp_path / "ds"
    shutil.copytree(chatml, root)
    moved: dict[str, int] = {}

    def move(members: dict[str, bytes]) -> None:
        sequences, bounds, starts = _two_sequences(members)
        mask = load(members, fmt.LOSS_MASK)
        begin, end = int(starts[0]), int(starts[0] + bounds[1] - bounds[0])
        target, prompt = int(np.flatnonzero(mask[begin:end])[-1]), 1
        assert mask[begin + prompt] == 0
        mask[begin + target], mask[begin + prompt] = 0, 1
        save(members, fmt.LOSS_MASK, mask)
        moved[sequences[0]["source"]] = prompt

    rewrite_pack(root, 0, move)
    code, report = reference(root, capsys, "--reference", "500")
    assert code == 1 and {e["code"] for e in report["errors"]} == {"reference_mismatch"}
    (mismatch,) = report["reference"]["mismatches"]
    assert {mismatch["source"]: mismatch["position"]} == moved and "loss_mask differs" in mismatch["detail"]


def test_records_it_cannot_reread_are_named(tmp_path: Path, capsys: Any) -> None:
    """Media, a llava row, a JSON-array file and a control-token text are counted, with their reasons;
    a Parquet input is read back by row."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    inputs = tmp_path / "in"
    inputs.mkdir()
    rows = chat_rows(6, 2)
    write_jsonl(inputs / "chat.jsonl", rows)
    Image.fromarray(np.full((64, 64, 3), 200, np.uint8)).save(inputs / "cat.png")
    media = {"role": "user", "content": [{"type": "image", "image": "cat.png"}, {"type": "text", "text": "What?"}]}
    forged = {"role": "user", "content": "say <|im_end|> please"}
    write_jsonl(
        inputs / "other.jsonl",
        [
            {"messages": [media, {"role": "assistant", "content": "A cat."}]},
            {"conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello"}]},
            {"messages": [forged, {"role": "assistant", "content": "No."}]},
        ],
    )
    (inputs / "array.json").write_text(json.dumps(chat_rows(2, 3)))
    plain = [
        {"messages": [{"role": m["role"], "content": f"row {i} {m['role']}"} for m in r["messages"][-2:]]}
        for i, r in enumerate(rows)
    ]
    pq.write_table(pa.Table.from_pylist(plain), inputs / "rows.parquet", row_group_size=2)
    data = pipeline_dict(
        str(inputs),
        str(tmp_path / "out"),
        packing={"seq_len": 1024, "pad_multiple": 8},
        media={"image": {"min_patches": 4, "max_patches": 64}},
    )
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(data))
    assert main(["run", str(tmp_path / "p.yaml"), "--workers", "0", "--quiet"]) == 0
    code, report = reference(tmp_path / "out", capsys, "--reference", "100")
    ref = report["reference"]
    assert code == 0, report["errors"][:3]
    assert ref["checked"] == 12 and ref["matched"] == 12  # chat.jsonl (6) and rows.parquet (6)
    assert ref["not_checkable_reasons"] == {"JSON array input": 2, "cooker llava": 1, "media": 1}
    assert set(ref["not_checkable_sources"]) == {"array.json#1", "array.json#2", "other.jsonl#1", "other.jsonl#2"}
    assert ref["skipped_control_text_sources"] == ["other.jsonl#3"]
    assert main(["validate", str(tmp_path / "out"), "--quiet", "--reference", "100"]) == 0
    out = capsys.readouterr().out
    assert "not checkable: 4: JSON array input 2; cooker llava 1; media 1" in out and "other.jsonl#2" in out
    assert "skipped (control-token text" in out and "other.jsonl#3" in out


@pytest.mark.parametrize("value", [["--reference", "0"], ["--reference", "x"], ["--reference", "3", "--seed", "-1"]])
def test_bad_values_exit_2_with_one_line(chatml: Path, value: list[str], capsys: Any) -> None:
    assert main(["validate", str(chatml), "--quiet", *value]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
