"""``OutputDir`` opens what an output directory holds: fresh, locked, interrupted (same or another
pipeline), finished (the same run, another, or this pipeline but for its clean-up), ``--overwrite``;
and it finishes or discards a run. Each case by its files and its exact message."""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from cook import __version__
from cook import format as fmt
from cook.config import config_from_dict
from cook.contract import tokenizer_files_sha256
from cook.errors import ConfigError
from cook.manifest import ShardInfo
from cook.runner.output_dir import SHARD_LOG_NAME, STATE_NAME, OutputDir, OutputLock, stage_dir
from cook.runner.plan import plan_units
from cook.runner.resume import RunIdentity, RunState, run_identity, shard_line, state_json
from cook.writer.index_rows import ROWS_DIR, rows_path
from tests.conftest import DEMO_TOKENIZER, pipeline_dict, write_jsonl
from tests.unit.test_manifest import MANIFEST

ROWS = [
    {"messages": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]} for i in range(4)
]
SHARD = ShardInfo(fmt.shard_name(0), packs=2, first_pack=0, bytes=10240, sha256="ab" * 32)
COOKED = [  # what a finished run leaves, besides the progress directory
    fmt.RUN_RECORD_NAME,
    fmt.NV_META_DIR,
    fmt.MANIFEST_NAME,
    fmt.REJECTS_NAME,
    fmt.shard_name(0),
    fmt.shard_name(0) + fmt.INDEX_SUFFIX,
]


def _identity(tmp_path: Path, seq_len: int = 256) -> RunIdentity:
    if not (tmp_path / "a.jsonl").exists():  # written once: a rewrite is new input
        write_jsonl(tmp_path / "a.jsonl", ROWS)
    config = config_from_dict(
        pipeline_dict(str(tmp_path / "a.jsonl"), str(tmp_path / "out"), packing={"seq_len": seq_len})
    )
    return run_identity(config, plan_units(config.input))


def _open(out: str, identity: RunIdentity, overwrite: bool = False) -> None:
    with OutputDir(out, identity, overwrite):
        pass


