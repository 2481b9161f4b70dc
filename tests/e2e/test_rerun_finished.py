"""A rerun of a finished run is not an error (SPEC §2): the same command on the same run's output is
one line and exit 0, the directory untouched; another pipeline, other inputs or other tokenizer
files need ``--overwrite`` (exit 2, one line naming what differs); an interrupt that lands once the
manifest is written says the output is complete, not that work was lost."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from cook import format as fmt
from cook.cli import run_cmd
from cook.cli.main import INTERRUPTED, main
from cook.cli.run_cmd import INTERRUPTED_AFTER_FINISH
from cook.runner import output_dir, pipeline
from cook.writer import dataset
from tests.conftest import DEMO_TOKENIZER, pipeline_dict, write_jsonl

TRACEBACK = "Traceback (most recent call last)"


def _chats(n: int, tag: str = "") -> list[dict]:
    return [
        {
            "messages": [
                {"role": "user", "content": f"question {tag}{i}: " + "tell me " * (i % 5)},
                {"role": "assistant", "content": f"answer {i}. " + "indeed " * (i % 3)},
            ]
        }
        for i in range(n)
    ]


@pytest.fixture
def cooked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[list[str], Path]:
    """A finished run: the ``cook run`` arguments that made it, and its output directory."""
    raw = tmp_path / "raw"
    raw.mkdir()
    write_jsonl(raw / "a.jsonl", _chats(12, "a"))
    write_jsonl(raw / "b.jsonl", [*_chats(9, "b"), b"{broken"])  # a reject too
    out = tmp_path / "out"
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(pipeline_dict(str(raw), str(out), packing={"seq_len": 256})))
    argv = ["run", str(path), "--workers", "0", "--quiet"]
    assert main(argv) == 0
    capsys.readouterr()
    return argv, out


def _tree(root: Path) -> dict[str, tuple[bytes | None, int]]:
    """Every file and directory under ``root`` (``root`` included): bytes and mtime."""
    entries = {".": (None, root.stat().st_mtime_ns)}
    for path in sorted(root.rglob("*")):
        stat = path.lstat()
        entries[str(path.relative_to(root))] = (path.read_bytes() if path.is_file() else None, stat.st_mtime_ns)
    return entries


def _without_root_mtime(tree: dict[str, tuple[bytes | None, int]]) -> dict[str, tuple[bytes | None, int]]:
    # the directory's own mtime moves with preflight's writability probe and the lock file, both gone after
    return {name: entry for name, entry in tree.items() if name != "."}


def _one_line(text: str) -> str:
    assert TRACEBACK not in text, text[-3000:]
    lines = text.splitlines()
    assert len(lines) == 1, text[-3000:]
    return lines[0]


def test_the_same_command_again_changes_nothing(
    cooked: tuple[list[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    argv, out = cooked
    assert (out / fmt.RUN_RECORD_NAME).is_file() and (out / fmt.MANIFEST_NAME).is_file()
    before = _tree(out)
    assert main(argv) == 0
    captured = capsys.readouterr()
    line = _one_line(captured.out)
    assert line.startswith(f"cook: already finished: {out} holds this very run (") and "nothing to do" in line
    assert captured.err == ""
    assert _without_root_mtime(_tree(out)) == _without_root_mtime(before)  # bytes and mtimes, lock file gone

    # --json: the stored summary, valid JSON, saying so; other actor counts are the same run
    assert main([*argv, "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    manifest = json.loads((out / fmt.MANIFEST_NAME).read_text())
    assert body["already_finished"] is True and body["resumed"] is False
    assert body["counts"] == manifest["counts"] and body["shards"] == len(manifest["shards"])
    assert body["out_dir"] == str(out)
    assert main([*argv[:2], "--workers", "3", "--quiet"]) == 0  # ray.* never changes the output
    assert "already finished" in capsys.readouterr().out
    assert _without_root_mtime(_tree(out)) == _without_root_mtime(before)


def test_a_fresh_run_reports_it_is_not_already_finished(
    cooked: tuple[list[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    argv, out = cooked
    assert main([*argv, "--overwrite", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["already_finished"] is False and body["counts"]["packs"] > 0
    assert (out / fmt.RUN_RECORD_NAME).is_file()


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    line = _one_line(captured.err)
    assert line.startswith("cook: error: output.dir: ") and " holds a finished run (" in line
    assert line.endswith("; pass --overwrite to replace it")
    return line


def test_another_pipeline_needs_overwrite(cooked: tuple[list[str], Path], capsys: pytest.CaptureFixture[str]) -> None:
    argv, out = cooked
    before = _tree(out)
    line = _refused([*argv, "--set", "packing.seq_len=512"], capsys)
    assert "(packing.seq_len differs)" in line
    line = _refused([*argv, "--set", "packing.seq_len=512", "--set", "packing.pad_multiple=16"], capsys)
    assert "(packing.pad_multiple, packing.seq_len differ)" in line
    assert _without_root_mtime(_tree(out)) == _without_root_mtime(before)
    assert main([*argv, "--set", "packing.seq_len=512", "--overwrite"]) == 0
    assert json.loads((out / fmt.MANIFEST_NAME).read_text())["pipeline"]["packing"]["seq_len"] == 512


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("append", "input {raw}/a.jsonl changed"),
        ("same size", "input {raw}/a.jsonl changed"),  # an edit that keeps the size: its mtime moved
        ("add", "input {raw}/c.jsonl new"),
        ("remove", "input {raw}/b.jsonl gone"),
    ],
)
def test_other_inputs_need_overwrite(
    cooked: tuple[list[str], Path], capsys: pytest.CaptureFixture[str], change: str, expected: str
) -> None:
    argv, out = cooked
    raw = out.parent / "raw"
    first = raw / "a.jsonl"
    if change == "append":
        with open(first, "ab") as handle:
            handle.write(json.dumps(_chats(1, "z")[0]).encode() + b"\n")
    elif change == "same size":
        stat = first.stat()
        first.write_bytes(first.read_bytes().replace(b"question a1", b"question A1"))
        os.utime(first, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        assert first.stat().st_size == stat.st_size
    elif change == "add":
        write_jsonl(raw / "c.jsonl", _chats(3, "c"))
    else:
        (raw / "b.jsonl").unlink()
    line = _refused(argv, capsys)
    assert f"({expected.format(raw=raw)})" in line, line


def test_other_tokenizer_files_need_overwrite(
    cooked: tuple[list[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The pipeline names the same tokenizer directory, whose files changed under it."""
    argv, _ = cooked
    tokenizer = tmp_path / "tok"
    shutil.copytree(DEMO_TOKENIZER, tokenizer)
    argv = [*argv, "--set", f"tokenizer.path={tokenizer}"]
    assert main([*argv, "--overwrite"]) == 0
    assert main(argv) == 0  # the same run again
    config = tokenizer / "tokenizer_config.json"
    config.write_text(config.read_text() + "\n")
    capsys.readouterr()
    assert f"(the tokenizer files in {tokenizer} differ)" in _refused(argv, capsys)


