"""``.nv-meta/`` (SPEC §8): what Energon needs to load the directory without further steps.

``dataset.yaml`` is exactly ``format.dataset_yaml()`` (a crude dataset with cook's subflavor);
``split.yaml`` names every shard and nothing else; ``.info.json`` counts each shard's packs as the
shards hold them; Energon's ``index.sqlite`` holds, for each shard (``tar_file_id`` = its place in
the split), one ``samples`` row per pack at the offset and size the tar walk found, and member rows.
Energon reads packs at those offsets, so a stale index (a shard edited without re-indexing) is
caught here. (That Energon actually loads every pack is checked by ``--deep``.)

Without any of those four files, or with a ``split.yaml`` whose ``train`` part names no shard (absent,
empty, or every shard in ``exclude``), Energon cannot load the directory at all: those are their own
codes, ``nv_meta_missing`` and ``split_empty``, so the report says why (an empty dataset, where every
record was rejected, shows both, with ``no_packs`` from ``dataset.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
from dataclasses import dataclass
from itertools import groupby

from cook import format as fmt
from cook.validate.problems import Code, Problem, problem


def _problem(detail: str) -> Problem:
    return problem(Code.NV_META, detail)


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def expand_braces(pattern: str) -> list[str]:
    """Energon's collapsed names: ``shard-{000000..000002}.tar`` -> three names (``{a,b}`` works too)."""
    match = re.search(r"\{([^{}]*)\}", pattern)
    if match is None:
        return [pattern]
    head, tail, body = pattern[: match.start()], pattern[match.end() :], match.group(1)
    bounds = re.fullmatch(r"(\d+)\.\.(\d+)", body)
    if bounds:
        width, low, high = len(bounds.group(1)), int(bounds.group(1)), int(bounds.group(2))
        options = [f"{value:0{width}d}" for value in range(low, high + 1)]
    else:
        options = body.split(",")
    return [name for option in options for name in expand_braces(head + option + tail)]


@dataclass(frozen=True, slots=True)
class Split:
    """What ``split.yaml`` names: each split part's shards (braces expanded) and the excluded names."""

    parts: dict[str, set[str]]
    exclude: set[str]


def _flow_names(text: str) -> set[str]:
    """``[]`` or ``[a, 'b']`` after a key -> its names (braces expanded); nothing for an empty value."""
    body = text.strip()
    if not (body.startswith("[") and body.endswith("]")):
        return set()
    items = (item.strip().strip("'\"") for item in body[1:-1].split(","))
    return {name for item in items if item for name in expand_braces(item)}


def parse_split(text: str) -> Split:
    """``split.yaml`` as Energon's ``WebdatasetSplits`` writes it (block or flow lists, braces collapsed)."""
    parts: dict[str, set[str]] = {}
    exclude: set[str] = set()
    section, part = "", ""
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        item = re.fullmatch(r"\s*-\s*['\"]?([^'\"\s]+)['\"]?\s*", line)
        if not line[0].isspace() and not item:
            section, _, rest = (piece.strip() for piece in line.partition(":"))
            if section == "exclude":
                exclude |= _flow_names(rest)
        elif item and section == "exclude":
            exclude.update(expand_braces(item.group(1)))
        elif item and section == "split_parts" and part:
            parts[part].update(expand_braces(item.group(1)))
        elif section == "split_parts" and ":" in line:
            key, _, rest = line.partition(":")
            part = key.strip().strip("'\"")
            parts.setdefault(part, set()).update(_flow_names(rest))
    return Split(parts, exclude)


def _missing(name: str) -> Problem:
    return problem(
        Code.NV_META_MISSING, f"{fmt.NV_META_DIR}/{name} is missing: megatron.energon cannot load the dataset"
    )


