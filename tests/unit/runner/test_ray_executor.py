"""RayExecutor under the driver: bounded outstanding jobs, results equal to in-process, and only
small things (summaries, shard entries) cross to the driver."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from cook.config import config_from_dict
from cook.runner.local import LocalExecutor
from cook.runner.pipeline import run_pipeline
from cook.runner.ray_executor import IN_FLIGHT_PER_ACTOR, RayExecutor
from tests.conftest import pipeline_dict, write_jsonl


def _chat(i: int, words: int) -> dict:
    return {
        "messages": [
            {"role": "user", "content": f"question {i} " + "word " * words},
            {"role": "assistant", "content": f"answer {i}"},
        ]
    }


class CountingRayExecutor(RayExecutor):
    """Records the most jobs outstanding at any submission."""

    peak = 0

    def _submit(self, job, attempt, tries):
        super()._submit(job, attempt, tries)
        CountingRayExecutor.peak = max(CountingRayExecutor.peak, self.outstanding())


def _shards(out: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.glob("shard-*"))}


@pytest.mark.slow  # Ray and in-process over uneven units: ~4 s (test_one_and_two_actors_give_identical_output stays in make test)
def test_uneven_units_bounded_and_identical_to_in_process(tmp_path: Path, ray_session) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    # one heavy file first, then many light ones: the light units finish before the heavy one
    write_jsonl(raw / "a_heavy.jsonl", [_chat(i, 300) for i in range(300)])
    for f in range(12):
        write_jsonl(raw / f"b_light_{f:02d}.jsonl", [_chat(f * 10 + i, 2) for i in range(3)])
    extra = {"packing": {"buffer_size": 50, "seq_len": 2048}, "output": {"shard_size": 2}}
    ray_config = config_from_dict(pipeline_dict(str(raw), str(tmp_path / "ray"), **extra))
    local_config = config_from_dict(pipeline_dict(str(raw), str(tmp_path / "local"), **extra))

    summary = run_pipeline(ray_config, lambda c: CountingRayExecutor(c, None, 2), progress=False)
    run_pipeline(local_config, LocalExecutor, progress=False)

    assert CountingRayExecutor.peak <= IN_FLIGHT_PER_ACTOR * 2
    assert _shards(tmp_path / "ray") == _shards(tmp_path / "local") and summary.shards > 4
    shard_bytes = sum(p.stat().st_size for p in (tmp_path / "ray").glob("shard-*.tar"))
    assert 0 < summary.driver_received_bytes < shard_bytes / 4  # ids and masks never cross
    assert sum(summary.shards_by_writer.values()) == summary.shards
    assert not (tmp_path / "ray" / ".cook-progress").exists()  # the stage went with the finished run
