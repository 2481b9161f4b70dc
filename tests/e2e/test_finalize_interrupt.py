"""Finishing a run is crash-safe at every step (issue 13, item 1): an interrupt after any finalize
step, then a rerun, gives the uninterrupted run's files byte for byte, rejects included."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cook import format as fmt
from cook.config import load_config
from cook.runner import pipeline
from cook.runner.local import LocalExecutor
from cook.runner.output_dir import OutputDir
from cook.writer import dataset, energon_index
from tests.e2e.test_resume_and_scale import _digest, _pipeline, raw, reference  # noqa: F401


def _after(original: Callable[..., Any], calls: int) -> Callable[..., Any]:
    """``original``, raising KeyboardInterrupt right after its ``calls``-th call returns."""
    count = [0]

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        count[0] += 1
        if count[0] == calls:
            raise KeyboardInterrupt
        return result

    return wrapped


# (module, attribute, nth call): each finalize step, in the order a run finishes
POINTS = {
    "index.sqlite published": (energon_index, "build_sqlite", 1),
    ".info.json": (energon_index, "atomic_write", 1),
    "split.yaml": (energon_index, "atomic_write", 2),
    "index.uuid": (energon_index, "atomic_write", 3),
    "dataset.yaml": (energon_index, "atomic_write", 4),
    "rejects renamed": (dataset.DatasetWriter, "_close_rejects", 1),
    "manifest written": (dataset, "write_manifest", 1),
    "progress half removed": (OutputDir, "_remove_all_but_state", 1),
}


QUICK = {"index.sqlite published", "dataset.yaml", "manifest written", "progress half removed"}  # test-slow: all


@pytest.mark.parametrize("point", [p if p in QUICK else pytest.param(p, marks=pytest.mark.slow) for p in POINTS])
def test_interrupt_after_each_finalize_step(point: str, raw: Path, reference: dict, tmp_path: Path) -> None:  # noqa: F811
    out = tmp_path / "ref"
    config = load_config(str(_pipeline(tmp_path, raw, out)), [])
    module, name, calls = POINTS[point]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, name, _after(getattr(module, name), calls))
        with pytest.raises(KeyboardInterrupt):
            pipeline.run_pipeline(config, LocalExecutor, progress=False)
    summary = pipeline.run_pipeline(config, LocalExecutor, progress=False)
    assert summary.resumed
    assert _digest(out) == reference
    assert (out / fmt.REJECTS_NAME).stat().st_size > 0
    assert not (out / fmt.PROGRESS_DIR).exists() and not (out / (fmt.REJECTS_NAME + ".partial")).exists()