def check_nv_meta(
    root: str, shard_packs: dict[str, int], counts_known: bool, offsets: dict[str, list[int] | None]
) -> list[Problem]:
    """``shard_packs``: shard name -> packs it holds; ``counts_known``: every shard was walked to its end;
    ``offsets``: shard name -> each pack's first header and the end, from the walk (None: incomplete)."""
    meta = os.path.join(root, fmt.NV_META_DIR)
    problems = []
    dataset = _read(os.path.join(meta, fmt.DATASET_YAML))
    if dataset is None and not os.path.exists(os.path.join(meta, fmt.DATASET_YAML)):
        problems.append(_missing(fmt.DATASET_YAML))
    elif dataset != fmt.dataset_yaml():
        problems.append(
            _problem(
                f"{fmt.NV_META_DIR}/{fmt.DATASET_YAML} is missing or not cook's crude dataset "
                f"with subflavor {fmt.SUBFLAVOR}"
            )
        )
    problems += _check_split(_read(os.path.join(meta, fmt.SPLIT_YAML)), set(shard_packs))
    info = _read(os.path.join(meta, fmt.INFO_JSON))
    try:
        counts = json.loads(info)["shard_counts"] if info is not None else None
    except (ValueError, KeyError, TypeError):
        counts = None
    if info is None:
        problems.append(_missing(fmt.INFO_JSON))
    elif counts_known and counts != shard_packs:
        problems.append(
            _problem(f"{fmt.NV_META_DIR}/{fmt.INFO_JSON} shard_counts {counts} != the shards' packs {shard_packs}")
        )
    return problems + check_index_sqlite(root, offsets)


def _check_split(text: str | None, shards: set[str]) -> list[Problem]:
    """split.yaml exists, its train split names a shard, it names exactly the shards and excludes none."""
    if text is None:
        return [_missing(fmt.SPLIT_YAML)]
    split = parse_split(text)
    problems = []
    train = split.parts.get("train", set()) - split.exclude
    if not train:
        problems.append(
            problem(
                Code.SPLIT_EMPTY,
                f"{fmt.NV_META_DIR}/{fmt.SPLIT_YAML}: the train split names no shard "
                "(megatron.energon's get_train_dataset cannot load it)",
            )
        )
    named = set().union(*split.parts.values())
    if named != shards:
        problems.append(
            _problem(f"{fmt.NV_META_DIR}/{fmt.SPLIT_YAML} names {sorted(named)}, the shards are {sorted(shards)}")
        )
    if split.exclude:
        problems.append(
            _problem(f"{fmt.NV_META_DIR}/{fmt.SPLIT_YAML} excludes {sorted(split.exclude)}; Energon would skip them")
        )
    return problems


def check_index_sqlite(root: str, shard_offsets: dict[str, list[int] | None]) -> list[Problem]:
    """Energon's ``index.sqlite`` against each shard's walked offsets (shards in split order)."""
    where = f"{fmt.NV_META_DIR}/{fmt.INDEX_SQLITE}"
    path = os.path.join(root, fmt.NV_META_DIR, fmt.INDEX_SQLITE)
    if not os.path.isfile(path):
        return [_missing(fmt.INDEX_SQLITE)]
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            columns = "tar_file_id, sample_index, byte_offset, byte_size"
            rows = db.execute(f"SELECT {columns} FROM samples ORDER BY tar_file_id, sample_index").fetchall()
            parts = dict(db.execute("SELECT tar_file_id, COUNT(*) FROM sample_parts GROUP BY tar_file_id").fetchall())
    except sqlite3.Error as error:
        return [_problem(f"{where} is not a readable Energon index: {error}")]
    by_shard = {shard: [row[1:] for row in group] for shard, group in groupby(rows, key=lambda row: row[0])}
    problems = []
    for shard, (name, offsets) in enumerate(shard_offsets.items()):
        got = by_shard.pop(shard, [])
        if offsets is not None:
            expected = [(i, offsets[i], offsets[i + 1] - offsets[i]) for i in range(len(offsets) - 1)]
            if got != expected:
                problems.append(
                    _problem(f"{where}: the samples rows of {name} (tar_file_id {shard}) do not match its packs")
                )
        if got and parts.get(shard, 0) < len(got):
            problems.append(_problem(f"{where}: {name} (tar_file_id {shard}) has fewer member rows than packs"))
    if by_shard:
        problems.append(_problem(f"{where} has samples rows for tar_file_id {sorted(by_shard)}, beyond the shards"))
    return problems
