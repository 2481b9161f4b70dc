"""`cook validate` never says VALID for a directory megatron.energon cannot load, without `--deep`: a run
whose every record was rejected (zero packs, only dataset.yaml in .nv-meta), and a cooked dataset whose
.nv-meta lacks a file or whose split names no shard. Each case is INVALID (exit 1) with its own code,
and Energon's get_train_dataset indeed fails on it."""

from __future__ import annotations

import json
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from cook import format as fmt
from cook.cli.main import main
from tests.conftest import pipeline_dict, write_jsonl
from tests.e2e.energon_load import load_all_packs

ANSWERED = [
    {
        "messages": [
            {"role": "user", "content": f"Question {i}: " + "why " * 20},
            {"role": "assistant", "content": f"Answer {i}. " + "because. " * (i % 30)},
        ]
    }
    for i in range(30)
]
UNANSWERED = [{"messages": [{"role": "user", "content": f"no answer {i}"}]} for i in range(5)] + [b"{broken"]


def _cook(tmp: Path, name: str, records: list, expected_exit: int) -> Path:
    write_jsonl(tmp / f"{name}.jsonl", records)
    data = pipeline_dict(
        str(tmp / f"{name}.jsonl"),
        str(tmp / name),
        packing={"seq_len": 256, "pad_multiple": 8},
        output={"shard_size": 2},
    )
    (tmp / f"{name}.yaml").write_text(yaml.safe_dump(data))
    assert main(["run", str(tmp / f"{name}.yaml"), "--quiet", "--workers", "0"]) == expected_exit
    return tmp / name


@pytest.fixture(scope="module")
def cooked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _cook(tmp_path_factory.mktemp("loadable"), "ok", ANSWERED, 0)


def _validate(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, set[str]]:
    capsys.readouterr()  # what cook run printed
    code = main(["validate", str(path), "--json", "--quiet", "--jobs", "1", *extra])
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] == (code == 0)
    return code, {error["code"] for error in report["errors"]}


def _energon_fails(path: Path) -> bool:
    try:
        load_all_packs(str(path), 1)
    except Exception:  # whatever Energon raises for an unloadable directory
        return True
    return False


def test_the_cooked_dataset_loads(cooked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert len(list(cooked.glob("*.tar"))) > 2
    assert _validate(cooked, capsys) == (0, set())
    assert not _energon_fails(cooked)


def test_deep_validation_prints_no_pin_memory_warning(cooked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Energon's loader asks torch for pinned memory; without an accelerator torch would warn on each load."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert _validate(cooked, capsys, "--deep") == (0, set())
    assert [str(w.message) for w in seen if "pin_memory" in str(w.message)] == []


def test_a_run_that_rejected_every_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = _cook(tmp_path, "rejected", UNANSWERED, 1)  # cook run: a run that packed nothing fails
    assert sorted(p.name for p in (out / fmt.NV_META_DIR).iterdir()) == [fmt.DATASET_YAML]
    assert json.loads((out / fmt.MANIFEST_NAME).read_text())["counts"]["packs"] == 0
    code, found = _validate(out, capsys)
    assert code == 1 and found == {"no_packs", "nv_meta_missing"}
    with pytest.raises(ValueError, match="Invalid dataset"):
        load_all_packs(str(out), 1)
    capsys.readouterr()
    assert main(["validate", str(out), "--quiet"]) == 1
    assert capsys.readouterr().out.startswith("INVALID")


def _write(name: str, text: str) -> Callable[[Path], None]:
    return lambda meta: (meta / name).write_text(text)


SPLIT_TRAIN_EMPTY = "split_parts:\n  train: []\nexclude: []\n"
SPLIT_VAL_ONLY = f"split_parts:\n  val:\n  - {fmt.shard_name(0)}\nexclude: []\n"


@pytest.mark.parametrize(
    ("change", "expected", "energon_fails"),
    [
        (lambda meta: (meta / fmt.SPLIT_YAML).unlink(), {"nv_meta_missing"}, True),
        (lambda meta: (meta / fmt.INFO_JSON).unlink(), {"nv_meta_missing"}, True),
        (lambda meta: (meta / fmt.DATASET_YAML).unlink(), {"nv_meta_missing"}, True),
        (lambda meta: (meta / fmt.INDEX_SQLITE).unlink(), {"nv_meta_missing"}, False),  # SPEC §8 promises it
        (_write(fmt.SPLIT_YAML, SPLIT_TRAIN_EMPTY), {"split_empty", "nv_meta"}, True),
        (_write(fmt.SPLIT_YAML, SPLIT_VAL_ONLY), {"split_empty", "nv_meta"}, True),
    ],
    ids=["no-split", "no-info", "no-dataset-yaml", "no-index", "empty-train", "val-only"],
)
def test_incomplete_nv_meta(
    cooked: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    change: Callable[[Path], None],
    expected: set[str],
    energon_fails: bool,
) -> None:
    copy = tmp_path / "ds"
    shutil.copytree(cooked, copy)
    change(copy / fmt.NV_META_DIR)
    assert _validate(copy, capsys) == (1, expected)
    if energon_fails:
        assert _energon_fails(copy)


def test_every_shard_excluded(cooked: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "ds"
    shutil.copytree(cooked, copy)
    split = copy / fmt.NV_META_DIR / fmt.SPLIT_YAML
    names = sorted(p.name for p in copy.glob("*.tar"))
    assert len(names) > 1
    excluded = "".join(f"- {name}\n" for name in names)
    split.write_text(split.read_text().replace("exclude: []\n", f"exclude:\n{excluded}"))
    assert _validate(copy, capsys) == (1, {"split_empty", "nv_meta"})
    assert _energon_fails(copy)
    split.write_text(split.read_text().replace(f"- {names[0]}\n", "", 1))
    # one shard still loads: the split is no longer empty, but excluding a shard is still an error
    assert _validate(copy, capsys) == (1, {"nv_meta"})
