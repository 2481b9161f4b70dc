"""``cook.manifest``: every field survives write -> read, an older v1 manifest reads with its defaults,
and a malformed one gives one ``ManifestError`` line naming the file and the key."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cook import format as fmt
from cook.contract import Contract, MediaSettings
from cook.manifest import (
    LineageEntry,
    Manifest,
    ManifestError,
    PackingEntry,
    ShardInfo,
    TokenizerEntry,
    load_manifest,
)
from cook.writer import manifest as manifest_writer
from cook.writer.manifest import write_manifest

MANIFEST = Manifest(
    pipeline={"packing": {"seq_len": 256, "pad_multiple": 8}, "tokenizer": {"path": "/tok"}},
    tokenizer=TokenizerEntry(
        path="/tok", sha256={"tokenizer.json": "a" * 64}, vocab_size=1000, pad_id=3, control_ids={"<|im_end|>": 7}
    ),
    tokenizer_backend={"requested": "auto", "name": "hf", "version": "4.1", "self_check": "ok"},
    counts=fmt.Counts(10, 8, 2, 3, 600, 250, 168, 1, 40),
    packing=PackingEntry(
        stats={"capacity": 256, "packs": 3, "sequences_per_pack": [[2, 1], [3, 2]]},
        algorithm="best_fit_decreasing",
        windows=2,
        windows_short_of_pack_count_multiple=1,
    ),
    rejects_by_reason={"too_long": 1, "bad_json": 1},
    shards=(ShardInfo("shard-000000.tar", 2, 0, 20480, "b" * 64), ShardInfo("shard-000001.tar", 1, 2, 10240, "c" * 64)),
    seq_len=256,
    contract=Contract(
        tokenizer_path="/tok",
        tokenizer_sha256={"tokenizer.json": "a" * 64},
        chat_format="chatml",
        template_sha256="d" * 64,
        vocab_size=1000,
        control_ids={"<|im_end|>": 7},
        media=MediaSettings(max_tiles=6, video_fps=1.5),
        seq_len=256,
        pad_multiple=8,
    ),
    cook_version="0.0.9",
    lineage=(LineageEntry("/data/part-a", "e" * 64, 6), LineageEntry("/data/part-b", "f" * 64, 4)),
)


def _written(tmp_path: Path, data: dict[str, Any]) -> str:
    (tmp_path / fmt.MANIFEST_NAME).write_text(json.dumps(data))
    return str(tmp_path)


def test_every_field_survives_write_and_read(tmp_path: Path) -> None:
    write_manifest(str(tmp_path), MANIFEST)
    written = json.loads((tmp_path / fmt.MANIFEST_NAME).read_text())
    assert written["seq_len"] == 256 and written["packing_efficiency"] == 600 / (3 * 256)
    assert written["stored_fill"] == 600 / (600 + 168)  # tokens / (tokens + padding_tokens)
    assert written["packing"]["windows_short_of_pack_count_multiple"] == 1
    assert load_manifest(str(tmp_path)) == MANIFEST
    assert Manifest.from_dict(written).to_dict() == written


def test_an_older_v1_manifest_reads_with_its_defaults(tmp_path: Path) -> None:
    old = MANIFEST.to_dict()
    for key in ("seq_len", "contract", "tokenizer_backend", "lineage"):
        del old[key]
    for key in fmt.TRUNCATION_COUNT_KEYS:
        del old["counts"][key]
    manifest = load_manifest(_written(tmp_path, old))
    assert manifest.seq_len == 256  # pipeline.packing.seq_len
    assert manifest.contract is None and manifest.tokenizer_backend is None and manifest.lineage == ()
    assert (manifest.counts.truncated_sequences, manifest.counts.truncated_tokens) == (0, 0)
    assert manifest.counts.tokens == 600 and manifest.shards == MANIFEST.shards


def _parent(data: Any, path: str) -> tuple[Any, str]:
    """The object holding ``path``'s last key (``"shards.1.sha256"``: shards[1]) and that key."""
    *parents, last = path.split(".")
    for key in parents:
        data = data[int(key)] if isinstance(data, list) else data[key]
    return data, last


def _set(path: str, value: Any) -> Any:
    def damage(data: dict[str, Any]) -> None:
        parent, key = _parent(data, path)
        parent[key] = value

    return damage


