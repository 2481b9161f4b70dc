"""``.nv-meta/`` (SPEC §8): what Energon needs to load the directory without further steps.

``dataset.yaml`` is exactly ``format.dataset_yaml()`` (a crude dataset with cook's subflavor);
``split.yaml`` names every shard and nothing else; ``.info.json`` counts each shard's packs as the
shards hold them; Energon's ``index.sqlite`` holds, for each shard (``tar_file_id`` = its place in
the split), one ``samples`` row per pack at the offset and size the tar walk found, and member rows.
Energon reads packs at those offsets, so a stale index (a shard edited without re-indexing) is
caught here. (That Energon actually loads every pack is checked by ``--deep``.)
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
from itertools import groupby

from cook import format as fmt
from cook.validate.problems import Code, Problem


def _problem(detail: str) -> Problem:
    return Problem(Code.NV_META.value, "", "", detail)


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


def split_shards(text: str) -> set[str]:
    """The shard names listed under ``split_parts`` in ``split.yaml`` (block lists, braces expanded)."""
    names: set[str] = set()
    section = ""
    for line in text.splitlines():
        if line and not line[0].isspace():
            section = line.split(":", 1)[0].strip()
        item = re.fullmatch(r"\s*-\s*['\"]?([^'\"\s]+)['\"]?\s*", line)
        if section == "split_parts" and item:
            names.update(expand_braces(item.group(1)))
    return names


def check_nv_meta(
    root: str, shard_packs: dict[str, int], counts_known: bool, offsets: dict[str, list[int] | None]
) -> list[Problem]:
    """``shard_packs``: shard name -> packs it holds; ``counts_known``: every shard was walked to its end;
    ``offsets``: shard name -> each pack's first header and the end, from the walk (None: incomplete)."""
    meta = os.path.join(root, fmt.NV_META_DIR)
    problems = []
    dataset = _read(os.path.join(meta, fmt.DATASET_YAML))
    if dataset != fmt.dataset_yaml():
        problems.append(
            _problem(
                f"{fmt.NV_META_DIR}/{fmt.DATASET_YAML} is missing or not cook's crude dataset "
                f"with subflavor {fmt.SUBFLAVOR}"
            )
        )
    if not shard_packs:
        return problems  # an empty dataset: Energon writes no split or index for it
    split = _read(os.path.join(meta, fmt.SPLIT_YAML))
    named = split_shards(split or "")
    if split is None or named != set(shard_packs):
        problems.append(
            _problem(f"{fmt.NV_META_DIR}/{fmt.SPLIT_YAML} names {sorted(named)}, the shards are {sorted(shard_packs)}")
        )
    info = _read(os.path.join(meta, fmt.INFO_JSON))
    try:
        counts = json.loads(info)["shard_counts"] if info is not None else None
    except (ValueError, KeyError, TypeError):
        counts = None
    if counts_known and counts != shard_packs:
        problems.append(
            _problem(f"{fmt.NV_META_DIR}/{fmt.INFO_JSON} shard_counts {counts} != the shards' packs {shard_packs}")
        )
    return problems + check_index_sqlite(root, offsets)


def check_index_sqlite(root: str, shard_offsets: dict[str, list[int] | None]) -> list[Problem]:
    """Energon's ``index.sqlite`` against each shard's walked offsets (shards in split order)."""
    where = f"{fmt.NV_META_DIR}/{fmt.INDEX_SQLITE}"
    path = os.path.join(root, fmt.NV_META_DIR, fmt.INDEX_SQLITE)
    if not os.path.isfile(path):
        return [_problem(f"{where} is missing")]
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
