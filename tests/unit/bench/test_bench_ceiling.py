"""bench_ceiling's row: each repeat's 2-actor speed-up over the bare loop's 2-process speed-up measured
in the same repeat, the median of those ratios over the steady repeats judged against the target; the
gauge's drift; job_breakdown's process kinds."""

import pytest

from bench.bench_ceiling import Gauge, _row
from bench.bench_job import Workload
from bench.job_breakdown import _kind

WORK = Workload("text", "pipelines/text_sft.yaml", (), {}, {}, rejects_expected=True)


def test_the_row_judges_each_repeat_against_its_own_ceiling() -> None:
    series = {
        "wall0": [50.0, 52.0, 40.0],  # median 50
        "wall2": [25.0, 30.0, 20.0],  # median 25
        "tree0": [49.0, 50.0, 51.0],
        "tree2": [56.0, 57.0, 58.0],
        "speedup": [2.0, 1.6, 1.8],
        "pair": [2.0, 1.6, 1.5],  # two in-process cooks at once: 2-actor / theirs 1.0, 1.0, 1.2
    }
    # ratios 2.0/2.5 = 0.80, 1.6/1.6 = 1.00, 1.8/2.0 = 0.90: median 0.90
    steady = [True] * 3
    row, share = _row(WORK, series, [2.5, 1.6, 2.0], steady)
    assert share == 0.9
    assert row == (
        "| text | 50.00 | 25.00 | 50.00 | 57.00 | 2.00x (1.60 .. 2.00) | 2.00x (1.60 .. 2.50) "
        "| 0.80 1.00 0.90 | **0.90** | 0.90 | met | 1.60x | 1.00 |"
    )
    _, paired = _row(WORK, series, [2.0, 2.5, 1.6], steady)  # the same ceilings in another order: 1.00 0.64 1.125
    assert paired == 1.0
    _, short = _row(WORK, series, [2.5, 2.0, 2.2], steady)
    assert short is not None and round(short, 3) == 0.8


def test_only_steady_repeats_are_judged_and_fewer_than_three_are_not() -> None:
    series = {
        "wall0": [50.0] * 4,
        "wall2": [25.0] * 4,
        "tree0": [50.0] * 4,
        "tree2": [57.0] * 4,
        "speedup": [2.0, 1.0, 1.8, 1.6],
        "pair": [2.0] * 4,
    }
    ceilings = [2.0] * 4  # ratios 1.00 0.50 0.90 0.80
    row, share = _row(WORK, series, ceilings, [True, False, True, True])
    assert share == 0.9  # 1.00 0.90 0.80, the unsteady 0.50 left out
    assert "| 1.00 (0.50) 0.90 0.80 | **0.90** | 0.85 | met |" in row  # all four's median beside it
    row, share = _row(WORK, series, ceilings, [True, False, False, True])
    assert share is None
    assert "| 1.00 (0.50) (0.90) 0.80 | - | 0.85 | not judged |" in row


def test_the_gauge_reads_the_machine_and_its_drift_is_slowest_over_fastest() -> None:
    gauge = Gauge()
    gauge.readings = []
    gauge.read()
    gauge.read()
    assert len(gauge.readings) == 2 and all(r > 0 for r in gauge.readings)
    gauge.readings = [0.5, 0.55, 0.6]
    assert gauge.drift() == pytest.approx(1.2)


def test_job_breakdown_names_ray_processes_by_kind() -> None:
    assert _kind("ray::RayWorker.run") == "actor"
    assert _kind("python .../default_worker.py --node-ip-address=127.0.0.1 --raylet-name=x") == "actor"
    assert _kind("/venv/lib/ray/core/src/ray/raylet/raylet --raylet_socket_name=y") == "raylet"
    assert _kind("/venv/lib/ray/core/src/ray/gcs/gcs_server --port=1") == "gcs_server"
    assert _kind("python -m something_else") == "other"


def test_a_block_reads_the_gauge_around_its_jobs_and_ceiling_and_runs_the_pair_after(monkeypatch) -> None:
    import bench.bench_ceiling as ceiling

    steps: list[str] = []

    class Recording(Gauge):
        def __init__(self) -> None:
            self.readings = []

        def read(self) -> None:
            steps.append("gauge")
            self.readings.append(1.0)

    def jobs(work, use_json, series, workers, tenth):  # type: ignore[no-untyped-def]
        steps.append("jobs")
        series.update(wall0=[20.0], wall2=[12.0], speedup=[20.0 / 12.0])

    monkeypatch.setattr(ceiling, "measure_once", jobs)
    monkeypatch.setattr(ceiling, "_ceiling", lambda work, n: steps.append("ceiling") or 1.9)
    walls = {"big": 14.0, "small": 4.0}
    monkeypatch.setattr(ceiling, "pair_wall", lambda work, size: steps.append(f"pair {size}") or walls[size])
    gauge = Recording()
    gauge.readings = [5.0]  # a reading from the block before is not this block's
    series, got = ceiling._one_block(WORK, False, gauge, 16)
    assert steps == ["gauge", "jobs", "gauge", "ceiling", "gauge", "pair big", "pair small"]
    assert gauge.readings == [1.0, 1.0, 1.0] and got == 1.9
    assert series["pair"] == [2.0]  # in-process 20 s over the pair's marginal 10 s
