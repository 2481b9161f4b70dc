"""Packing efficiency and stored fill, one definition each, on a dataset where they differ: two records
packed into one pack whose stored length (T = 3,072, pad_multiple 1,024) is far below seq_len 16,384.
The run summary, the manifest, ``cook stats`` (text and ``--json``) and its HTML page print the same
names, rules and values, and ``cook validate`` checks the manifest's figures (``stored_fill`` optional)."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from cook import format as fmt
from cook.cli.main import main
from tests.conftest import REPO, pipeline_dict, write_jsonl
from tests.unit.validate.dataset_edits import edit_manifest

RECORDS = [
    {
        "messages": [
            {"role": "user", "content": "Tell me about packing."},
            {"role": "assistant", "content": "Packing puts several sequences into one pack. " * 60},
        ]
    },
    {
        "messages": [
            {"role": "user", "content": "And padding?"},
            {"role": "assistant", "content": "Padding rounds each sequence up. " * 40},
        ]
    },
]
TOKENS, PADDING, SEQ_LEN = 1764, 1308, 16384  # one pack, stored T = 1764 + 1308 = 3072
EFFICIENCY = "10.77% (tokens / (packs × seq_len))"  # 1764 / 16384
STORED_FILL = "57.42% (tokens / stored tokens)"  # 1764 / 3072


@pytest.fixture(scope="module")
def cooked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The dataset and the run's summary table."""
    tmp = tmp_path_factory.mktemp("figures")
    write_jsonl(tmp / "raw.jsonl", RECORDS)
    data = pipeline_dict(str(tmp / "raw.jsonl"), str(tmp / "out"), packing={"seq_len": SEQ_LEN, "pad_multiple": 1024})
    (tmp / "p.yaml").write_text(yaml.safe_dump(data))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["run", str(tmp / "p.yaml"), "--quiet", "--workers", "0"]) == 0
    return tmp / "out", out.getvalue()


def _rows(table: str) -> dict[str, str]:
    """``name  value`` lines -> {name: value}, for the rows named below."""
    names = ("tokens", "padding tokens", "packs x seq_len", "packing efficiency", "stored fill")
    return {
        name: line[len(name) :].strip() for line in table.splitlines() for name in names if line.startswith(name + " ")
    }


def test_the_run_summary(cooked: tuple[Path, str]) -> None:
    assert _rows(cooked[1]) == {
        "tokens": "1,764",
        "padding tokens": "1,308 (each sequence to packing.pad_multiple)",
        "packs x seq_len": "16,384 (tokens + padding + tail)",
        "packing efficiency": EFFICIENCY,
        "stored fill": STORED_FILL,
    }


def test_the_manifest(cooked: tuple[Path, str]) -> None:
    manifest = json.loads((cooked[0] / fmt.MANIFEST_NAME).read_text())
    counts = manifest["counts"]
    assert (counts["packs"], counts["tokens"], counts["padding_tokens"], manifest["seq_len"]) == (
        1,
        TOKENS,
        PADDING,
        SEQ_LEN,
    )
    assert manifest["packing_efficiency"] == 1764 / 16384 == 0.107666015625
    assert manifest["stored_fill"] == 1764 / 3072 == 0.57421875
    jsonschema.validate(manifest, json.loads((REPO / "schemas" / "manifest.v1.schema.json").read_text()))


def test_the_run_json(cooked: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    """``cook run --json`` on the finished run: both figures, as in the manifest."""
    pipeline = cooked[0].parent / "p.yaml"
    assert main(["run", str(pipeline), "--quiet", "--workers", "0", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["already_finished"] is True
    assert (summary["packing_efficiency"], summary["stored_fill"]) == (0.107666015625, 0.57421875)


def test_cook_stats_text_and_json(cooked: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", str(cooked[0])]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert f"packing efficiency  {EFFICIENCY}" in lines and f"stored fill         {STORED_FILL}" in lines
    assert main(["stats", str(cooked[0]), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["tokens"], stats["padded_tokens"], stats["padding_tokens"]) == (TOKENS, 3072, PADDING)
    assert (stats["packing_efficiency"], stats["stored_fill"]) == (0.107666015625, 0.57421875)
    assert stats["fill"]["median"] == 3072 / 16384  # the pack's T / seq_len


def test_cook_stats_html_page(cooked: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    page = tmp_path / "stats.html"
    assert main(["stats", str(cooked[0]), "--html", str(page)]) == 0
    html = page.read_text()
    assert f"<tr><th>packing efficiency</th><td>{EFFICIENCY}</td></tr>" in html
    assert f"<tr><th>stored fill</th><td>{STORED_FILL}</td></tr>" in html
    capsys.readouterr()


def _validate(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[dict[str, Any]]]:
    code = main(["validate", str(root), "--json", "--quiet", "--jobs", "1"])
    return code, json.loads(capsys.readouterr().out)["errors"]


@pytest.mark.parametrize(
    ("change", "code", "detail"),
    [
        (lambda m: m.pop("stored_fill"), None, None),  # a manifest written before stored_fill
        (lambda m: m.__setitem__("stored_fill", 0.5), "manifest_count", "stored_fill 0.5 != tokens / stored tokens"),
        (
            lambda m: m.__setitem__("stored_fill", "57%"),
            "manifest_invalid",
            "stored_fill is not an integer or a number",
        ),
        (
            lambda m: m.__setitem__("packing_efficiency", 0.57421875),
            "manifest_count",
            "packing_efficiency 0.57421875 != tokens / (packs × seq_len) = 0.107666015625",
        ),
    ],
)
def test_cook_validate_checks_both_figures(
    cooked: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Any, code: Any, detail: Any
) -> None:
    root = tmp_path / "ds"
    shutil.copytree(cooked[0], root)
    edit_manifest(root, change)
    exit_code, errors = _validate(root, capsys)
    if code is None:
        assert (exit_code, errors) == (0, [])
    else:
        assert exit_code == 1 and [e["code"] for e in errors] == [code] and detail in errors[0]["detail"]
