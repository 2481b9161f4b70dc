"""The CLI at its edges (issue 13): Ctrl-C, a Ray address that reaches nothing or wants a token, a run
that packs nothing, truncation, config checked before any work, no tracebacks for user mistakes,
and the smaller things a user hit (--version, --set typos, inspect --source, tail padding).

Ray runs only in child processes here (``cook run`` subprocesses and one ``ray start --head``), each
shut down by the test, by pid; ``ray stop`` would also stop the suite's shared embedded Ray."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from cook import __version__
from cook import format as fmt
from cook.cli.main import INTERRUPTED, main
from tests.conftest import REPO, pipeline_dict, write_jsonl
from tests.e2e.ray_nodes import free_port

COOK = [sys.executable, "-m", "cook.cli.main"]
TRACEBACK = "Traceback (most recent call last)"


def _env(**changes: str | None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAY_AUTH_MODE": "disabled"}
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def _cook(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*COOK, *args], cwd=REPO, env=env or _env(), capture_output=True, text=True, timeout=timeout)


def _conversation(i: int, answer_words: int = 3) -> dict:
    return {
        "messages": [
            {"role": "user", "content": f"question {i}: " + "tell me " * (i % 7)},
            {"role": "assistant", "content": f"answer {i}. " + "indeed " * answer_words},
        ]
    }


def _pipeline(tmp: Path, input_path: str, out: Path, name: str = "p.yaml", **sections: dict) -> Path:
    path = tmp / name
    path.write_text(yaml.safe_dump(pipeline_dict(input_path, str(out), **sections)))
    return path


def _one_error_line(err: str) -> str:
    assert TRACEBACK not in err, err[-3000:]
    lines = err.splitlines()
    assert len(lines) == 1, err[-3000:]
    assert lines[0].startswith("cook: error: ")
    return lines[0]


# ---------------------------------------------------------------- item 12: --version
def test_version() -> None:
    run = _cook("--version", timeout=120)
    assert run.returncode == 0 and run.stdout == f"cook {__version__}\n", run.stderr[-2000:]


# ---------------------------------------------------------------- item 2: Ctrl-C
@pytest.fixture(scope="module")
def long_input(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("long") / "raw.jsonl"
    write_jsonl(path, [_conversation(i, answer_words=i % 60) for i in range(4000)])
    return path


def _long_pipeline(tmp: Path, long_input: Path, out: Path) -> Path:
    return _pipeline(
        tmp,
        str(long_input),
        out,
        input={"unit_bytes": 20_000},
        packing={"seq_len": 1024, "buffer_size": 50},
        output={"shard_size": 1},
        ray={"num_actors": 1, "cpus_per_actor": 0.5},
    )


def _wrote_a_shard(out: Path) -> bool:
    return any(".tar" in name for _, _, files in os.walk(out) for name in files)


def _descendants(pid: int) -> list:
    import psutil

    with contextlib.suppress(psutil.NoSuchProcess):
        return psutil.Process(pid).children(recursive=True)
    return []


def _interrupt_mid_run(pipeline: Path, out: Path, *extra: str) -> tuple[subprocess.Popen[str], list, str]:
    """Start ``cook run``, SIGINT it once it has written a shard; its processes just before, and stderr."""
    proc = subprocess.Popen(
        [*COOK, "run", str(pipeline), "--quiet", *extra],
        cwd=REPO,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240  # a generous bound on start-up, not a timing assertion
        while proc.poll() is None and not _wrote_a_shard(out) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proc.poll() is None, f"the run ended before it could be interrupted: {proc.stderr.read()[-2000:]}"  # type: ignore[union-attr]
        children = _descendants(proc.pid)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc, children, err


def test_ctrl_c_is_one_line_exit_130_and_the_rerun_resumes(long_input: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    pipeline = _long_pipeline(tmp_path, long_input, out)
    proc, _, err = _interrupt_mid_run(pipeline, out, "--workers", "0")
    assert proc.returncode == 130 and err == INTERRUPTED + "\n", err[-3000:]
    assert not (out / fmt.MANIFEST_NAME).exists() and not (out / fmt.LOCK_NAME).exists()
    assert main(["run", str(pipeline), "--workers", "0", "--quiet"]) == 0
    assert json.loads((out / fmt.MANIFEST_NAME).read_text())["counts"]["records_in"] == 4000


@pytest.mark.slow
def test_ctrl_c_shuts_the_embedded_ray_down(long_input: Path, tmp_path: Path) -> None:
    import psutil

    out = tmp_path / "out"
    proc, children, err = _interrupt_mid_run(_long_pipeline(tmp_path, long_input, out), out, "--workers", "1")
    try:
        assert proc.returncode == 130 and err == INTERRUPTED + "\n", err[-3000:]
        assert children, "the embedded Ray should have started processes"
        _, alive = psutil.wait_procs(children, timeout=60)
        assert not alive, [p.pid for p in alive]
    finally:
        for child in children:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()


# ---------------------------------------------------------------- items 3 and 4: --ray-address
@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("small")
    write_jsonl(tmp / "raw.jsonl", [_conversation(i) for i in range(40)])
    return tmp / "raw.jsonl"


def test_a_ray_address_that_reaches_nothing(small: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    address = f"127.0.0.1:{free_port()}"
    pipeline = _pipeline(tmp_path, str(small), out)
    run = _cook("run", str(pipeline), "--ray-address", address, "--set", "ray.connect_timeout_s=5", timeout=120)
    line = _one_error_line(run.stderr)
    assert run.returncode == 2 and f"nothing answers at {address}" in line and "ray.connect_timeout_s=5" in line
    assert not out.exists()


def test_a_ray_address_that_is_not_one(small: Path, tmp_path: Path) -> None:
    run = _cook("run", str(_pipeline(tmp_path, str(small), tmp_path / "out")), "--ray-address", "bogus::address")
    assert run.returncode == 2
    assert _one_error_line(run.stderr) == (
        "cook: error: ray.address (--ray-address): 'bogus::address' is not a Ray address; "
        "use auto, HOST:PORT or ray://HOST[:PORT]"
    )
    assert not (tmp_path / "out").exists()


def _ray_processes_under(temp_dir: str) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if temp_dir.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                pids.append(int(entry))
    return pids


@contextlib.contextmanager
def token_auth_head(home: Path) -> Iterator[int]:
    """The README's cluster sequence: a token (``ray get-auth-token --generate``) and ``ray start --head``
    with ``RAY_AUTH_MODE=token``, on 127.0.0.1. Yields the GCS port; stops the head (SIGTERM to the
    blocking ``ray start``, then any process of its session, by pid)."""
    import psutil

    ray_bin = str(Path(sys.executable).with_name("ray"))
    env = _env(HOME=str(home), RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=None, RAY_AUTH_TOKEN_PATH=None, RAY_ADDRESS=None)
    subprocess.run([ray_bin, "get-auth-token", "--generate"], env=env, check=True, capture_output=True, timeout=120)
    temp_dir = tempfile.mkdtemp(prefix="cookray-", dir="/tmp")  # short: Ray's socket paths must fit
    port = free_port()
    start = [
        ray_bin,
        "start",
        "--head",
        f"--port={port}",
        "--node-ip-address=127.0.0.1",
        "--num-cpus=2",
        "--include-dashboard=false",
        "--disable-usage-stats",
        "--object-store-memory=300000000",
        f"--ray-client-server-port={free_port()}",
        f"--dashboard-agent-listen-port={free_port()}",
        f"--temp-dir={temp_dir}",
        "--block",
    ]
    with open(home / "head.log", "wb") as log:
        head = subprocess.Popen(start, env=env, stdout=log, stderr=log, start_new_session=True)
    processes: list = []
    try:
        deadline = time.monotonic() + 180  # a generous bound on start-up, not a timing assertion
        while head.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            time.sleep(0.2)
        assert head.poll() is None, (home / "head.log").read_text()[-3000:]
        processes = _descendants(head.pid)
        yield port
    finally:
        processes += _descendants(head.pid)
        head.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            head.wait(timeout=60)
        _, alive = psutil.wait_procs(processes, timeout=30)
        for pid in {*(p.pid for p in alive), *_ray_processes_under(temp_dir), head.pid}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        head.wait()
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.mark.slow
def test_a_cluster_with_token_auth(small: Path, tmp_path: Path) -> None:
    """Without RAY_AUTH_MODE the client sends no token: one line saying what to set, exit 2. With the
    README's ``RAY_AUTH_MODE=token`` (the token in ~/.ray/auth_token) the same command cooks."""
    home = tmp_path / "home"
    home.mkdir()
    out = tmp_path / "out"
    pipeline = _pipeline(tmp_path, str(small), out)
    with token_auth_head(home) as port:
        args = ("run", str(pipeline), "--ray-address", f"127.0.0.1:{port}", "--quiet")
        refused = _cook(*args, env=_env(HOME=str(home), RAY_AUTH_MODE=None, RAY_AUTH_TOKEN=None), timeout=120)
        line = _one_error_line(refused.stderr)
        assert refused.returncode == 2 and "uses token authentication" in line and "InvalidAuthToken" in line
        assert "set RAY_AUTH_MODE=token" in line and not out.exists()
        joined = _cook(*args, env=_env(HOME=str(home), RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=None), timeout=300)
        assert joined.returncode == 0, joined.stderr[-3000:]
    counts = json.loads((out / fmt.MANIFEST_NAME).read_text())["counts"]
    assert counts["records_in"] == 40 and counts["packs"] > 0


