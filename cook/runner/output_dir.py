"""The output directory through one run: ``OutputDir`` owns its lock, what a run finds there
(nothing, an interrupted run, a finished one), the state a run resumes from, where samples are
staged, and what is removed when a run finishes or fails early.

    <output.dir>/
      shard-NNNNNN.tar, .tar.idx   the workers' shards (kept up to the state on resume)
      rejects.jsonl[.partial]      the writer's rejects (``.partial`` until the run finishes)
      .nv-meta/                    Energon's index, published when the run finishes
      .cook-run.json               the run record: its fingerprint and input files
      cook_manifest.json           last: its presence marks the run finished
      .cook.lock                   the running cook's pid, under an ``fcntl.flock``
      .cook-progress/              while unfinished: state.json (removed last), shards.jsonl (the
                                   committed shards, appended), index-rows/ (each shard's Energon
                                   rows, ``cook.writer.energon_index``), stage/ (``cook.runner.staging``)

``OutputDir``'s docstring lists what opening does with each of these states; ``--overwrite``
removes only what cook writes (the entries above but the lock).
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import os
import shutil
from dataclasses import asdict

from cook import format as fmt
from cook.errors import ConfigError
from cook.manifest import Manifest, load_manifest
from cook.runner.resume import (
    RunIdentity,
    RunState,
    finished_differences,
    read_shard_log,
    shard_line,
    state_from_json,
    state_json,
)
from cook.writer.atomic import atomic_write
from cook.writer.dataset import DatasetWriter
from cook.writer.index_rows import remove_rows_from, rows_dir, rows_missing
from cook.writer.rejects import partial_path, roll_back_rejects

STATE_NAME = "state.json"  # in the progress directory
SHARD_LOG_NAME = "shards.jsonl"  # in the progress directory: the committed shards, one line each
STAGE_DIR = "stage"  # in the progress directory


def stage_dir(out_dir: str) -> str:
    """Where the units of a run in ``out_dir`` are staged (the workers' ``DiskStore``)."""
    return os.path.join(out_dir, fmt.PROGRESS_DIR, STAGE_DIR)


class OutputDir:
    """``output.dir`` for one run. ``with OutputDir(path, identity, overwrite) as output:`` locks it
    and opens what it holds; the run then cooks from ``output.state``, saves it at each checkpoint
    (``save``) and ``finish``es, or after an early failure ``discard_if_nothing_done``; leaving the
    block releases the lock.

    Opening, by what the directory holds:

    - ``--overwrite``, or no run state and no manifest: what cook writes is removed; a fresh state.
    - an interrupted run of the same fingerprint: rolled back to its state (``resumed``).
    - the same run, finished: nothing changes (``finished``).
    - this pipeline, finished but interrupted while removing its progress directory: the removal is
      completed (``finished`` and ``resumed``).
    - otherwise ``ConfigError`` (exit 2): a finished run that differs (naming how), an interrupted run
      of another pipeline or input, or one whose shards' Energon index rows are missing.
    """

    def __init__(self, path: str, identity: RunIdentity, overwrite: bool = False) -> None:
        self.path = path
        self.identity = identity
        self.overwrite = overwrite
        self.state = RunState(identity.fingerprint)
        self._logged = (0, 0)  # shards of ``state`` in the shard log, and the bytes of their lines
        self.resumed = False  # an interrupted run's state, or the clean-up of a finished run, was taken up
        self.finished = False  # the run is finished here: nothing to cook
        self.progress_dir = os.path.join(path, fmt.PROGRESS_DIR)
        self.stage_dir = stage_dir(path)
        self._manifest = os.path.join(path, fmt.MANIFEST_NAME)
        self._lock = OutputLock(path)
        self._opened = False

    def __enter__(self) -> OutputDir:
        if os.path.exists(self.path) and not os.path.isdir(self.path):
            raise ConfigError(f"output.dir: {self.path!r} exists and is not a directory")
        os.makedirs(self.path, exist_ok=True)
        self._lock.acquire()
        try:
            self._open()
            self._opened = True
            if self.finished and self.resumed:
                self.remove_progress()  # the manifest was written before the interrupt: finish the clean-up
        except BaseException:
            self._lock.release()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()

    def _open(self) -> None:
        if self.overwrite:
            self._clear()
            return
        state = self._load_state()
        if os.path.exists(self._manifest):
            self._open_finished(state)
        elif state is None:
            self._clear()
        elif state.fingerprint != self.identity.fingerprint:
            raise ConfigError(
                f"output.dir: {self.path!r} holds an interrupted run of a different pipeline or input; "
                f"pass --overwrite to discard it"
            )
        else:
            missing = rows_missing(self.path, len(state.shards))
            if missing:
                raise ConfigError(
                    f"output.dir: {self.path!r} holds an interrupted run whose shards' Energon index rows are missing "
                    f"({len(missing)} of {len(state.shards)} in {rows_dir(self.path)}, first {missing[0]}); "
                    f"pass --overwrite to start again"
                )
            self._roll_back(state)
            self.state, self.resumed = state, True

    def _open_finished(self, state: RunState | None) -> None:
        if state is not None and state.fingerprint == self.identity.fingerprint:
            self.finished = self.resumed = True  # interrupted after the manifest, before the progress was removed
            return
        with contextlib.suppress(OSError):
            os.rmdir(self.progress_dir)  # an empty leftover of the same case
        differences = ["its progress directory holds another run's state"] if state else self._finished_differences()
        if differences:
            raise ConfigError(
                f"output.dir: {self.path!r} holds a finished run ({'; '.join(differences)}); "
                f"pass --overwrite to replace it"
            )
        self.finished = True

    def _finished_differences(self) -> list[str]:
        path = os.path.join(self.path, fmt.RUN_RECORD_NAME)
        try:
            manifest = load_manifest(self.path)
            with open(path, encoding="utf-8") as handle:
                record = json.load(handle)
        except FileNotFoundError:  # a run by a cook that wrote no record: its inputs are unknown
            return [f"no {fmt.RUN_RECORD_NAME} records its input files"]
        except (OSError, ValueError) as err:
            return [f"it cannot be read: {err}"]
        if not isinstance(record, dict):
            return [f"it cannot be read: {path} is not a JSON object"]
        return finished_differences(manifest, record, self.identity)

    def finished_on_disk(self) -> bool:
        """Whether the run here is finished now. Opening leaves no manifest to a run it did not find
        finished, so once it has opened, a manifest on disk is final."""
        return self._opened and os.path.exists(self._manifest)

    def _clear(self) -> None:
        patterns = [
            f"{fmt.SHARD_PREFIX}*",
            fmt.MANIFEST_NAME,
            fmt.RUN_RECORD_NAME,
            fmt.REJECTS_NAME + "*",
            fmt.NV_META_DIR,
            fmt.PROGRESS_DIR,
        ]
        for path in sorted(p for pattern in patterns for p in glob.glob(os.path.join(self.path, pattern))):
            shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)

    def _load_state(self) -> RunState | None:
        """The saved state, its shards from the shard log (the lines it counts: a crash between a log
        append and state.json leaves lines that the next ``save`` cuts off), or None. Of another run's
        state (another pipeline or input, or any run of an earlier cook: its fingerprint differs) only
        the fingerprint is read: it is refused, never resumed."""
        try:
            with open(os.path.join(self.progress_dir, STATE_NAME), encoding="utf-8") as handle:
                data = json.load(handle)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as err:
            raise self._unreadable(STATE_NAME, str(err)) from None
        try:
            if data["fingerprint"] != self.identity.fingerprint:
                return RunState(str(data["fingerprint"]))
            try:
                with open(os.path.join(self.progress_dir, SHARD_LOG_NAME), "rb") as log:
                    shards = read_shard_log(log.read(data["shard_log_bytes"]))
            except FileNotFoundError:  # none yet, or removed before state.json with a finished run's progress
                shards = []
            if len(shards) != data["shard_count"] and not os.path.exists(self._manifest):
                raise self._unreadable(SHARD_LOG_NAME, f"{len(shards)} of the {data['shard_count']} shards it counts")
            state = state_from_json(data, shards)
        except (AttributeError, KeyError, TypeError, ValueError, OSError) as err:  # a hand-edited or damaged file
            raise self._unreadable(STATE_NAME, f"{type(err).__name__}: {err}") from None
        self._logged = (len(shards), data["shard_log_bytes"])
        return state

    def _unreadable(self, name: str, reason: str) -> ConfigError:
        return ConfigError(
            f"output.dir: {self.path!r} holds an interrupted run whose progress cannot be read "
            f"({fmt.PROGRESS_DIR}/{name}: {reason}); pass --overwrite to start again"
        )

    def _roll_back(self, state: RunState) -> None:
        """Remove what was written after ``state``: later shards, their indexes and rows, extra reject lines."""
        keep = {s.name for s in state.shards}
        for path in glob.glob(os.path.join(self.path, f"{fmt.SHARD_PREFIX}*")):
            if os.path.basename(path).removesuffix(fmt.INDEX_SUFFIX) not in keep:
                os.unlink(path)
        remove_rows_from(self.path, len(state.shards))
        roll_back_rejects(self.path, state.rejects_bytes)

    def save(self) -> None:
        """Append the shards committed since the last save to the shard log (durably, after cutting
        it back to what state.json counts), then write ``state.json`` atomically: a rerun resumes from
        the last one saved. A checkpoint costs the shards it adds, not every shard so far."""
        os.makedirs(self.progress_dir, exist_ok=True)
        count, size = self._logged
        if count > len(self.state.shards):  # a new state (nothing of the old one is kept)
            count, size = 0, 0
        lines = bytearray()  # each line dropped once copied: orjson's bytes hold ~4 KiB each while they live
        for shard in self.state.shards[count:]:
            lines += shard_line(shard)
        fd = os.open(os.path.join(self.progress_dir, SHARD_LOG_NAME), os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, size)
            os.lseek(fd, size, os.SEEK_SET)
            os.write(fd, lines)  # a regular file: one write takes it all
            os.fsync(fd)
        finally:
            os.close(fd)
        self._logged = (len(self.state.shards), size + len(lines))
        state = json.dumps(state_json(self.state, self._logged[1]), sort_keys=True)
        atomic_write(os.path.join(self.progress_dir, STATE_NAME), state)

    def has_staged(self) -> bool:
        """Whether the stage holds anything a resumed run could reuse."""
        try:
            return bool(os.listdir(self.stage_dir))
        except OSError:
            return False

    def remove_staged(self) -> None:
        """Remove every staged unit of a run whose samples are all in shards."""
        shutil.rmtree(self.stage_dir, ignore_errors=True)

    def discard_if_nothing_done(self) -> None:
        """After an early failure (before any unit was consumed): leave no partial files behind."""
        if self.state.next_unit == 0 and not self.state.shards and self.state.rejects_bytes == 0:
            partial = partial_path(self.path)
            if os.path.isfile(partial) and os.path.getsize(partial) == 0:
                os.unlink(partial)
            if not self.has_staged():
                self.remove_progress()

    def finish(self, writer: DatasetWriter, manifest: Manifest) -> None:
        """Publish the run (its ``.nv-meta/`` is written): the run record, then rejects and the manifest
        (the writer's ``publish``: the manifest last marks the run finished), then remove the progress
        directory."""
        self.write_run_record()
        writer.publish(manifest)
        self.remove_progress()  # finished: nothing left to resume

    def write_run_record(self) -> None:
        """Record the run's inputs; written before the manifest, which marks the run finished."""
        record = {"fingerprint": self.identity.fingerprint, "inputs": [asdict(f) for f in self.identity.inputs]}
        atomic_write(os.path.join(self.path, fmt.RUN_RECORD_NAME), json.dumps(record, indent=1, sort_keys=True) + "\n")

    def remove_progress(self) -> None:
        """Remove the progress directory of a finished run, ``state.json`` last: an interrupt midway
        leaves the state, by which a rerun knows the run finished and completes the removal."""
        if not os.path.isdir(self.progress_dir):
            return
        self._remove_all_but_state()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(self.progress_dir, STATE_NAME))
        os.rmdir(self.progress_dir)

    def _remove_all_but_state(self) -> None:
        for name in sorted(os.listdir(self.progress_dir)):
            if name != STATE_NAME:
                path = os.path.join(self.progress_dir, name)
                shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)


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
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"  # the pid it wrote
                os.close(fd)
                raise ConfigError(
                    f"output.dir: {os.path.dirname(self.path)!r} is locked by running cook pid {holder} ({self.path})"
                ) from None
            with contextlib.suppress(FileNotFoundError):
                if os.path.samestat(os.fstat(fd), os.stat(self.path)):
                    break
            os.close(fd)  # the holder released (and removed) the file between our open and flock: again
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd

    def release(self) -> None:
        """Remove the file, then drop the lock (a taker that opened the old file sees it is gone)."""
        if self._fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        os.close(self._fd)
        self._fd = None
