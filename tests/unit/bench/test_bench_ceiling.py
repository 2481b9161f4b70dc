"""bench_ceiling's row: the 2-actor speed-up (ratio of the median marginal walls) over the bare loop's
2-process speed-up, judged against the target; job_breakdown's process kinds."""

from bench.bench_ceiling import _row
from bench.bench_job import BareScaling, Workload
from bench.job_breakdown import _kind

WORK = Workload("text", "pipelines/text_sft.yaml", (), {}, {}, rejects_expected=True)


def test_the_row_divides_the_median_speed_up_by_the_ceiling() -> None:
    series = {
        "wall0": [50.0, 52.0, 40.0],  # median 50
        "wall2": [25.0, 30.0, 20.0],  # median 25: speed-up 2.0
        "tree0": [49.0, 50.0, 51.0],
        "tree2": [56.0, 57.0, 58.0],
        "speedup": [2.0, 1.73, 2.0],
    }
    row, share = _row(WORK, series, BareScaling(None, 2.5, (2.4, 2.6)))
    assert share == 0.8
    assert row.startswith("| text | 50.00 | 25.00 | 50.00 | 57.00 | 2.00x (1.73 .. 2.00) | 2.50x | **0.80** |")
    assert row.endswith("| **not met** |")
    _, met = _row(WORK, series, BareScaling(None, 2.0, (2.0, 2.0)))
    assert met == 1.0


def test_job_breakdown_names_ray_processes_by_kind() -> None:
    assert _kind("ray::RayWorker.run") == "actor"
    assert _kind("python .../default_worker.py --node-ip-address=127.0.0.1 --raylet-name=x") == "actor"
    assert _kind("/venv/lib/ray/core/src/ray/raylet/raylet --raylet_socket_name=y") == "raylet"
    assert _kind("/venv/lib/ray/core/src/ray/gcs/gcs_server --port=1") == "gcs_server"
    assert _kind("python -m something_else") == "other"
