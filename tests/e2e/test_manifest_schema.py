"""``cook_manifest.json`` against ``schemas/manifest.v1.schema.json``: a written manifest validates, the
typed ``Manifest`` writes exactly the schema's sections and reads back what it wrote, and a damaged
manifest does not validate."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest
import yaml

from cook import format as fmt
from cook.cli.main import main
from cook.manifest import Manifest
from tests.conftest import REPO, pipeline_dict, write_jsonl

SCHEMA = json.loads((REPO / "schemas" / "manifest.v1.schema.json").read_text())
ROWS: list[Any] = [
    {"messages": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i} " * i}]}
    for i in range(1, 30)
] + [b"{broken", {"messages": [{"role": "user", "content": "no answer"}]}]


@pytest.fixture(scope="module")
def manifest(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("manifest")
    data = write_jsonl(root / "in.jsonl", ROWS)
    pipeline = root / "p.yaml"
    pipeline.write_text(yaml.safe_dump(pipeline_dict(str(data), str(root / "out"))))
    assert main(["run", str(pipeline), "--workers", "0", "--quiet"]) == 0
    return dict(json.loads((root / "out" / fmt.MANIFEST_NAME).read_text()))


def test_written_manifest_validates(manifest: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    jsonschema.validate(manifest, SCHEMA)
    assert manifest["rejects_by_reason"] == {"bad_json": 1, "no_target": 1}
    assert manifest["counts"]["records_in"] == len(ROWS)
    assert manifest["seq_len"] == manifest["pipeline"]["packing"]["seq_len"] == manifest["contract"]["seq_len"]


def test_written_manifest_reads_back_typed(manifest: dict[str, Any]) -> None:
    typed = Manifest.from_dict(manifest)
    assert typed.to_dict() == manifest
    assert typed.seq_len == manifest["seq_len"] and typed.counts.records_in == len(ROWS)


def test_typed_manifest_writes_the_schema_sections(manifest: dict[str, Any]) -> None:
    optional = set(SCHEMA["properties"]) - set(SCHEMA["required"])
    assert set(SCHEMA["required"]) <= set(manifest) <= set(SCHEMA["properties"])
    assert set(manifest) - set(SCHEMA["required"]) <= optional
    counts = SCHEMA["properties"]["counts"]
    assert tuple(counts["properties"]) == fmt.MANIFEST_COUNT_KEYS
    assert tuple(counts["required"]) == fmt.COUNT_KEYS
    assert SCHEMA["properties"]["schema_version"]["const"] == fmt.MANIFEST_SCHEMA_VERSION


@pytest.mark.parametrize(
    "damage",
    [
        lambda m: m["counts"].pop("packs"),
        lambda m: m["counts"].__setitem__("tokens", -1),
        lambda m: m["shards"][0].__setitem__("sha256", "xyz"),
        lambda m: m.__setitem__("surprise", 1),
        lambda m: m["tokenizer"].pop("vocab_size"),
    ],
)
def test_damaged_manifest_is_refused(manifest: dict[str, Any], damage: Any) -> None:
    broken = copy.deepcopy(manifest)
    damage(broken)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, SCHEMA)
