"""The output directory's life cycle: lock, refuse or clear a finished run, finish.

- A finished run (``cook_manifest.json`` present) is refused unless ``--overwrite``.
- An interrupted run of the same pipeline is resumed (``cook.runner.resume``); of another, refused.
- ``--overwrite`` removes only what cook writes (shards, indexes, .nv-meta, manifest, rejects,
  progress).
- An ``fcntl.flock`` on ``.cook.lock`` (which also holds the pid) keeps two runs out of one
  directory; the kernel releases it when its process dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import os
import shutil

from cook import format as fmt
from cook.errors import ConfigError
from cook.runner.resume import RunState, load_state, roll_back
from cook.runner.stage_place import remove_stage
from cook.writer.energon_index import progress_index_path


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
    patterns = [f"{fmt.SHARD_PREFIX}*", fmt.MANIFEST_NAME, fmt.REJECTS_NAME + "*", fmt.NV_META_DIR, fmt.PROGRESS_DIR]
    return sorted(p for pattern in patterns for p in glob.glob(os.path.join(out_dir, pattern)))


def _clear(out_dir: str) -> None:
    remove_stage(out_dir)
    for path in cooked_paths(out_dir):
        if os.path.isdir(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)


FINISHED = RunState("finished")  # prepare_output's answer for a run finished but for its clean-up


def prepare_output(out_dir: str, overwrite: bool, run_fingerprint: str) -> tuple[OutputLock, RunState | None]:
    """Lock ``out_dir``; return the state to resume from (same pipeline, interrupted) or None (fresh),
    or ``FINISHED`` when this very pipeline finished there but was interrupted while removing its
    progress directory (the caller removes it and reports the finished run).

    Refuses (``ConfigError``) a finished run without ``--overwrite``, and an interrupted run of a
    different pipeline without ``--overwrite``.
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
            if state is not None and state.fingerprint == run_fingerprint:
                return lock, FINISHED  # interrupted after the manifest, before the progress was removed
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(out_dir, fmt.PROGRESS_DIR))  # an empty leftover of the same case
            raise ConfigError(f"output.dir: {out_dir!r} holds a finished run; pass --overwrite to replace it")
        if state is not None and state.fingerprint != run_fingerprint:
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
