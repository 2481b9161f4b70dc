"""``cook validate`` on a manifest's optional ``lineage`` (``cook repack``): well formed, and its
sequences add up to ``counts.records_in``."""

from __future__ import annotations

from typing import Any

import pytest

from cook.validate.manifest import lineage_problems


def _manifest(lineage: Any, records_in: int = 10) -> dict[str, Any]:
    return {"counts": {"records_in": records_in}, "lineage": lineage}


def _entry(sequences: Any = 4, sha: str = "a" * 64) -> dict[str, Any]:
    return {"path": "/data/part", "manifest_sha256": sha, "sequences": sequences}


def test_no_lineage_is_fine() -> None:
    assert lineage_problems({"counts": {"records_in": 3}}) == []


def test_sequences_that_add_up_are_fine() -> None:
    assert lineage_problems(_manifest([_entry(6), _entry(4)])) == []


def test_sequences_that_do_not_add_up() -> None:
    [problem] = lineage_problems(_manifest([_entry(6), _entry(3)]))
    assert (problem.code, problem.detail) == ("records_in", "lineage sequences add up to 9, counts.records_in is 10")


@pytest.mark.parametrize(
    ("lineage", "detail"),
    [
        ([], "cook_manifest.json: lineage is not a non-empty list"),
        ({"a": 1}, "cook_manifest.json: lineage is not a non-empty list"),
        (
            [_entry(), 3],
            "cook_manifest.json: lineage[1]: path, manifest_sha256, sequences missing or of the wrong type",
        ),
        ([_entry("4")], "cook_manifest.json: lineage[0]: sequences missing or of the wrong type"),
        ([_entry(sha="XYZ")], "cook_manifest.json: lineage[0]: a bad manifest_sha256 or sequences"),
        ([_entry(-1)], "cook_manifest.json: lineage[0]: a bad manifest_sha256 or sequences"),
    ],
)
def test_a_malformed_lineage_is_manifest_invalid(lineage: Any, detail: str) -> None:
    [problem] = lineage_problems(_manifest(lineage))
    assert (problem.code, problem.detail) == ("manifest_invalid", detail)
