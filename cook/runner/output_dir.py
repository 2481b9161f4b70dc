"""The output directory's life cycle: lock, refuse or clear a finished run, finish.

- A finished run (``cook_manifest.json`` present) of the same run (``RunIdentity``: the same cook
  version, pipeline, input files and tokenizer files) is reported as already finished, untouched;
  one that differs is refused unless ``--overwrite``, naming what differs.
- An interrupted run of the same pipeline is resumed (``cook.runner.resume``); of another, refused.
- ``--overwrite`` removes only what cook writes (shards, indexes, .nv-meta, manifest, run record,
  rejects, progress).
- An ``fcntl.flock`` on ``.cook.lock`` (which also holds the pid) keeps two runs out of one
  directory; the kernel releases it when its process dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import os
import shutil
from dataclasses import asdict, dataclass
from typing import Any

from cook import __version__
from cook import format as fmt
from cook.config import PipelineConfig
from cook.contract import tokenizer_files_sha256
from cook.errors import ConfigError
from cook.runner.resume import RunState, fingerprint, load_state, roll_back
from cook.runner.units import Unit
from cook.writer.atomic import atomic_write
from cook.writer.energon_index import progress_index_path

SHOWN_DIFFERENCES = 3  # a refusal names at most this many differing keys or input files


class OutputLock:
    """``fcntl.flock`` on ``.cook.lock``: the kernel holds it for this process and drops it when the
    process dies, however it dies, so there is no stale lock to take over (and no race between two
    takers of one). The file also holds the pid, for the message of a refused run."""

    def __init__(self, out_dir: str) -> None:
        self.path = os.path.join(out_dir, fmt.LOCK_NAME)
        self._fd: int | None = None

    def acquire(self) -> None:
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise ConfigError(
                    f"output.dir: {os.path.dirname(self.path)!r} is locked by running cook pid {self._holder()} "
                    f"({self.path})"
                ) from None
            if _same_file(fd, self.path):
                break
            os.close(fd)  # the holder released (and removed) the file between our open and flock: again
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd

    def _holder(self) -> str:
        try:
            with open(self.path) as handle:
                return handle.read().strip() or "?"
        except OSError:
            return "?"

    def release(self) -> None:
        """Remove the file, then drop the lock (a taker that opened the old file sees it is gone)."""
        if self._fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        os.close(self._fd)
        self._fd = None


def _same_file(fd: int, path: str) -> bool:
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (on_disk.st_dev, on_disk.st_ino)


def cooked_paths(out_dir: str) -> list[str]:
    patterns = [
        f"{fmt.SHARD_PREFIX}*",
        fmt.MANIFEST_NAME,
        fmt.RUN_RECORD_NAME,
        fmt.REJECTS_NAME + "*",
        fmt.NV_META_DIR,
        fmt.PROGRESS_DIR,
    ]
    return sorted(p for pattern in patterns for p in glob.glob(os.path.join(out_dir, pattern)))


def _clear(out_dir: str) -> None:
    for path in cooked_paths(out_dir):
        if os.path.isdir(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)


@dataclass(frozen=True)
class InputFile:
    """One input file as a finished run saw it: a size or mtime that differs now means new input."""

    path: str
    bytes: int
    mtime_ns: int


@dataclass(frozen=True)
class RunIdentity:
    """What makes a rerun the same run. ``fingerprint`` (``cook.runner.resume.fingerprint``: the
    pipeline minus ``ray``, and the unit plan) also ties an interrupted run to its resume; a finished
    run must further match each input file's size and mtime (``format.RUN_RECORD_NAME``) and, from its
    manifest, the pipeline, the tokenizer files' sha256 and the cook version."""

    fingerprint: str
    pipeline: dict[str, Any]  # config.to_dict() minus ray, as JSON reads it back
    inputs: tuple[InputFile, ...]
    tokenizer_path: str


def run_identity(config: PipelineConfig, units: list[Unit]) -> RunIdentity:
    paths = dict.fromkeys(unit.path for unit in units)  # each file once, in plan order
    stats = {path: os.stat(path) for path in paths}
    return RunIdentity(
        fingerprint=fingerprint(config, units),
        pipeline=_json(_without_ray(config.to_dict())),
        inputs=tuple(InputFile(path, stats[path].st_size, stats[path].st_mtime_ns) for path in paths),
        tokenizer_path=config.tokenizer.path,
    )


def write_run_record(out_dir: str, identity: RunIdentity) -> None:
    """Record the run's inputs; written before the manifest, which marks the run finished."""
    record = {"fingerprint": identity.fingerprint, "inputs": [asdict(f) for f in identity.inputs]}
    atomic_write(os.path.join(out_dir, fmt.RUN_RECORD_NAME), json.dumps(record, indent=1, sort_keys=True) + "\n")


