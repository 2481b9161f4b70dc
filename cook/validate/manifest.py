"""``cook_manifest.json`` (SPEC §8, §9): its structure, the rules it promises for every pack, and whether
its counts and per-shard entries equal what the shards hold.

Counts are compared only when every shard was walked to its end and every pack parsed; otherwise the
broken shard or pack is the error, and comparing totals would only repeat it.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from cook import format as fmt
from cook.dataset_stats import PACKING_EFFICIENCY, STORED_FILL, packing_efficiency, stored_fill
from cook.validate.problems import Code, PackRules, Problem, TokenInfo, problem

_SHA256: Final = re.compile("[0-9a-f]{64}")
_SHARD_KEYS: Final = {"name": str, "packs": int, "first_pack": int, "bytes": int, "sha256": str}


@dataclass(frozen=True, slots=True)
class ShardEntry:
    """A shard to scan: its file name and, when the manifest lists it, what the manifest says."""

    name: str
    packs: int | None = None
    first_pack: int | None = None
    bytes: int | None = None
    sha256: str | None = None


@dataclass(frozen=True, slots=True)
class Totals:
    """What the shards hold, summed over every scanned pack."""

    packs: int
    sources: int
    tokens: int
    targets: int
    padded: int


def lookup(manifest: Mapping[str, Any], path: str, kind: type | tuple[type, ...]) -> Any:
    """``manifest["a"]["b"]`` for ``path == "a.b"`` if it has type ``kind`` (bool is not an int), else None."""
    value: Any = manifest
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        return None
    return value if isinstance(value, kind) else None


def read_manifest(root: str) -> tuple[dict[str, Any] | None, list[Problem]]:
    """The parsed manifest (None when unreadable) and its structural problems."""
    try:
        with open(os.path.join(root, fmt.MANIFEST_NAME), encoding="utf-8") as handle:
            manifest = json.load(handle)
    except (UnicodeDecodeError, ValueError) as err:
        return None, [problem(Code.MANIFEST_INVALID, f"{fmt.MANIFEST_NAME} is not JSON: {err}")]
    if not isinstance(manifest, dict):
        return None, [problem(Code.MANIFEST_INVALID, f"{fmt.MANIFEST_NAME} is not a JSON object")]
    required: list[tuple[str, type | tuple[type, ...]]] = [
        ("schema_version", int),
        ("pack_schema_version", int),
        ("pipeline.packing.seq_len", int),
        ("pipeline.packing.pad_multiple", int),
        ("tokenizer.path", str),
        ("tokenizer.vocab_size", int),
        ("tokenizer.pad_id", int),
        ("packing_efficiency", (int, float)),
        ("rejects_by_reason", dict),
        ("shards", list),
        *((f"counts.{key}", int) for key in fmt.COUNT_KEYS),
    ]
    problems = [
        problem(Code.MANIFEST_INVALID, f"{fmt.MANIFEST_NAME}: {path} is missing or not {_kind_name(kind)}")
        for path, kind in required
        if lookup(manifest, path, kind) is None
    ]
    if "stored_fill" in manifest and lookup(manifest, "stored_fill", (int, float)) is None:  # optional: added within v1
        problems.append(
            problem(Code.MANIFEST_INVALID, f"{fmt.MANIFEST_NAME}: stored_fill is not {_kind_name((int, float))}")
        )
    for key, want in (("schema_version", fmt.MANIFEST_SCHEMA_VERSION), ("pack_schema_version", fmt.SCHEMA_VERSION)):
        if lookup(manifest, key, int) not in (None, want):
            problems.append(
                problem(
                    Code.MANIFEST_INVALID, f"{fmt.MANIFEST_NAME}: {key} is {manifest[key]}, this validator reads {want}"
                )
            )
    return manifest, problems + lineage_problems(manifest)


def lineage_problems(manifest: Mapping[str, Any]) -> list[Problem]:
    """``lineage`` (optional; ``cook repack``): a non-empty list of ``{path, manifest_sha256, sequences}``
    whose sequences add up to ``counts.records_in`` (every sequence read is packed or rejected)."""
    if "lineage" not in manifest:
        return []
    entries = manifest["lineage"]
    if not isinstance(entries, list) or not entries:
        return [problem(Code.MANIFEST_INVALID, f"{fmt.MANIFEST_NAME}: lineage is not a non-empty list")]
    for i, entry in enumerate(entries):
        kinds = (("path", str), ("manifest_sha256", str), ("sequences", int))
        bad = [key for key, kind in kinds if not isinstance(entry, Mapping) or lookup(entry, key, kind) is None]
        if bad or not _SHA256.fullmatch(entry["manifest_sha256"]) or entry["sequences"] < 0:
            what = f"{', '.join(bad)} missing or of the wrong type" if bad else "a bad manifest_sha256 or sequences"
            return [problem(Code.MANIFEST_INVALID, f"{fmt.MANIFEST_NAME}: lineage[{i}]: {what}")]
    total, records_in = sum(entry["sequences"] for entry in entries), lookup(manifest, "counts.records_in", int)
    if records_in is not None and total != records_in:
        return [problem(Code.RECORDS_IN, f"lineage sequences add up to {total}, counts.records_in is {records_in}")]
    return []


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(
        {"int": "an integer", "float": "a number", "str": "a string", "dict": "an object", "list": "a list"}[k.__name__]
        for k in kinds
    )


def pack_rules(manifest: Mapping[str, Any] | None, tokens: TokenInfo | None, deep: bool) -> PackRules:
    """The per-pack rules; ``tokens`` (from the tokenizer) wins over nothing, the manifest over ``tokens``."""
    m = manifest or {}
    given = tokens or TokenInfo()
    vocab_size = lookup(m, "tokenizer.vocab_size", int)
    pad_id = lookup(m, "tokenizer.pad_id", int)
    return PackRules(
        seq_len=lookup(m, "pipeline.packing.seq_len", int),
        pad_multiple=lookup(m, "pipeline.packing.pad_multiple", int),
        image_mode=lookup(m, "pipeline.media.image.mode", str),
        frame_storage=lookup(m, "pipeline.media.image.storage", str),
        video_frame_storage=lookup(m, "pipeline.media.video.storage", str),
        tokens=TokenInfo(
            vocab_size=vocab_size if vocab_size is not None else given.vocab_size,
            pad_id=pad_id if pad_id is not None else given.pad_id,
            control_ids=dict(given.control_ids),
        ),
        deep=deep,
    )


def shard_entries(root: str, manifest: Mapping[str, Any] | None) -> tuple[list[ShardEntry], list[Problem]]:
    """The manifest's shards that exist (or every ``*.tar`` when it lists none), missing and unlisted ones."""
    on_disk = sorted(name for name in os.listdir(root) if name.endswith(".tar"))
    listed = lookup(manifest or {}, "shards", list)
    if listed is None:
        return [ShardEntry(name) for name in on_disk], []
    entries, problems = [], []
    for i, item in enumerate(listed):
        if not isinstance(item, dict) or any(lookup(item, k, t) is None for k, t in _SHARD_KEYS.items()):
            problems.append(
                problem(Code.MANIFEST_INVALID, f"{fmt.MANIFEST_NAME}: shards[{i}] needs {sorted(_SHARD_KEYS)}")
            )
            continue
        if item["name"] != os.path.basename(item["name"]) or not item["name"].endswith(".tar"):
            problems.append(
                problem(
                    Code.MANIFEST_INVALID,
                    f"shards[{i}].name {item['name']!r} is not a .tar file name inside the dataset directory",
                )
            )
            continue
        if not os.path.isfile(os.path.join(root, item["name"])):
            problems.append(
                problem(Code.SHARD_MISSING, f"{item['name']} is listed in the manifest but absent", item["name"])
            )
            continue
        entries.append(ShardEntry(item["name"], item["packs"], item["first_pack"], item["bytes"], item["sha256"]))
    names = {item.get("name") for item in listed if isinstance(item, dict)}
    problems += [
        problem(Code.SHARD_UNLISTED, f"{name} is not listed in the manifest", name)
        for name in on_disk
        if name not in names
    ]
    return entries, problems