def test_a_run_that_recorded_no_inputs_needs_overwrite(
    cooked: tuple[list[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    argv, out = cooked
    (out / fmt.RUN_RECORD_NAME).unlink()  # a run by a cook that wrote no record
    assert f"(no {fmt.RUN_RECORD_NAME} records its input files)" in _refused(argv, capsys)


def _after(original: Callable[..., Any], calls: int = 1) -> Callable[..., Any]:
    """``original``, raising KeyboardInterrupt right after its ``calls``-th call returns."""
    count = [0]

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        count[0] += 1
        if count[0] == calls:
            raise KeyboardInterrupt
        return result

    return wrapped


# where an interrupt lands once the manifest is on disk: each promises a complete output
AFTER_THE_MANIFEST = {
    "manifest written": (dataset, "write_manifest"),
    "progress half removed": (output_dir.OutputDir, "_remove_all_but_state"),
    "lock released": (output_dir.OutputLock, "release"),
    "summary made": (pipeline, "_run"),
    "leaving the cluster": (run_cmd, "joined_cluster"),  # run_pipeline has returned to the CLI
}


@contextmanager
def _interrupted_on_leaving(config: Any, workers: int) -> Iterator[None]:
    yield
    raise KeyboardInterrupt  # as in Ray's shutdown, after the run


@pytest.mark.parametrize("point", list(AFTER_THE_MANIFEST))
def test_an_interrupt_after_the_manifest_says_the_output_is_complete(
    point: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_jsonl(tmp_path / "a.jsonl", _chats(10))
    out = tmp_path / "out"
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(pipeline_dict(str(tmp_path / "a.jsonl"), str(out))))
    argv = ["run", str(path), "--workers", "0", "--quiet"]
    module, name = AFTER_THE_MANIFEST[point]
    with monkeypatch.context() as patch:
        wrapper = _interrupted_on_leaving if module is run_cmd else _after(getattr(module, name))
        patch.setattr(module, name, wrapper)
        assert main(argv) == 130
    captured = capsys.readouterr()
    assert captured.out == "" and _one_line(captured.err) == INTERRUPTED_AFTER_FINISH.format(out)
    assert "rerun" not in captured.err
    assert main(["validate", str(out), "--quiet"]) == 0  # complete, as promised
    capsys.readouterr()
    assert main(argv) == 0  # the rerun finishes a leftover clean-up, or has nothing to do
    assert not (out / fmt.PROGRESS_DIR).exists() and not (out / fmt.LOCK_NAME).exists()
    before = _tree(out)
    capsys.readouterr()
    assert main(argv) == 0 and "already finished" in capsys.readouterr().out
    assert _without_root_mtime(_tree(out)) == _without_root_mtime(before)


def test_an_interrupt_before_the_manifest_still_says_rerun(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_jsonl(tmp_path / "a.jsonl", _chats(10))
    out = tmp_path / "out"
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(pipeline_dict(str(tmp_path / "a.jsonl"), str(out))))
    argv = ["run", str(path), "--workers", "0", "--quiet"]
    with monkeypatch.context() as patch:
        patch.setattr(output_dir.OutputDir, "write_run_record", _after(output_dir.OutputDir.write_run_record))
        assert main(argv) == 130
    assert _one_line(capsys.readouterr().err) == INTERRUPTED
    assert not (out / fmt.MANIFEST_NAME).exists()
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["resumed"] is True


def test_the_same_run_that_packed_nothing_still_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run that packed nothing was a failed job (exit 1): rerunning it reports the same verdict."""
    write_jsonl(tmp_path / "a.jsonl", [b"{broken", b"{also broken"])
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(pipeline_dict(str(tmp_path / "a.jsonl"), str(tmp_path / "out"))))
    argv = ["run", str(path), "--workers", "0", "--quiet"]
    assert main(argv) == 1
    capsys.readouterr()
    assert main(argv) == 1
    captured = capsys.readouterr()
    assert _one_line(captured.out).startswith("cook: already finished: ")
    assert _one_line(captured.err).startswith("cook: error: no record was packed: 2 rejected")
