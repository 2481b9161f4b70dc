"""``cook repack`` end to end (issue 32): a repack of a cooked dataset writes the shards a fresh cook of
the same raw input with the new packing settings writes, byte for byte (text and media; a smaller and
a larger seq_len; two partitions merged), for any executor and across a kill; sequences too long for
the new seq_len are rejected and counted; sources must share one contract; --set takes packing.* and
output.* keys only."""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
import yaml

from cook import format as fmt
from cook.cli.main import main
from cook.runner.output_dir import STATE_NAME
from tests.conftest import DEMO_DATA, REPO, pipeline_dict, write_jsonl
from tests.e2e.energon_load import load_all_packs
from tests.e2e.test_resume_and_scale import _records

COOK = [sys.executable, "-m", "cook.cli.main"]
MANIFEST_SCHEMA = json.loads((REPO / "schemas" / "manifest.v1.schema.json").read_text())
PACKED_KEYS = ("sources_packed", "packs", "tokens", "target_tokens", "padding_tokens", "truncated_sequences")


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("raw")
    write_jsonl(root / "a.jsonl", _records(500, "q"))
    write_jsonl(root / "b.jsonl", _records(250, "r"))
    return root


def _cook(out: Path, input_path: Path, seq_len: int, **sections: dict) -> Path:
    data = pipeline_dict(
        str(input_path),
        str(out),
        packing={"seq_len": seq_len, "buffer_size": 40},
        output={"shard_size": 3},
        input={"unit_bytes": 20_000},
        ray={"checkpoint_interval_s": 0},  # the state is saved at each commit: the kill test waits on windows
    )
    for name, values in sections.items():
        data.setdefault(name, {}).update(values)
    pipeline = out.parent / f"{out.name}.yaml"
    pipeline.write_text(yaml.safe_dump(data))
    assert main(["run", str(pipeline), "--workers", "0", "--quiet"]) == 0
    return out


def _repack(sources: list[Path], out: Path, *sets: str, workers: str = "0") -> int:
    argv = ["repack", *map(str, sources), "--output", str(out), "--workers", workers, "--quiet"]
    return main(argv + [arg for s in sets for arg in ("--set", s)])


def _manifest(out: Path) -> dict:
    return json.loads((out / fmt.MANIFEST_NAME).read_text())


def _shards(out: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.glob("shard-*"))}


def _assert_equal_to_fresh(repacked: Path, fresh: Path) -> None:
    assert _shards(repacked) == _shards(fresh) and _shards(fresh)
    got, want = _manifest(repacked), _manifest(fresh)
    assert {k: got["counts"][k] for k in PACKED_KEYS} == {k: want["counts"][k] for k in PACKED_KEYS}
    counts = got["counts"]
    assert counts["records_in"] == counts["sources_packed"] + counts["records_rejected"]
    assert sum(entry["sequences"] for entry in got["lineage"]) == counts["records_in"]
    jsonschema.validate(got, MANIFEST_SCHEMA)
    assert main(["validate", str(repacked)]) == 0