def check_shard_entry(
    entry: ShardEntry, packs: int, size: int, sha256: str | None, expected_first: int
) -> list[Problem]:
    """A manifest shard entry vs the shard: sha256 (None: not computed), bytes, packs, first pack index."""
    problems = []
    if sha256 is not None and entry.sha256 is not None and sha256 != entry.sha256:
        problems.append(problem(Code.SHA256, f"sha256 {sha256[:16]}... != manifest {entry.sha256[:16]}...", entry.name))
    for what, stored, actual in (
        ("bytes", entry.bytes, size),
        ("packs", entry.packs, packs),
        ("first_pack", entry.first_pack, expected_first),
    ):
        if stored is not None and stored != actual:
            problems.append(
                problem(
                    Code.MANIFEST_SHARD,
                    f"manifest shards entry says {what} {stored}, the shard holds {actual}",
                    entry.name,
                )
            )
    return problems


def check_counts(manifest: Mapping[str, Any], totals: Totals | None, rejected: int | None) -> list[Problem]:
    """Manifest counts == the shards' totals (None: not comparable); records_in == packed + rejected;
    records_rejected == the lines of rejects.jsonl (None: the file is absent)."""
    counts = lookup(manifest, "counts", dict) or {}
    problems = [] if totals is None else _compare_totals(manifest, counts, totals)
    stored = [lookup(counts, key, int) for key in ("records_in", "sources_packed", "records_rejected")]
    if None not in stored and stored[0] != stored[1] + stored[2]:
        problems.append(
            problem(
                Code.RECORDS_IN,
                f"counts.records_in {stored[0]} != sources_packed {stored[1]} + records_rejected {stored[2]}",
            )
        )
    if rejected is not None and stored[2] is not None and stored[2] != rejected:
        problems.append(
            problem(
                Code.REJECTS_COUNT, f"counts.records_rejected is {stored[2]}, {fmt.REJECTS_NAME} has {rejected} lines"
            )
        )
    return problems


