"""Where a run stages its cooked samples: under the output directory, or in node-local shared memory.

    place_stage(out_dir, node_local)  ->  <out>/.cook-progress/stage is a directory, or a symlink to
                                          /dev/shm/cook-stage-XXXX
    remove_stage(out_dir)             ->  the symlink and its target are gone
    remove_staged(out_dir)            ->  no staged unit is left, wherever it was (the run is done)

Staging under the output directory works everywhere (on a cluster it is shared storage, which every
node's shard writer reads). When every actor runs on this machine (an embedded local Ray) and
packing is windowed, the staged samples live only while their window is open, so they can stay in
shared memory: writing a tmpfs page costs about a third of writing a page of a disk filesystem's
cache here, and nothing is written back to the disk. ``buffer_size: all`` stages the whole dataset,
so it never goes to memory.

The stage stays where the output directory's symlink points: a resumed run on the same machine
reuses the units staged there, and the finished run (or ``--overwrite``) removes them with the
rest of the progress directory. A run that was killed and never resumed leaves its stage in
``/dev/shm``; the next run on the machine that stages there removes every stage whose output
directory no longer links to it (each stage names its owner in ``OWNER_FILE``). When shared memory
fills up during a run, units overflow to ``stage-overflow`` under the output directory
(``staging.DiskStore``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time

from cook import format as fmt

STAGE_DIR = "stage"
OVERFLOW_DIR = "stage-overflow"  # units that did not fit in shared memory
SHM_ROOT = "/dev/shm"
SHM_MIN_FREE = 4 * 2**30  # stage in shared memory only where this much of it is free
SHM_PREFIX = "cook-stage-"
OWNER_FILE = ".owner"  # the stage symlink's path, written once the symlink exists
UNOWNED_GRACE_S = 3600  # a stage without an owner is being created, or was left by a crash then


def stage_dir(out_dir: str) -> str:
    return os.path.join(out_dir, fmt.PROGRESS_DIR, STAGE_DIR)


def overflow_dir(out_dir: str) -> str:
    return os.path.join(out_dir, fmt.PROGRESS_DIR, OVERFLOW_DIR)


def free_bytes(root: str) -> int:
    """Bytes free to an unprivileged writer under ``root``; -1 when there is no such filesystem."""
    try:
        stats = os.statvfs(root)
    except OSError:
        return -1
    return stats.f_bavail * stats.f_frsize


def place_stage(out_dir: str, node_local: bool, root: str = SHM_ROOT, min_free: int = SHM_MIN_FREE) -> str | None:
    """Prepare the run's stage; returns the shared-memory directory it uses, or None (the output dir).

    ``node_local``: every reader of the stage runs on this machine. A stage already in memory is
    kept for a resumed run when ``node_local`` still holds, else removed (its units are cooked
    again); a stage already under the output directory is always kept.
    """
    path = stage_dir(out_dir)
    if os.path.islink(path):
        if node_local and os.path.isdir(path):
            return os.path.realpath(path)
        remove_stage(out_dir)
    if not node_local or os.path.lexists(path) or free_bytes(root) < min_free:
        return None
    sweep_orphans(root)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    target = tempfile.mkdtemp(prefix=SHM_PREFIX, dir=root)
    try:
        os.symlink(target, path)
    except BaseException:
        os.rmdir(target)
        raise
    with open(os.path.join(target, OWNER_FILE), "w", encoding="utf-8") as handle:
        handle.write(os.path.abspath(path))
    return target


def has_staged(out_dir: str) -> bool:
    """Whether the run's stage holds anything a resumed run could reuse."""
    try:
        return any(name != OWNER_FILE for name in os.listdir(stage_dir(out_dir)))
    except OSError:
        return False


def sweep_orphans(root: str = SHM_ROOT) -> list[str]:
    """Remove the stages under ``root`` that no output directory links to any more (a run killed and
    never resumed, or whose output directory was deleted); returns what it removed."""
    removed = []
    for entry in _stages(root):
        try:
            with open(os.path.join(entry.path, OWNER_FILE), encoding="utf-8") as handle:
                owner = handle.read()
        except FileNotFoundError:
            with contextlib.suppress(FileNotFoundError):
                if time.time() - entry.stat().st_mtime > UNOWNED_GRACE_S:
                    shutil.rmtree(entry.path, ignore_errors=True)
                    removed.append(entry.path)
            continue
        except OSError:
            continue  # another user's stage: not ours to judge
        if os.path.realpath(owner) != os.path.realpath(entry.path):
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
    return removed


def _stages(root: str) -> list[os.DirEntry[str]]:
    try:
        return [e for e in os.scandir(root) if e.name.startswith(SHM_PREFIX) and e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def remove_stage(out_dir: str) -> None:
    """Remove a stage kept in memory (the symlink's target, then the symlink). A stage under the
    output directory goes with the progress directory."""
    path = stage_dir(out_dir)
    if not os.path.islink(path):
        return
    target = os.path.realpath(path)
    if os.path.basename(target).startswith(SHM_PREFIX):  # never follow a link cook did not make
        shutil.rmtree(target, ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def remove_staged(out_dir: str) -> None:
    """Remove every staged unit of a run whose samples are all in shards: the stage (in shared memory
    or under the output directory) and its overflow. The finished run does this while Ray shuts
    down: freeing gigabytes of staged pages takes ~0.3 s that would otherwise come after it."""
    remove_stage(out_dir)
    for path in (stage_dir(out_dir), overflow_dir(out_dir)):
        if not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
