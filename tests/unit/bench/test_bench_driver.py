"""bench_driver's synthetic executor drives the real pipeline to a finished run whose counts add up."""

import json
import os
from pathlib import Path

import pytest

from bench.bench_driver import SHAPES, EchoWorker, Shape, drive, replay, shape_config, unit_summary
from cook import format as fmt
from cook.runner.units import Attempt, Unit, WriteDone, decode_result, encode_jobs


@pytest.mark.parametrize(
    ("shape", "samples"),
    [
        (
            Shape("images", SHAPES["images"].pipeline, 100, True, False, 1000),
            2_550,
        ),  # windows of 1,000: 2 close mid-run
        (Shape("text", SHAPES["text"].pipeline, 500, False, False, 1000), 2_000),  # one window, closed at the end
        (Shape("video", SHAPES["video"].pipeline, 200, True, False, 1000, video=True), 1_100),  # a window closes
    ],
)
def test_synthetic_executor_drives_the_driver_to_completion(tmp_path: Path, shape: Shape, samples: int) -> None:
    out_dir = str(tmp_path / shape.name)
    summary, executor = drive(shape, samples, out_dir, actors=2)
    seq_len = shape_config(shape, out_dir).packing.seq_len
    units = -(-samples // shape.unit_records)
    made = [unit_summary(shape, unit, shape.unit_records, seq_len) for unit in range(units)]
    counts = summary.counts
    assert counts["records_in"] == units * shape.unit_records
    assert counts["records_rejected"] == sum(len(s.rejects) for s in made)
    assert counts["sources_packed"] == sum(s.samples for s in made)
    assert counts["records_in"] == counts["sources_packed"] + counts["records_rejected"]
    assert counts["tokens"] == sum(s.tokens for s in made)
    assert counts["packs"] > 0 and summary.shards > 0
    assert os.path.isfile(os.path.join(out_dir, fmt.MANIFEST_NAME))
    assert executor.store.held() == (0, 0)  # the driver dropped every unit and plan once its windows were written
    assert executor.worker_cpu_s > 0 and summary.driver_received_bytes > 0


def test_a_replay_hands_out_the_recorded_jobs_and_finishes_the_same_run(tmp_path: Path) -> None:
    """The measured run answers each job from a recording of the synthetic one: the same jobs in the
    same order (checked job by job), the same counts, shards and manifest."""
    shape = Shape("images", SHAPES["images"].pipeline, 100, True, True, 1000)
    recording: list[tuple[str, str]] = []
    recorded, _ = drive(shape, 2_550, str(tmp_path / "recorded"), actors=2, record=recording)
    assert [key for key, _ in recording][-1] == f"index {recorded.shards}"
    replayed = replay(shape, 2_550, str(tmp_path / "replayed"), recording, actors=2)
    assert replayed.counts == recorded.counts and replayed.shards == recorded.shards
    manifests = [json.loads((tmp_path / run / fmt.MANIFEST_NAME).read_text()) for run in ("recorded", "replayed")]
    assert [m["shards"] for m in manifests] == [manifests[0]["shards"]] * 2
    assert manifests[1]["counts"] == manifests[0]["counts"]
    with pytest.raises(AssertionError, match="the replay hands out"):
        replay(shape, 2_550, str(tmp_path / "mismatched"), recording[1:], actors=2)


def test_a_video_unit_samples_clips_as_omni_sft_does() -> None:
    """Video samples: an even 8 .. 32 frames of 1,008 patches each, 8 patches a token plus the frame
    prefixes, sound and text, so each length lies between the frames' tokens and seq_len."""
    seq_len = shape_config(SHAPES["video"], "out").packing.seq_len
    summary = unit_summary(SHAPES["video"], 3, 500, seq_len)
    frames = summary.n_patches // 1008
    assert (summary.n_patches % 1008 == 0).all() and (frames % 2 == 0).all()
    assert frames.min() == 8 and frames.max() == 32  # short and long clips both occur in 500
    assert (summary.lengths >= summary.n_patches // 8 + 12 * (frames // 2)).all()
    assert (summary.lengths <= seq_len).all()
    assert summary.samples + len(summary.rejects) == 500


def test_the_echo_worker_answers_each_job_of_a_call_as_the_executor_sends_them() -> None:
    """bench_driver's Ray figure stands ``EchoWorker`` in for the actors: it must read a call's jobs
    in the executor's wire form and answer each with a result the driver decodes."""
    jobs = [(Unit(i, "chat.jsonl", "jsonl", (0, 10)), Attempt()) for i in range(3)]
    payloads = EchoWorker(None, "board", 0.5).run(encode_jobs(jobs))  # type: ignore[arg-type]
    assert len(payloads) == 3
    assert all(isinstance(decode_result(p), WriteDone) for p in payloads)