def _names(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _finished(out: Path, identity: RunIdentity) -> None:
    """A finished run's files, as far as opening reads them: manifest, run record, shard, rejects."""
    out.mkdir()
    manifest = replace(
        MANIFEST,
        pipeline=identity.pipeline,
        tokenizer=replace(MANIFEST.tokenizer, sha256=tokenizer_files_sha256(str(DEMO_TOKENIZER))),
        cook_version=__version__,
    )
    (out / fmt.MANIFEST_NAME).write_text(json.dumps(manifest.to_dict()))
    OutputDir(str(out), identity).write_run_record()
    (out / fmt.NV_META_DIR).mkdir()
    for name in (fmt.REJECTS_NAME, fmt.shard_name(0), fmt.shard_name(0) + fmt.INDEX_SUFFIX):
        (out / name).write_bytes(b"x")


def _interrupted(out: Path, state: RunState) -> None:
    """An interrupted run saved at ``state`` (one shard), then wrote a second shard and more rejects."""
    out.mkdir()
    output = OutputDir(str(out), RunIdentity(state.fingerprint, {}, (), ""))
    output.state = state
    output.save()
    (out / fmt.PROGRESS_DIR / ROWS_DIR).mkdir()
    for index in (0, 1):
        (out / fmt.shard_name(index)).write_bytes(b"tar")
        (out / (fmt.shard_name(index) + fmt.INDEX_SUFFIX)).write_bytes(b"idx")
        Path(rows_path(str(out), index)).write_bytes(b"rows")
    (out / (fmt.REJECTS_NAME + ".partial")).write_bytes(b"kept\nafter the state\n")


def test_fresh_directory_is_created_locked_and_released(tmp_path: Path) -> None:
    identity = _identity(tmp_path)
    out = tmp_path / "out"
    with OutputDir(str(out), identity) as output:
        assert (out / fmt.LOCK_NAME).read_text() == str(os.getpid())
        assert output.state == RunState(identity.fingerprint)
        assert (output.resumed, output.finished, output.finished_on_disk()) == (False, False, False)
        assert output.stage_dir == stage_dir(str(out)) == str(out / fmt.PROGRESS_DIR / "stage")
    assert _names(out) == []


def test_leftovers_without_a_state_are_cleared_and_other_files_kept(tmp_path: Path) -> None:
    identity = _identity(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    for name in (fmt.shard_name(3), fmt.REJECTS_NAME + ".partial", "notes.txt"):
        (out / name).write_bytes(b"x")
    with OutputDir(str(out), identity) as output:
        assert not output.resumed
    assert _names(out) == ["notes.txt"]


def test_a_file_in_place_of_the_directory_is_refused(tmp_path: Path) -> None:
    identity = _identity(tmp_path)
    (tmp_path / "out").write_text("")
    with pytest.raises(ConfigError, match=f"^output.dir: {str(tmp_path / 'out')!r} exists and is not a directory$"):
        _open(str(tmp_path / "out"), identity)


def test_a_locked_directory_is_refused_and_untouched(tmp_path: Path) -> None:
    identity = _identity(tmp_path)
    out = tmp_path / "out"
    _finished(out, replace(identity, pipeline={}))  # a different run: opening would refuse it
    holder = OutputLock(str(out))
    holder.acquire()
    try:
        before = _names(out)
        expected = f"^output.dir: {str(out)!r} is locked by running cook pid {os.getpid()} \\({out / fmt.LOCK_NAME}\\)$"
        with pytest.raises(ConfigError, match=expected):
            _open(str(out), identity, overwrite=True)
        assert _names(out) == before
    finally:
        holder.release()


def test_an_interrupted_run_is_rolled_back_to_its_state(tmp_path: Path) -> None:
    identity = _identity(tmp_path)
    out = tmp_path / "out"
    state = RunState(identity.fingerprint, next_unit=1, windows=1, window_shard=1, rejects_bytes=5, shards=[SHARD])
    _interrupted(out, state)
    with OutputDir(str(out), identity) as output:
        assert output.state == state and output.resumed and not output.finished
    assert _names(out) == sorted(
        [
            fmt.PROGRESS_DIR,
            f"{fmt.PROGRESS_DIR}/{ROWS_DIR}",
            f"{fmt.PROGRESS_DIR}/{ROWS_DIR}/{fmt.shard_name(0)}.json",
            f"{fmt.PROGRESS_DIR}/{SHARD_LOG_NAME}",
            f"{fmt.PROGRESS_DIR}/{STATE_NAME}",
            fmt.REJECTS_NAME + ".partial",
            fmt.shard_name(0),
            fmt.shard_name(0) + fmt.INDEX_SUFFIX,
        ]
    )
    assert (out / (fmt.REJECTS_NAME + ".partial")).read_bytes() == b"kept\n"


def test_rejects_renamed_by_an_interrupted_finish_are_renamed_back(tmp_path: Path) -> None:
    identity = _identity(tmp_path)
    out = tmp_path / "out"
    _interrupted(out, RunState(identity.fingerprint, rejects_bytes=5, shards=[SHARD]))
    os.replace(out / (fmt.REJECTS_NAME + ".partial"), out / fmt.REJECTS_NAME)
    with OutputDir(str(out), identity):
        pass
    assert not (out / fmt.REJECTS_NAME).exists()
    assert (out / (fmt.REJECTS_NAME + ".partial")).read_bytes() == b"kept\n"


def test_an_interrupted_run_of_another_pipeline_is_refused(tmp_path: Path) -> None:
    identity = _identity(tmp_path)
    out = tmp_path / "out"
    _interrupted(out, RunState("another", shards=[SHARD]))
    before = _names(out)
    expected = (
        f"output.dir: {str(out)!r} holds an interrupted run of a different pipeline or input; "
        "pass --overwrite to discard it"
    )
    with pytest.raises(ConfigError) as refused:
        _open(str(out), identity)
    assert str(refused.value) == expected
    assert _names(out) == before and not (out / fmt.LOCK_NAME).exists()


def test_an_interrupted_run_without_its_index_rows_is_refused(tmp_path: Path) -> None:
    """A kept shard whose Energon rows are gone (or a run interrupted by a cook that kept them elsewhere)."""
    identity = _identity(tmp_path)
    out = tmp_path / "out"
    _interrupted(out, RunState(identity.fingerprint, shards=[SHARD]))
    os.unlink(rows_path(str(out), 0))
    with pytest.raises(ConfigError) as refused:
        _open(str(out), identity)
    assert str(refused.value) == (
        f"output.dir: {str(out)!r} holds an interrupted run whose shards' Energon index rows are missing "
        f"(1 of 1 in {out / fmt.PROGRESS_DIR / ROWS_DIR}, first {fmt.shard_name(0)}.json); "
        "pass --overwrite to start again"
    )


def test_the_same_run_finished_is_left_as_it_is(tmp_path: Path) -> None:
    identity = _identity(tmp_path)
    out = tmp_path / "out"
    _finished(out, identity)
    before = _names(out)
    output = OutputDir(str(out), identity)
    assert not output.finished_on_disk()  # not opened yet: unknown
    with output:
        assert output.finished and not output.resumed and output.finished_on_disk()
    assert _names(out) == before == sorted(COOKED)


def test_a_different_finished_run_is_refused_naming_the_difference(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _finished(out, _identity(tmp_path, seq_len=256))
    before = _names(out)
    with pytest.raises(ConfigError) as refused:
        _open(str(out), _identity(tmp_path, seq_len=512))
    assert str(refused.value) == (
        f"output.dir: {str(out)!r} holds a finished run (packing.seq_len differs); pass --overwrite to replace it"
    )
    assert _names(out) == before


def test_a_finished_run_with_another_runs_state_is_refused(tmp_path: Path) -> None:
    identity = _identity(tmp_path)
    out = tmp_path / "out"
    _finished(out, identity)
    (out / fmt.PROGRESS_DIR).mkdir()
    (out / fmt.PROGRESS_DIR / STATE_NAME).write_text(json.dumps(state_json(RunState("another"), 0)))
    with pytest.raises(ConfigError, match=r"\(its progress directory holds another run's state\)"):
        _open(str(out), identity)


def test_a_finish_interrupted_in_its_clean_up_is_completed(tmp_path: Path) -> None:
    identity = _identity(tmp_path)
    out = tmp_path / "out"
    _finished(out, replace(identity, pipeline={}))  # the pipeline is not compared: the state's fingerprint is
    (out / fmt.PROGRESS_DIR).mkdir()
    (out / fmt.PROGRESS_DIR / STATE_NAME).write_text(json.dumps(state_json(RunState(identity.fingerprint), 0)))
    with OutputDir(str(out), identity) as output:
        assert output.finished and output.resumed and output.finished_on_disk()
    assert _names(out) == sorted(COOKED)


def test_overwrite_removes_only_what_cook_writes(tmp_path: Path) -> None:
    identity = _identity(tmp_path)
    out = tmp_path / "out"
    _finished(out, replace(identity, pipeline={}))
    (out / fmt.PROGRESS_DIR / "stage").mkdir(parents=True)
    for name in ("notes.txt", fmt.REJECTS_NAME + ".partial"):
        (out / name).write_bytes(b"x")
    (out / "mine").mkdir()
    with OutputDir(str(out), identity, overwrite=True) as output:
        assert output.state == RunState(identity.fingerprint) and not output.resumed and not output.finished
    assert _names(out) == ["mine", "notes.txt"]


def test_an_early_failure_leaves_nothing_but_staged_units(tmp_path: Path) -> None:
    identity = _identity(tmp_path)
    out = tmp_path / "out"
    with OutputDir(str(out), identity) as output:
        output.save()
        (out / (fmt.REJECTS_NAME + ".partial")).write_bytes(b"")
        output.discard_if_nothing_done()
    assert _names(out) == []
    with OutputDir(str(out), identity) as output:
        output.save()
        Path(output.stage_dir).mkdir()
        (Path(output.stage_dir) / "unit-000000.json").write_text("{}")
        assert output.has_staged()
        output.discard_if_nothing_done()  # a resumed run reuses the staged unit
        assert (out / fmt.PROGRESS_DIR / STATE_NAME).is_file()
        output.remove_staged()
        assert not output.has_staged()


def test_a_shard_logged_after_the_last_state_is_cut_off_by_the_next_save(tmp_path: Path) -> None:
    """A crash between appending to the shard log and writing state.json leaves a line state.json does
    not count: the resumed state holds the shards it counts, and its next save writes over the line."""
    identity = _identity(tmp_path)
    out = tmp_path / "out"
    state = RunState(identity.fingerprint, next_unit=1, windows=1, window_shard=1, shards=[SHARD])
    _interrupted(out, state)
    log = out / fmt.PROGRESS_DIR / SHARD_LOG_NAME
    logged = log.read_bytes()
    later = replace(SHARD, name=fmt.shard_name(1), first_pack=SHARD.first_pack + SHARD.packs)
    log.write_bytes(logged + shard_line(later))  # appended, then the crash: state.json still counts one
    with OutputDir(str(out), identity) as output:
        assert output.state.shards == [SHARD]
        output.state.shards.append(replace(later, sha256="cd" * 32))
        Path(rows_path(str(out), 1)).write_bytes(b"rows")  # its worker left its rows before the commit
        output.save()
    assert log.read_bytes() == logged + shard_line(replace(later, sha256="cd" * 32))
    with OutputDir(str(out), identity) as output:
        assert output.state.shards == [SHARD, replace(later, sha256="cd" * 32)]


def test_a_state_json_of_cook_0_1_0_is_refused(tmp_path: Path) -> None:
    """cook 0.1.0 listed the shards in state.json itself and fingerprinted another plan (with first line
    numbers): its interrupted run is another run's, refused before its shards are read."""
    identity = _identity(tmp_path)
    out = tmp_path / "out"
    _interrupted(out, RunState("made by cook 0.1.0", next_unit=1, windows=1, window_shard=1, shards=[SHARD]))
    path = out / fmt.PROGRESS_DIR / STATE_NAME
    data = json.loads(path.read_text())
    del data["shard_count"], data["shard_log_bytes"]
    data["shards"] = [asdict(SHARD)]
    path.write_text(json.dumps(data))
    (out / fmt.PROGRESS_DIR / SHARD_LOG_NAME).unlink()
    before = _names(out)
    with pytest.raises(
        ConfigError, match="holds an interrupted run of a different pipeline or input; pass --overwrite"
    ):
        _open(str(out), identity)
    assert _names(out) == before


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda state, log: state.write_text('{"fingerprint": '), f"{STATE_NAME}: Expecting value"),
        (lambda state, log: state.write_text("[]"), f"{STATE_NAME}: TypeError"),
        (lambda state, log: state.write_text("{}"), f"{STATE_NAME}: KeyError: 'fingerprint'"),
        (
            lambda state, log: state.write_text(json.dumps({**json.loads(state.read_text()), "counts": None})),
            f"{STATE_NAME}: AttributeError|{STATE_NAME}: TypeError",
        ),
        (lambda state, log: log.write_bytes(b""), f"{SHARD_LOG_NAME}: 0 of the 1 shards it counts"),
        (lambda state, log: log.write_bytes(b"{not json\n" * 4), f"{STATE_NAME}: JSONDecodeError"),
    ],
    ids=["cut-json", "not-an-object", "no-fingerprint", "bad-counts", "empty-shard-log", "bad-shard-log"],
)
def test_a_damaged_progress_state_is_refused_in_one_line_and_left_alone(
    tmp_path: Path, damage: object, reason: str
) -> None:
    """A hand-edited or damaged ``state.json`` or shard log is a usage error (exit 2) that names the
    file and the way out, never a traceback; nothing in the directory is touched."""
    identity = _identity(tmp_path)
    out = tmp_path / "out"
    _interrupted(out, RunState(identity.fingerprint, next_unit=1, windows=1, window_shard=1, shards=[SHARD]))
    progress = out / fmt.PROGRESS_DIR
    damage(progress / STATE_NAME, progress / SHARD_LOG_NAME)  # type: ignore[operator]
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    with pytest.raises(ConfigError) as refused:
        _open(str(out), identity)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"output.dir: {str(out)!r} holds an interrupted run whose progress cannot be read (")
    assert message.endswith("); pass --overwrite to start again")
    assert re.search(f"\\({fmt.PROGRESS_DIR}/(?:{reason})", message), message
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
