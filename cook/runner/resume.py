"""Which run this is (``RunIdentity``) and how far it got (``RunState``, saved as ``state.json``;
SPEC §2: resume an interrupted run, a rerun of a finished run is no error).

The state is saved when shards were committed and ``ray.checkpoint_interval_s`` have passed since the last
save (so its cost does not grow with the number of windows), at the end, and on an interrupt (Ctrl-C)
while the driver waits on its workers; a ``kill -9`` resumes from the last save. It records where the
first unfinished window starts — ``next_unit`` and how many of that unit's samples earlier windows
packed (``skip``) — and the shards written so far, in order, which may include the first shards of
that window; plus the byte length of ``rejects.jsonl.partial`` and the counts at the window's
start. Cooking and planning are deterministic, so a resumed run plans the same window again, skips
the shards it already has and goes on: the result is byte-identical to an uninterrupted run. Units
already staged on disk (``cook.runner.staging``) are not cooked again. Files written after the last
state (later shards, reject lines) are removed or truncated first.

The fingerprint ties the state to the pipeline (minus ``ray``: the actor count never changes the
output) and the unit plan; a different pipeline in the same directory is refused. A finished run
must also match its manifest and run record (``finished_differences``).

This module holds the data and its JSON; ``cook.runner.output_dir.OutputDir`` owns the files:
where they live, loading, saving, rolling back and removing them.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import orjson

from cook import __version__
from cook import format as fmt
from cook.config import PipelineConfig
from cook.contract import tokenizer_files_sha256
from cook.manifest import Manifest, ShardInfo
from cook.packing.metrics import PackingStats
from cook.runner.units import Unit

SHOWN_DIFFERENCES = 3  # a refusal names at most this many differing keys or input files


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


_CONVERTED = ("shards", "counts", "packing")  # the fields of RunState that state.json holds in another form


def shard_line(shard: ShardInfo) -> bytes:
    """One line of the shard log (``shards.jsonl`` beside ``state.json``): a shard's entry, appended
    once when it is committed, so a checkpoint costs what it adds, not every shard so far. orjson: ~1 µs
    a line against ``json.dumps``' ~9."""
    return orjson.dumps(shard.to_dict(), option=orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE)


def read_shard_log(data: bytes) -> list[ShardInfo]:
    """The shard log's entries (``data``: its first ``shard_log_bytes``, as ``state.json`` counts them)."""
    return [ShardInfo(**orjson.loads(line)) for line in data.splitlines()]


def state_json(state: RunState, shard_log_bytes: int) -> dict[str, Any]:
    """``state`` as the JSON object of ``state.json`` (``state_from_json`` reads it back). Its shards
    are the first ``shard_count`` entries of the shard log, ``shard_log_bytes`` long."""
    checkpointed = state.packing is not None
    data = {f.name: getattr(state, f.name) for f in fields(RunState) if f.name not in _CONVERTED}
    data.update(
        shard_count=len(state.shards),
        shard_log_bytes=shard_log_bytes,
        counts=state.counts.to_dict() if checkpointed else {},
        packing=asdict(state.packing) if state.packing is not None else {},
    )
    return data


def state_from_json(data: dict[str, Any], shards: list[ShardInfo]) -> RunState:
    """``state.json``'s object, with its shards (read from the shard log), as a ``RunState``."""
    return RunState(
        **{f.name: data[f.name] for f in fields(RunState) if f.name not in _CONVERTED},
        shards=shards,
        counts=fmt.Counts.from_dict(data["counts"]),
        packing=PackingStats.from_fields(data["packing"]) if data["packing"] else None,
    )


@dataclass(frozen=True)
class InputFile:
    """One input file as a finished run saw it: a size or mtime that differs now means new input."""

    path: str
    bytes: int
    mtime_ns: int


@dataclass(frozen=True)
class RunIdentity:
    """What makes a rerun the same run. ``fingerprint`` (the pipeline minus ``ray``, and the unit
    plan) also ties an interrupted run to its resume; a finished run must further match each input
    file's size and mtime (its run record) and, from its manifest, the pipeline, the tokenizer
    files' sha256 and the cook version."""

    fingerprint: str
    pipeline: dict[str, Any]  # config.to_dict() minus ray, as JSON reads it back
    inputs: tuple[InputFile, ...]
    tokenizer_path: str


def run_identity(config: PipelineConfig, units: list[Unit]) -> RunIdentity:
    pipeline = _without_ray(config.to_dict())
    plan = [(u.path, u.format, u.span, os.path.getsize(u.path)) for u in units]  # first lines follow from these
    body = json.dumps({"pipeline": pipeline, "plan": plan}, sort_keys=True, default=str)
    paths = dict.fromkeys(unit.path for unit in units)  # each file once, in plan order
    stats = {path: os.stat(path) for path in paths}
    return RunIdentity(
        fingerprint=hashlib.sha256(body.encode()).hexdigest(),
        pipeline=json.loads(json.dumps(pipeline, default=str)),
        inputs=tuple(InputFile(path, stats[path].st_size, stats[path].st_mtime_ns) for path in paths),
        tokenizer_path=config.tokenizer.path,
    )


def finished_differences(manifest: Manifest, record: dict[str, Any], identity: RunIdentity) -> list[str]:
    """How the finished run of ``manifest`` and run ``record`` (``format.RUN_RECORD_NAME``) differs from
    ``identity``'s run; empty when it is the same run."""
    differences = []
    if manifest.cook_version != __version__:
        differences.append(f"made by cook {manifest.cook_version}, this is cook {__version__}")
    keys = _differing_keys(_without_ray(dict(manifest.pipeline)), identity.pipeline)
    if keys:
        differences.append(f"{_some(keys)} {'differs' if len(keys) == 1 else 'differ'}")
    if dict(manifest.tokenizer.sha256) != tokenizer_files_sha256(identity.tokenizer_path):
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
