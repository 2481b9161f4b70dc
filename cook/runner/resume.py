"""Resumable progress: an atomic ``state.json`` (SPEC §2: resume an interrupted run).

The state is saved when a window's shards are all written, and every ``CHECKPOINT_SHARDS`` shards
within a window (the shard group of a long window, or of ``buffer_size: all``). It records where the
first unfinished window starts — ``next_unit`` and how many of that unit's samples earlier windows
packed (``skip``) — and the shards written so far, in order, which may include the first shards of
that window; plus the byte length of ``rejects.jsonl.partial`` and the counts at the window's
start. Cooking and planning are deterministic, so a resumed run plans the same window again, skips
the shards it already has and goes on: the result is byte-identical to an uninterrupted run. Units
already staged on disk (``cook.runner.staging``) are not cooked again. Files written after the last
state (later shards, reject lines) are removed or truncated first.

The fingerprint ties the state to the pipeline (minus ``ray``: the actor count never changes the
output) and the unit plan; a different pipeline in the same directory is refused.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from typing import Any

from cook import format as fmt
from cook.config import PipelineConfig
from cook.manifest import ShardInfo
from cook.packing.metrics import PackingStats
from cook.runner.units import Unit
from cook.writer.atomic import atomic_write
from cook.writer.dataset import recover_rejects

STATE_NAME = "state.json"
CHECKPOINT_SHARDS = 16


def fingerprint(config: PipelineConfig, units: list[Unit]) -> str:
    pipeline = {k: v for k, v in config.to_dict().items() if k != "ray"}
    plan = [(u.path, u.format, u.span, u.first_index, os.path.getsize(u.path)) for u in units]
    body = json.dumps({"pipeline": pipeline, "plan": plan}, sort_keys=True, default=str)
    return hashlib.sha256(body.encode()).hexdigest()


@dataclass
class RunState:
    """The driver's running record, saved at each checkpoint. ``packing`` is None (and ``counts``
    all zero) until the first checkpoint; on disk both are then ``{}``."""

    fingerprint: str
    next_unit: int = 0
    skip: int = 0  # samples of next_unit already packed; its rejects/records are already counted
    windows: int = 0  # windows whose shards are all written
    window_shard: int = 0  # first shard of the first unfinished window
    window_pack: int = 0  # first pack of the first unfinished window
    rejects_bytes: int = 0
    shards: list[ShardInfo] = field(default_factory=list)
    counts: fmt.Counts = fmt.Counts()
    rejects_by_reason: dict[str, int] = field(default_factory=dict)
    packing: PackingStats | None = None  # the completed windows' stats
    windows_short_of_pack_count_multiple: int = 0

    @property
    def packs(self) -> int:
        return sum(s.packs for s in self.shards)


# windows that packed short of packing.pack_count_multiple: a top-level key of state.json; an older
# state.json (cook 0.1.0) keeps it inside "packing", where state_from_json still finds it
_UNMET = "windows_short_of_pack_count_multiple"


def state_json(state: RunState) -> dict[str, Any]:
    """``state`` as the JSON object of ``state.json`` (``state_from_json`` reads it back)."""
    checkpointed = state.packing is not None
    return {
        "fingerprint": state.fingerprint,
        "next_unit": state.next_unit,
        "skip": state.skip,
        "windows": state.windows,
        "window_shard": state.window_shard,
        "window_pack": state.window_pack,
        "rejects_bytes": state.rejects_bytes,
        "shards": [asdict(s) for s in state.shards],
        "counts": state.counts.to_dict() if checkpointed else {},
        "rejects_by_reason": state.rejects_by_reason,
        "packing": asdict(state.packing) if state.packing is not None else {},
        _UNMET: state.windows_short_of_pack_count_multiple,
    }


def state_from_json(data: dict[str, Any]) -> RunState:
    packing = dict(data["packing"])
    inside = int(packing.pop(_UNMET, 0))  # an older state.json
    unmet = int(data[_UNMET]) if _UNMET in data else inside
    stats = None
    if packing:
        packing["sequences_per_pack"] = tuple(tuple(pair) for pair in packing["sequences_per_pack"])
        packing["fill_histogram"] = tuple(packing["fill_histogram"])
        stats = PackingStats(**packing)
    return RunState(
        fingerprint=data["fingerprint"],
        next_unit=data["next_unit"],
        skip=data["skip"],
        windows=data["windows"],
        window_shard=data["window_shard"],
        window_pack=data["window_pack"],
        rejects_bytes=data["rejects_bytes"],
        shards=[ShardInfo(**s) for s in data["shards"]],
        counts=fmt.Counts.from_dict(data["counts"]),
        rejects_by_reason=dict(data["rejects_by_reason"]),
        packing=stats,
        windows_short_of_pack_count_multiple=unmet,
    )


def progress_dir(out_dir: str) -> str:
    return os.path.join(out_dir, fmt.PROGRESS_DIR)


def remove_progress(out_dir: str) -> None:
    """Remove the progress directory of a finished run, ``state.json`` last: an interrupt midway
    leaves the state, by which a rerun knows the run finished and completes the removal."""
    root = progress_dir(out_dir)
    if not os.path.isdir(root):
        return
    _remove_all_but_state(root)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(root, STATE_NAME))
    os.rmdir(root)


def _remove_all_but_state(root: str) -> None:
    for name in sorted(os.listdir(root)):
        if name != STATE_NAME:
            path = os.path.join(root, name)
            shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)


def save_state(out_dir: str, state: RunState) -> None:
    os.makedirs(progress_dir(out_dir), exist_ok=True)
    atomic_write(os.path.join(progress_dir(out_dir), STATE_NAME), json.dumps(state_json(state), sort_keys=True))


def load_state(out_dir: str) -> RunState | None:
    path = os.path.join(progress_dir(out_dir), STATE_NAME)
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return None
    return state_from_json(data)


def roll_back(out_dir: str, state: RunState) -> None:
    """Remove what was written after ``state``: later shards and indexes, extra reject lines."""
    keep = {s.name for s in state.shards}
    for path in glob.glob(os.path.join(out_dir, f"{fmt.SHARD_PREFIX}*")):
        name = os.path.basename(path)
        if name.removesuffix(fmt.INDEX_SUFFIX) not in keep:
            os.unlink(path)
    recover_rejects(out_dir)
    partial = os.path.join(out_dir, fmt.REJECTS_NAME + ".partial")
    with contextlib.suppress(FileNotFoundError), open(partial, "r+b") as handle:
        handle.truncate(state.rejects_bytes)
