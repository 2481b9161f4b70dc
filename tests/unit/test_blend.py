"""``cook.blend``: the shares of the module docstring's worked example, exactly; weights; duplicate
detection by shards; YAML paths relative under the YAML's directory; ``read_blend`` refusing other YAML."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from cook.blend import (
    BlendPart,
    PartSpec,
    blend_report,
    blend_yaml,
    check_weight,
    duplicates,
    read_blend,
)
from cook.errors import ConfigError
from tests.unit.test_manifest import MANIFEST


def _part(name: str, weight: float, packs: int, target_tokens: int, tokens: int, path: str = "/d") -> BlendPart:
    counts = dataclasses.replace(MANIFEST.counts, packs=packs, target_tokens=target_tokens, tokens=tokens)
    manifest = dataclasses.replace(MANIFEST, counts=counts)
    return BlendPart(PartSpec(name, weight, f"{path}/{name}"), manifest, name * 64)


def test_worked_example() -> None:
    a, b = _part("a", 3, 1000, 200_000, 204_800), _part("b", 1, 500, 300_000, 128_000)
    report = blend_report([a, b], global_batch_size=100, steps=300)
    first, second = report.parts
    assert (first.sample_share, second.sample_share) == (0.75, 0.25)
    assert (first.target_token_share, second.target_token_share) == (0.5, 0.5)  # 150 target tokens a draw each
    assert report.target_tokens_per_pack == 300.0
    assert report.packing_efficiency == pytest.approx(0.85)  # (0.75 * 204.8 + 0.25 * 256) / 256
    assert (first.steps_per_epoch, second.steps_per_epoch) == (1000 / 75, 20.0)
    assert (first.epochs, second.epochs) == (22.5, 15.0)
    assert blend_report([a, b]).parts[0].steps_per_epoch is None


@pytest.mark.parametrize("text", ["0", "-1", "nan", "inf", "", "two"])
def test_weights_must_be_positive_numbers(text: str) -> None:
    with pytest.raises(ConfigError, match=f"blend part x: weight {text!r} must be a number > 0"):
        check_weight("x", text)


def test_the_same_shards_are_one_dataset() -> None:
    a, b, c = _part("a", 1, 3, 9, 9), _part("b", 1, 3, 9, 9, path="/e"), _part("c", 1, 4, 9, 9)
    c = dataclasses.replace(c, manifest=dataclasses.replace(c.manifest, shards=()))
    assert duplicates([a, b, c]) == [
        "parts a and b are one dataset (same shards): Energon draws it as two parts, with the sum of their weights"
    ]


def test_yaml_paths_and_read_back(tmp_path: Path) -> None:
    (tmp_path / "parts" / "a").mkdir(parents=True)
    a = _part("a", 2, 3, 9, 9, path=str(tmp_path / "parts"))
    b = _part("b", 0.5, 3, 9, 9, path="/elsewhere")
    output = tmp_path / "blend.yaml"
    output.write_text(blend_yaml([a, b], str(output)))
    assert "path: parts/a\n" in output.read_text() and "path: /elsewhere/b\n" in output.read_text()
    assert read_blend(str(output)) == [
        PartSpec("a", 2.0, str(tmp_path / "parts" / "a")),
        PartSpec("b", 0.5, "/elsewhere/b"),
    ]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("splits: {train: {path: x}}", "not a blend of weight/path entries (KeyError('blend'))"),
        ("[1, 2]", "not a blend of weight/path entries (TypeError("),
        ("splits: {train: {blend: [{weight: 1}]}}", "not a blend of weight/path entries (KeyError('path'))"),
    ],
)
def test_read_blend_refuses_other_yaml(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "other.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        read_blend(str(path))
    assert str(err.value).startswith(f"{path}: {why}")


def test_read_blend_of_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.yaml: No such file or directory"):
        read_blend(str(tmp_path / "missing.yaml"))
