"""RayExecutor hands results on in input order whatever finishes first, with bounded outstanding work."""

from __future__ import annotations

from pathlib import Path

from cook.config import config_from_dict
from cook.runner.local import LocalExecutor
from cook.runner.plan import plan_units
from cook.runner.ray import IN_FLIGHT_PER_ACTOR, RayExecutor
from tests.conftest import pipeline_dict, write_jsonl


def _chat(i: int, words: int) -> dict:
    return {
        "messages": [
            {"role": "user", "content": f"question {i} " + "word " * words},
            {"role": "assistant", "content": f"answer {i}"},
        ]
    }


class CountingRayExecutor(RayExecutor):
    """Records, at every submission, how many units were submitted but not yet handed on."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.submitted = self.yielded = self.peak = 0

    def _submit(self, unit, attempt, actor=None):
        self.submitted += 1
        self.peak = max(self.peak, self.submitted - self.yielded)
        return super()._submit(unit, attempt, actor)


def test_uneven_units_come_back_in_order_and_bounded(tmp_path: Path, ray_session) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    # one heavy file first, then many light ones: the light units finish before the heavy one
    write_jsonl(raw / "a_heavy.jsonl", [_chat(i, 300) for i in range(300)])
    for f in range(12):
        write_jsonl(raw / f"b_light_{f:02d}.jsonl", [_chat(f * 10 + i, 2) for i in range(3)])
    config = config_from_dict(pipeline_dict(str(raw), str(tmp_path / "out")))
    units = plan_units(config.input)
    assert len(units) == 13

    executor = CountingRayExecutor(config, None, 2)
    try:
        results = []
        for result in executor.map_units(units):
            executor.yielded += 1
            results.append(result)
    finally:
        executor.close()
    local = list(LocalExecutor(config).map_units(units))

    assert [r.unit for r in results] == list(range(13))
    assert [[s.source for s in r.samples] for r in results] == [[s.source for s in r.samples] for r in local]
    assert all(
        (a.input_ids == b.input_ids).all()
        for r, q in zip(results, local, strict=True)
        for a, b in zip(r.samples, q.samples, strict=True)
    )
    assert executor.peak <= IN_FLIGHT_PER_ACTOR * 2