def finished_differences(out_dir: str, identity: RunIdentity) -> list[str]:
    """How the finished run in ``out_dir`` differs from ``identity``'s run; empty when it is the same run."""
    try:
        manifest = _read_json(os.path.join(out_dir, fmt.MANIFEST_NAME))
        record = _read_json(os.path.join(out_dir, fmt.RUN_RECORD_NAME))
    except FileNotFoundError:  # a run by a cook that wrote no record: its inputs are unknown
        return [f"no {fmt.RUN_RECORD_NAME} records its input files"]
    except (OSError, ValueError) as err:
        return [f"it cannot be read: {err}"]
    differences = []
    if manifest.get("cook_version") != __version__:
        differences.append(f"made by cook {manifest.get('cook_version')}, this is cook {__version__}")
    keys = _differing_keys(_without_ray(manifest.get("pipeline", {})), identity.pipeline)
    if keys:
        differences.append(f"{_some(keys)} {'differs' if len(keys) == 1 else 'differ'}")
    if manifest.get("tokenizer", {}).get("sha256") != tokenizer_files_sha256(identity.tokenizer_path):
        differences.append(f"the tokenizer files in {identity.tokenizer_path} differ")
    differences.extend(_input_differences(record.get("inputs", []), identity.inputs))
    if not differences and record.get("fingerprint") != identity.fingerprint:
        differences.append("the input plan differs")
    return differences


def _input_differences(recorded: list[dict[str, Any]], inputs: tuple[InputFile, ...]) -> list[str]:
    then = {entry["path"]: (entry["bytes"], entry["mtime_ns"]) for entry in recorded}
    now = {f.path: (f.bytes, f.mtime_ns) for f in inputs}
    changed = [path for path in now if path in then and then[path] != now[path]]
    added = [path for path in now if path not in then]
    gone = [path for path in then if path not in now]
    return [
        f"input {_some(paths)} {what}"
        for paths, what in ((changed, "changed"), (added, "new"), (gone, "gone"))
        if paths
    ]


def _some(names: list[str]) -> str:
    shown = ", ".join(names[:SHOWN_DIFFERENCES])
    return shown + (f" (+{len(names) - SHOWN_DIFFERENCES} more)" if len(names) > SHOWN_DIFFERENCES else "")


def _differing_keys(then: Any, now: Any, prefix: str = "") -> list[str]:
    """Dotted keys whose values differ (``packing.seq_len``)."""
    if isinstance(then, dict) and isinstance(now, dict):
        return [
            key
            for name in sorted(set(then) | set(now))
            for key in _differing_keys(then.get(name), now.get(name), f"{prefix}{name}.")
        ]
    return [] if then == now else [prefix.rstrip(".")]


def _without_ray(pipeline: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in pipeline.items() if k != "ray"}  # the actor count never changes the output


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _read_json(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not a JSON object")
    return data


# prepare_output's answers besides a state to resume from: a run finished but for its clean-up, and
# the same run, finished, to leave as it is
FINISHED = RunState("finished")
ALREADY_FINISHED = RunState("already finished")


def prepare_output(out_dir: str, overwrite: bool, identity: RunIdentity) -> tuple[OutputLock, RunState | None]:
    """Lock ``out_dir``; return the state to resume from (same pipeline, interrupted) or None (fresh),
    ``FINISHED`` when this very pipeline finished there but was interrupted while removing its
    progress directory (the caller removes it and reports the finished run), or ``ALREADY_FINISHED``
    when the same run (``identity``) finished there (the caller changes nothing and reports it).

    Refuses (``ConfigError``) a finished run that differs, naming how, and an interrupted run of a
    different pipeline, without ``--overwrite``.
    """
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise ConfigError(f"output.dir: {out_dir!r} exists and is not a directory")
    os.makedirs(out_dir, exist_ok=True)
    lock = OutputLock(out_dir)
    lock.acquire()
    try:
        if overwrite:
            _clear(out_dir)
            return lock, None
        state = load_state(out_dir)
        if os.path.exists(os.path.join(out_dir, fmt.MANIFEST_NAME)):
            if state is not None and state.fingerprint == identity.fingerprint:
                return lock, FINISHED  # interrupted after the manifest, before the progress was removed
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(out_dir, fmt.PROGRESS_DIR))  # an empty leftover of the same case
            differences = (
                ["its progress directory holds another run's state"]
                if state
                else finished_differences(out_dir, identity)
            )
            if not differences:
                return lock, ALREADY_FINISHED
            raise ConfigError(
                f"output.dir: {out_dir!r} holds a finished run ({'; '.join(differences)}); "
                f"pass --overwrite to replace it"
            )
        if state is not None and state.fingerprint != identity.fingerprint:
            raise ConfigError(
                f"output.dir: {out_dir!r} holds an interrupted run of a different pipeline or input; "
                f"pass --overwrite to discard it"
            )
        if state is None:
            _clear(out_dir)
        else:
            index = progress_index_path(out_dir)
            if state.shards and not os.path.isfile(index):
                raise ConfigError(
                    f"output.dir: {out_dir!r} holds an interrupted run whose Energon index ({index}) is missing; "
                    f"pass --overwrite to start again"
                )
            roll_back(out_dir, state)
        return lock, state
    except BaseException:
        lock.release()
        raise