@pytest.fixture(scope="module")
def text_source(raw: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = _cook(tmp_path_factory.mktemp("src") / "src512", raw, 512)
    counts = _manifest(out)["counts"]
    assert counts["truncated_sequences"] == 0 and counts["sources_packed"] == 750 and counts["records_rejected"] == 9
    return out


@pytest.mark.parametrize("seq_len", [256, pytest.param(1024, marks=pytest.mark.slow)])
def test_text_repack_equals_a_fresh_cook(raw: Path, text_source: Path, tmp_path: Path, seq_len: int) -> None:
    fresh = _cook(tmp_path / "fresh", raw, seq_len)
    assert _repack([text_source], tmp_path / "repacked", f"packing.seq_len={seq_len}") == 0
    _assert_equal_to_fresh(tmp_path / "repacked", fresh)
    lineage = _manifest(tmp_path / "repacked")["lineage"]
    digest = hashlib.sha256((text_source / fmt.MANIFEST_NAME).read_bytes()).hexdigest()
    assert lineage == [{"path": str(text_source), "manifest_sha256": digest, "sequences": 750}]


def test_other_algorithm_and_shard_size_equal_a_fresh_cook(raw: Path, text_source: Path, tmp_path: Path) -> None:
    sets = {"packing": {"algorithm": "first_fit_decreasing", "buffer_size": 100}, "output": {"shard_size": 5}}
    fresh = _cook(tmp_path / "fresh", raw, 512, **sets)
    flat = [f"{section}.{k}={v}" for section, values in sets.items() for k, v in values.items()]
    assert _repack([text_source], tmp_path / "repacked", *flat) == 0
    _assert_equal_to_fresh(tmp_path / "repacked", fresh)


@pytest.mark.slow  # two sources cooked and merged: ~3 s
def test_two_partitions_merged_equal_a_cook_of_both(raw: Path, tmp_path: Path) -> None:
    """a.jsonl and b.jsonl cooked by separate jobs, repacked together in input order, equal one cook of
    the directory that holds both (sorted: a, then b)."""
    part_a = _cook(tmp_path / "part_a", raw / "a.jsonl", 512)
    part_b = _cook(tmp_path / "part_b", raw / "b.jsonl", 512)
    fresh = _cook(tmp_path / "fresh", raw, 256)
    assert _repack([part_a, part_b], tmp_path / "merged", "packing.seq_len=256") == 0
    _assert_equal_to_fresh(tmp_path / "merged", fresh)
    assert [entry["sequences"] for entry in _manifest(tmp_path / "merged")["lineage"]] == [500, 250]


def test_too_long_sequences_are_rejected_and_counted(text_source: Path, tmp_path: Path) -> None:
    out = tmp_path / "short"
    assert _repack([text_source], out, "packing.seq_len=128", "packing.overflow=reject") == 0
    counts = _manifest(out)["counts"]
    rejects = [json.loads(line) for line in (out / fmt.REJECTS_NAME).read_text().splitlines()]
    assert rejects and {r["reason"] for r in rejects} == {"too_long"}
    assert counts["records_rejected"] == len(rejects) and counts["truncated_sequences"] == 0
    assert counts["records_in"] == 750 == counts["sources_packed"] + len(rejects)
    assert _manifest(out)["rejects_by_reason"] == {"too_long": len(rejects)}
    assert main(["validate", str(out)]) == 0


def test_a_repack_that_packs_nothing_exits_1_with_one_line(
    text_source: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "none"
    capsys.readouterr()
    assert _repack([text_source], out, "packing.seq_len=16", "packing.overflow=reject") == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == f"cook: error: no sequence was packed (750 rejected; see {out}/{fmt.REJECTS_NAME})"
    assert _manifest(out)["counts"]["records_rejected"] == 750


def test_truncation_follows_overflow(text_source: Path, tmp_path: Path) -> None:
    out = tmp_path / "cut"
    assert _repack([text_source], out, "packing.seq_len=128") == 0
    counts = _manifest(out)["counts"]
    assert counts["truncated_sequences"] > 0 and counts["records_rejected"] == 0 and counts["sources_packed"] == 750
    assert main(["validate", str(out)]) == 0


def test_contract_mismatch_exits_2_naming_the_field(
    raw: Path, text_source: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    other = _cook(tmp_path / "other", raw / "b.jsonl", 512, media={"image": {"max_patches": 2048}})
    capsys.readouterr()
    assert _repack([text_source, other], tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "media.max_patches 13312 != 2048" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("key", ["input.path=x", "tokenizer.path=x", "ray.num_actors=3", "media.image.mode=tiles"])
def test_set_takes_packing_and_output_keys_only(
    text_source: Path, tmp_path: Path, key: str, capsys: pytest.CaptureFixture
) -> None:
    assert _repack([text_source], tmp_path / "out", key) == 2
    err = capsys.readouterr().err
    assert err == f"cook: error: --set {key.split('=')[0]}: cook repack changes only packing.* and output.* keys\n"


def test_output_must_not_be_a_source(text_source: Path, capsys: pytest.CaptureFixture) -> None:
    assert _repack([text_source], text_source) == 2
    assert "is the repack source" in capsys.readouterr().err
    assert main(["validate", str(text_source)]) == 0


def test_rerun_of_a_finished_repack_changes_nothing(text_source: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert _repack([text_source], out, "packing.seq_len=256") == 0
    before = _shards(out)
    assert _repack([text_source], out, "packing.seq_len=256") == 0
    assert _shards(out) == before
    assert _repack([text_source], out, "packing.seq_len=1024") == 2  # a different run: refused


@pytest.mark.slow  # ~12 s; make test repacks on two actors in test_stored_frames_repack_on_two_actors_equals_in_process
def test_two_actors_equal_in_process(text_source: Path, tmp_path: Path, ray_session) -> None:
    assert _repack([text_source], tmp_path / "local", "packing.seq_len=256") == 0
    assert _repack([text_source], tmp_path / "ray", "packing.seq_len=256", workers="2") == 0
    assert _shards(tmp_path / "ray") == _shards(tmp_path / "local")


def _state_windows(out: Path) -> int:
    try:
        return json.loads((out / fmt.PROGRESS_DIR / STATE_NAME).read_text())["windows"]
    except (FileNotFoundError, json.JSONDecodeError):
        return 0


@pytest.mark.parametrize(
    ("how", "after_windows"), [(signal.SIGKILL, 2), pytest.param(signal.SIGINT, 5, marks=pytest.mark.slow)]
)
def test_interrupt_then_resume_is_identical(
    text_source: Path, tmp_path: Path, how: signal.Signals, after_windows: int
) -> None:
    reference = tmp_path / "reference"
    assert _repack([text_source], reference, "packing.seq_len=256") == 0
    out = tmp_path / "out"
    argv = [*COOK, "repack", str(text_source), "--output", str(out), "--set", "packing.seq_len=256", "--workers", "0"]
    proc = subprocess.Popen([*argv, "--quiet"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while proc.poll() is None and _state_windows(out) < after_windows:
        time.sleep(0.002)
    if proc.poll() is None:
        proc.send_signal(how)
    assert proc.wait() in (-signal.SIGKILL, 130)
    assert not (out / fmt.MANIFEST_NAME).exists() and _state_windows(out) >= after_windows
    assert _repack([text_source], out, "packing.seq_len=256") == 0
    assert _shards(out) == _shards(reference)
    assert _manifest(out)["counts"] == _manifest(reference)["counts"]


# ---------------------------------------------------------------- media: images, video (+ sound), audio
MEDIA_FILES = ("chat-media.jsonl", "granary.jsonl", "llava-media-000000.tar")


@pytest.fixture(scope="module")
def media_raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("media_raw")
    for name in MEDIA_FILES:
        shutil.copy(DEMO_DATA / name, root / name)
    return root


def _cook_media(out: Path, raw: Path, seq_len: int, storage: str = "raw") -> Path:
    demo = yaml.safe_load((REPO / "pipelines" / "demo.yaml").read_text())
    coded = {"storage": storage, "jpeg_quality": 95}
    media = {"image": demo["media"]["image"] | coded, "video": demo["media"]["video"] | coded}
    return _cook(out, raw, seq_len, input={"media_root": str(DEMO_DATA / "media")}, media=media)


@pytest.fixture(scope="module")
def media_source(media_raw: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = _cook_media(tmp_path_factory.mktemp("media_src") / "src", media_raw, 2048)
    manifest = _manifest(out)
    assert manifest["counts"]["truncated_sequences"] == 0 and manifest["counts"]["sources_packed"] >= 8
    kinds = {kind for shard in out.glob("shard-*.tar") for kind in _media_kinds(shard)}
    assert kinds == {"image", "video", "audio"}
    return out


def _media_kinds(shard: Path) -> set[str]:
    import tarfile

    with tarfile.open(shard) as tar:
        metas = [json.load(tar.extractfile(m)) for m in tar if m.name.endswith(fmt.META)]  # type: ignore[arg-type]
    return {kind for meta in metas for seq in meta["sequences"] for kind in seq["media"]}


@pytest.mark.parametrize("seq_len", [1024, pytest.param(4096, marks=pytest.mark.slow)])
def test_media_repack_equals_a_fresh_cook(media_raw: Path, media_source: Path, tmp_path: Path, seq_len: int) -> None:
    fresh = _cook_media(tmp_path / "fresh", media_raw, seq_len)
    out = tmp_path / "repacked"
    assert _repack([media_source], out, f"packing.seq_len={seq_len}") == 0
    _assert_equal_to_fresh(out, fresh)
    packs = load_all_packs(str(out), _manifest(out)["counts"]["packs"])
    assert sorted(packs) == [fmt.pack_key(i) for i in range(_manifest(out)["counts"]["packs"])]


@pytest.fixture(scope="module")
def stored_sources(media_raw: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The media input cooked at 2048 with its frames stored as png and as jpeg."""
    root = tmp_path_factory.mktemp("stored_src")
    return {storage: _cook_media(root / storage, media_raw, 2048, storage) for storage in ("png", "jpeg")}


def _frame_members(out: Path) -> list[str]:
    import tarfile

    names = []
    for shard in sorted(out.glob("shard-*.tar")):
        with tarfile.open(shard) as tar:
            names += [m.name for m in tar if fmt.parse_frame_member(m.name.partition(".")[2])]
    return names


@pytest.mark.parametrize("storage", ["png", pytest.param("jpeg", marks=pytest.mark.slow)])
def test_stored_frames_repack_equals_a_fresh_cook(
    media_raw: Path, stored_sources: dict[str, Path], tmp_path: Path, storage: str
) -> None:
    """The frame members move as they are (a jpeg is never decoded and encoded again), so the new
    shards are the bytes a fresh cook at the new seq_len writes."""
    fresh = _cook_media(tmp_path / "fresh", media_raw, 1024, storage)
    out = tmp_path / "repacked"
    assert _repack([stored_sources[storage]], out, "packing.seq_len=1024") == 0
    _assert_equal_to_fresh(out, fresh)
    frames = _frame_members(out)
    assert frames and all(name.endswith(".png" if storage == "png" else ".jpg") for name in frames)
    assert main(["validate", str(out), "--deep"]) == 0


def test_stored_frames_repack_on_two_actors_equals_in_process(
    stored_sources: dict[str, Path], tmp_path: Path, ray_session
) -> None:
    """Under Ray the stage file refers to the frames in the source shard (``FrameSpans``)."""
    source = stored_sources["jpeg"]
    assert _repack([source], tmp_path / "local", "packing.seq_len=4096") == 0
    assert _repack([source], tmp_path / "ray", "packing.seq_len=4096", workers="2") == 0
    assert _shards(tmp_path / "ray") == _shards(tmp_path / "local")
    assert _frame_members(tmp_path / "ray")
