"""``rejects.jsonl`` and source accounting (SPEC §4, §8): one well-formed line per rejected record, the
manifest's ``rejects_by_reason`` equal to the file, and every input record exactly once: no source is
packed twice or both packed and rejected.

Packed sources travel from the shard scans as 8-byte digests (``digests.source_digests``), with the
index of the pack that holds each, so a dataset of millions of sources stays small in memory.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cook import format as fmt
from cook.validate.digests import source_digests
from cook.validate.problems import Code, Problem, problem


@dataclass(slots=True)
class Rejects:
    """What ``rejects.jsonl`` holds: its line count (None when absent), sources, reasons, problems."""

    lines: int | None = None
    sources: list[str] = field(default_factory=list)
    by_reason: Counter[str] = field(default_factory=Counter)
    problems: list[Problem] = field(default_factory=list)


def read_rejects(root: str, max_problems: int = 20) -> Rejects:
    """Parse ``rejects.jsonl``: every line an object with string ``source``, ``reason``, ``detail``."""
    path = os.path.join(root, fmt.REJECTS_NAME)
    out = Rejects()
    if not os.path.isfile(path):
        out.problems.append(problem(Code.REJECTS_INVALID, f"{fmt.REJECTS_NAME} does not exist"))
        return out
    out.lines = 0
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            out.lines += 1
            why = _line_problem(line)
            if why:
                if len(out.problems) < max_problems:
                    out.problems.append(problem(Code.REJECTS_INVALID, f"{fmt.REJECTS_NAME} line {number}: {why}"))
                continue
            body = json.loads(line)
            out.sources.append(body["source"])
            out.by_reason[body["reason"]] += 1
    return out


def _line_problem(line: bytes) -> str:
    try:
        body = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        return f"not JSON ({err})"
    if not isinstance(body, dict) or set(body) != {"source", "reason", "detail"}:
        return "must be an object with exactly source, reason, detail"
    if not all(isinstance(body[key], str) for key in body):
        return "source, reason and detail must be strings"
    return ""


def check_by_reason(manifest: Mapping[str, Any], rejects: Rejects) -> list[Problem]:
    """The manifest's ``rejects_by_reason`` equals the reasons counted in the file."""
    stored = manifest.get("rejects_by_reason")
    counted = dict(sorted(rejects.by_reason.items()))
    if rejects.lines is None or not isinstance(stored, dict) or rejects.problems or stored == counted:
        return []
    detail = f"rejects_by_reason {dict(sorted(stored.items()))} != {fmt.REJECTS_NAME} {counted}"
    return [problem(Code.REJECTS_COUNT, detail)]


def check_sources(digests: np.ndarray, packs: np.ndarray, rejected: list[str], limit: int = 20) -> list[Problem]:
    """No source digest twice. ``digests``: uint64 [S] of packed sources; ``packs``: int64 [S] pack index."""
    problems: list[Problem] = []
    rejected_digests = source_digests(rejected)
    everything = np.concatenate([digests, rejected_digests])
    values, counts = np.unique(everything, return_counts=True)
    repeated = values[counts > 1]
    if not repeated.size:
        return problems
    by_digest = dict(zip(rejected_digests.tolist(), rejected, strict=True))
    for digest in repeated[:limit].tolist():
        where = sorted(fmt.pack_key(int(p)) for p in packs[digests == digest].tolist())
        name = by_digest.get(digest)
        what = f"rejected source {name!r}" if name else "a source"
        detail = f"{what} appears {int(counts[values == digest][0])} times; packed in {', '.join(where) or 'no pack'}"
        problems.append(problem(Code.SOURCE_DUPLICATE, detail, key=where[0] if where else ""))
    if repeated.size > limit:
        problems.append(problem(Code.SOURCE_DUPLICATE, f"... {repeated.size - limit} more repeated"))
    return problems