# ---------------------------------------------------------------- item 5: nothing packed
@pytest.mark.parametrize(
    ("rows", "packing", "expected"),
    [
        (
            [b"{broken", b'{"messages": [', {"messages": [{"role": "robot", "content": "x"}]}],
            {},
            "3 rejected (top reasons: bad_json 2, bad_role 1)",
        ),
        ([_conversation(i) for i in range(5)], {"seq_len": 8}, "5 rejected (top reasons: too_long 5)"),
    ],
)
def test_a_run_that_packs_nothing_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rows: list, packing: dict, expected: str
) -> None:
    write_jsonl(tmp_path / "raw.jsonl", rows)
    out = tmp_path / "out"
    pipeline = _pipeline(tmp_path, str(tmp_path / "raw.jsonl"), out, packing=packing)
    assert main(["run", str(pipeline), "--workers", "0", "--quiet"]) == 1
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(f"cook: error: no record was packed: {expected}")
    assert (out / fmt.REJECTS_NAME).stat().st_size > 0 and (out / fmt.MANIFEST_NAME).is_file()


# ---------------------------------------------------------------- item 6: truncation reported
def test_truncation_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_jsonl(tmp_path / "raw.jsonl", [_conversation(i, answer_words=80 + i) for i in range(20)])
    out = tmp_path / "out"
    pipeline = _pipeline(tmp_path, str(tmp_path / "raw.jsonl"), out, packing={"seq_len": 64})
    assert main(["run", str(pipeline), "--workers", "0", "--quiet"]) == 0
    captured = capsys.readouterr()
    counts = json.loads((out / fmt.MANIFEST_NAME).read_text())["counts"]
    assert counts.get("truncated_sequences") == 20, f"the manifest counts truncation (runner): {counts}"
    assert counts["truncated_tokens"] >= 20
    assert "truncated sequences  20" in captured.out
    (warning,) = captured.err.splitlines()
    assert warning.startswith("cook: warning: 20 of 20 packed records (100.0%) were truncated to packing.seq_len=64")
    assert main(["stats", str(out)]) == 0
    assert f"truncated           20 sequences, {counts['truncated_tokens']:,} tokens cut" in capsys.readouterr().out
    assert main(["stats", str(out), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["truncated_sequences"], stats["truncated_tokens"]) == (20, counts["truncated_tokens"])


# ---------------------------------------------------------------- items 7 and 8: before any work, one line
@pytest.mark.parametrize(
    ("extra", "sections", "expected"),
    [
        ([], {"input": {"media_root": "/nonexistent/media"}}, "input.media_root: '/nonexistent/media' does not exist"),
        (
            [],
            {"input": {"media_stores": ["/nonexistent/store.tar"]}},
            "input.media_stores[0]: '/nonexistent/store.tar'",
        ),
        (
            [],
            {"tokenizer": {"path": "{tmp}/empty"}},
            "is not a tokenizer directory: no tokenizer.json / tokenizer_config",
        ),
        (["--set", f"packing.seq_len={10**12}"], {}, "packing.seq_len: 1000000000000 is greater than the maximum"),
        (["--set", "packing.seqlen=1"], {}, "--set packing.seqlen: unknown key (did you mean seq_len?)"),
        (["--set", "packing.seq_len=abc"], {}, "cook: error: --set packing.seq_len: 'abc' is not of type 'integer'"),
        (["--output", "/proc/x"], {}, "output.dir (--output): '/proc/x' cannot be created in '/proc'"),
    ],
)
def test_config_is_checked_before_any_work(
    small: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list, sections: dict, expected: str
) -> None:
    (tmp_path / "empty").mkdir()
    sections = json.loads(json.dumps(sections).replace("{tmp}", str(tmp_path)))
    out = tmp_path / "out"
    pipeline = _pipeline(tmp_path, str(small), out, **sections)
    assert main(["run", str(pipeline), *extra]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert expected in line, line
    assert not out.exists() and not Path("/proc/x").exists()


def test_stats_plot_into_a_missing_directory(cooked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", str(cooked), "--plot", "/nonexistent/dir/x.png"]) == 2
    captured = capsys.readouterr()
    assert _one_error_line(captured.err) == (
        "cook: error: --plot /nonexistent/dir/x.png: directory '/nonexistent/dir' does not exist"
    )
    assert captured.out == ""


def test_stats_steps_per_epoch(cooked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", str(cooked), "--json", "--global-batch-size", "2"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["steps_per_epoch"] == stats["packs"] // 2 and stats["global_batch_size"] == 2
    assert main(["stats", str(cooked), "--global-batch-size", "2"]) == 0
    assert f"steps per epoch     {stats['steps_per_epoch']:,} at global batch size 2" in capsys.readouterr().out
    assert main(["stats", str(cooked), "--global-batch-size", "0"]) == 2
    assert _one_error_line(capsys.readouterr().err) == "cook: error: --global-batch-size: must be >= 1, got 0"


def test_a_bug_is_still_exit_1_with_its_traceback(small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cook.cli import run_cmd

    def broken(*args: object, **kwargs: object) -> None:
        raise IndexError("a bug in cook")

    monkeypatch.setattr(run_cmd, "run_pipeline", broken)
    with pytest.raises(IndexError, match="a bug in cook"):  # not caught: the interpreter prints it, exit 1
        main(["run", str(_pipeline(tmp_path, str(small), tmp_path / "out")), "--workers", "0"])


# ---------------------------------------------------------------- item 12: inspect --source, tail padding
@pytest.fixture(scope="module")
def cooked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two input files with the same name in two directories; a/raw.jsonl line 4 is broken."""
    tmp = tmp_path_factory.mktemp("twofiles")
    for name in ("a", "b"):
        (tmp / name).mkdir()
        rows: list = [_conversation(i) for i in range(6)]
        if name == "a":
            rows[3] = b"{broken"
        write_jsonl(tmp / name / "raw.jsonl", rows)
    pipeline = _pipeline(tmp, str(tmp / "*" / "raw.jsonl"), tmp / "out")
    assert main(["run", str(pipeline), "--workers", "0", "--quiet"]) == 0
    return tmp / "out"


def _sources(out: Path) -> list[str]:
    import tarfile

    names = []
    for shard in sorted(out.glob("shard-*.tar")):
        with tarfile.open(shard) as tar:
            for member in tar:
                if member.name.endswith(fmt.META):
                    handle = tar.extractfile(member)
                    assert handle is not None
                    names += [s["source"] for s in json.loads(handle.read())["sequences"]]
    return names


def test_inspect_an_ambiguous_suffix_lists_the_matches(cooked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sources = _sources(cooked)
    a1, b1 = (next(s for s in sources if s.endswith(f"{d}/raw.jsonl#1")) for d in ("a", "b"))
    assert main(["inspect", str(cooked), "--source", "raw.jsonl#1"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "--source 'raw.jsonl#1' is ambiguous: 2 sources end with it" in line and a1 in line and b1 in line
    assert main(["inspect", str(cooked), "--source", "b/raw.jsonl#1"]) == 0
    assert b1 in capsys.readouterr().out


def test_inspect_a_rejected_source_says_why(cooked: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", str(cooked), "--source", "a/raw.jsonl#4"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "a/raw.jsonl#4' was rejected (bad_json: " in line and "no pack holds it" in line
    assert main(["inspect", str(cooked), "--source", "a/raw.jsonl#99"]) == 2
    assert "rejects.jsonl does not name it" in capsys.readouterr().err


def test_run_summary_adds_up_to_packs_times_seq_len(small: Path, tmp_path: Path) -> None:
    run = _cook("run", str(_pipeline(tmp_path, str(small), tmp_path / "out")), "--workers", "0", "--quiet")
    assert run.returncode == 0, run.stderr[-2000:]
    cells = [re.split(r"\s{2,}", line, maxsplit=1) for line in run.stdout.splitlines() if line[:1].isalpha()]
    rows = {name: value.split()[0] for name, value in cells}
    number = {name: int(rows[name].replace(",", "")) for name in ("packs", "tokens", "padding tokens", "tail padding")}
    assert number["tail padding"] > 0
    assert number["tokens"] + number["padding tokens"] + number["tail padding"] == number["packs"] * 1024
    assert int(rows["packs x seq_len"].replace(",", "")) == number["packs"] * 1024
    counts = json.loads((tmp_path / "out" / fmt.MANIFEST_NAME).read_text())["counts"]
    assert (number["tokens"], number["padding tokens"]) == (counts["tokens"], counts["padding_tokens"])
