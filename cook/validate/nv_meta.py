"""``.nv-meta/`` (SPEC §8): what Energon needs to load the directory without further steps.

``dataset.yaml`` is exactly ``format.dataset_yaml()`` (a crude dataset with cook's subflavor);
``split.yaml`` names every shard and nothing else; ``.info.json`` counts each shard's packs as the
shards hold them; Energon's ``index.sqlite`` exists. (That Energon actually loads every pack is
checked by ``--deep``.)
"""

from __future__ import annotations

import json
import os
import re

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


def check_nv_meta(root: str, shard_packs: dict[str, int], counts_known: bool) -> list[Problem]:
    """``shard_packs``: shard name -> packs it holds; ``counts_known``: every shard was walked to its end."""
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
    if not os.path.isfile(os.path.join(meta, "index.sqlite")):
        problems.append(_problem(f"{fmt.NV_META_DIR}/index.sqlite is missing (run energon prepare)"))
    return problems