def _drop(path: str) -> Any:
    def damage(data: dict[str, Any]) -> None:
        parent, key = _parent(data, path)
        del parent[key]

    return damage


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (_set("schema_version", 2), "schema_version is 2, this cook reads 1"),
        (_set("pack_schema_version", "1"), "pack_schema_version is missing or not an integer"),
        (_drop("counts.packs"), "counts.packs is missing or not an integer"),
        (_set("counts.truncated_tokens", True), "counts.truncated_tokens is missing or not an integer"),
        (_set("tokenizer.vocab_size", 1.5), "tokenizer.vocab_size is missing or not an integer"),
        (
            _set("tokenizer.control_ids", {"<|im_end|>": "7"}),
            "tokenizer.control_ids.<|im_end|> is missing or not an integer",
        ),
        (_drop("packing.windows"), "packing.windows is missing or not an integer"),
        (_set("rejects_by_reason", []), "rejects_by_reason is missing or not an object"),
        (_set("shards", {}), "shards is missing or not a list"),
        (_set("shards", [1]), "shards[0] is not an object"),
        (_drop("shards.1.sha256"), "shards[1].sha256 is missing or not a string"),
        (_set("seq_len", None), "seq_len is missing or not an integer"),
        (_drop("pipeline"), "pipeline is missing or not an object"),
        (_drop("contract.pad_multiple"), "contract.pad_multiple is missing or not an integer"),
        (_set("contract", "x"), "contract is not an object"),
        (_set("tokenizer_backend", None), "tokenizer_backend is missing or not an object"),
        (_drop("cook_version"), "cook_version is missing or not a string"),
        (_set("lineage", {}), "lineage is missing or not a list"),
        (_set("lineage", [1]), "lineage[0] is not an object"),
        (_drop("lineage.1.manifest_sha256"), "lineage[1].manifest_sha256 is missing or not a string"),
    ],
)
def test_a_malformed_manifest_is_one_line_naming_the_key(tmp_path: Path, damage: Any, message: str) -> None:
    broken = copy.deepcopy(MANIFEST.to_dict())
    damage(broken)
    root = _written(tmp_path, broken)
    with pytest.raises(ManifestError) as caught:
        load_manifest(root)
    assert str(caught.value) == f"{tmp_path / fmt.MANIFEST_NAME}: {message}"


def test_an_older_manifest_without_any_seq_len_names_the_pipeline_key(tmp_path: Path) -> None:
    old = MANIFEST.to_dict()
    del old["seq_len"], old["pipeline"]["packing"]["seq_len"]
    with pytest.raises(ManifestError, match=r": pipeline\.packing\.seq_len is missing or not an integer$"):
        load_manifest(_written(tmp_path, old))


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (b"{not json", "cannot be read (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"),
        (b"[1, 2]", "is not a JSON object"),
    ],
)
def test_an_unreadable_manifest_is_one_line(tmp_path: Path, text: bytes, why: str) -> None:
    (tmp_path / fmt.MANIFEST_NAME).write_bytes(text)
    with pytest.raises(ManifestError) as caught:
        load_manifest(str(tmp_path))
    assert str(caught.value) == f"{tmp_path / fmt.MANIFEST_NAME}: {why}"


def test_from_dict_names_its_source() -> None:
    with pytest.raises(ManifestError) as caught:
        Manifest.from_dict({"schema_version": 1}, "somewhere/cook_manifest.json")
    assert str(caught.value) == "somewhere/cook_manifest.json: pack_schema_version is missing or not an integer"


_TEXT = st.text(st.characters(codec="utf-8"), max_size=12) | st.sampled_from(['"shards"', '\n  "shards": ', "é\u2028"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    shards=st.integers(0, 11),
    pipeline=st.dictionaries(_TEXT, _TEXT | st.floats(allow_nan=False) | st.integers(), max_size=4),
    reasons=st.dictionaries(_TEXT, st.integers(0, 10**12), max_size=3),
)
def test_the_manifest_is_json_dumps_indent_2_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shards: int, pipeline: dict[str, Any], reasons: dict[str, int]
) -> None:
    """The shards go through orjson a piece at a time (3 here: pieces end inside and at the list's
    end), the rest through json; the file is what one ``json.dumps`` of the whole would write, for
    keys and values of any kind (a pipeline string holding the shards' key line, NUL, non-ASCII)."""
    monkeypatch.setattr(manifest_writer, "SHARDS_PER_PIECE", 3)
    entries = tuple(ShardInfo(f"shard-{i:06d}.tar", i % 5, 7 * i, 2**40 + i, f"{i:064x}") for i in range(shards))
    manifest = dataclasses.replace(
        MANIFEST, pipeline={**MANIFEST.pipeline, **pipeline}, rejects_by_reason=reasons, shards=entries
    )
    write_manifest(str(tmp_path), manifest)
    expected = json.dumps(manifest.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert (tmp_path / fmt.MANIFEST_NAME).read_bytes() == expected.encode("utf-8")