def _compare_totals(manifest: Mapping[str, Any], counts: Mapping[str, Any], totals: Totals) -> list[Problem]:
    actual = {
        "packs": totals.packs,
        "sources_packed": totals.sources,
        "tokens": totals.tokens,
        "target_tokens": totals.targets,
        "padding_tokens": totals.padded - totals.tokens,
    }
    problems = [
        problem(Code.MANIFEST_COUNT, f"counts.{key} is {counts[key]}, the shards hold {value}")
        for key, value in actual.items()
        if lookup(counts, key, int) is not None and counts[key] != value
    ]
    seq_len = lookup(manifest, "pipeline.packing.seq_len", int)
    if seq_len:  # a missing seq_len is reported as a missing key
        efficiency = packing_efficiency(totals.tokens, totals.packs, seq_len)
        problems += _check_figure(manifest, "packing_efficiency", PACKING_EFFICIENCY[1], efficiency)
    return problems + _check_figure(manifest, "stored_fill", STORED_FILL[1], stored_fill(totals.tokens, totals.padded))


def _check_figure(manifest: Mapping[str, Any], key: str, rule: str, want: float) -> list[Problem]:
    """The manifest's ``key`` (when present and a number) equals ``want``, the ``rule`` of the shards' totals."""
    stored = lookup(manifest, key, (int, float))
    if stored is None or math.isclose(stored, want, rel_tol=1e-9, abs_tol=1e-12):
        return []
    return [problem(Code.MANIFEST_COUNT, f"{key} {stored} != {rule} = {want}")]
