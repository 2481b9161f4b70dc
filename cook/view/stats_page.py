"""A dataset's stats -> one self-contained HTML page (``cook stats DIR --html FILE``).

    StatsSummary (cook.dataset_stats) + the --plot PNG bytes + per-input-file rows + rejects.jsonl
    -> headline table, the 2x2 plot, a table per input file (the part of a source before its last ``#``),
    reject reasons with up to ``EXAMPLES`` example sources and details each

Per-file rows come from every pack's meta.json (``source_rows``) and rejects.jsonl; nothing large is read.
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from cook import format as fmt
from cook.dataset_stats import StatsSummary
from cook.packfiles import ONLY_META, iter_packs
from cook.view.media_images import data_uri
from cook.view.page import page, text

EXAMPLES: Final = 3
DETAIL_CHARS: Final = 240


@dataclass
class SourceRow:
    """One input file: what was packed from it and what was rejected."""

    packed: int = 0
    tokens: int = 0
    targets: int = 0
    truncated: int = 0
    media: Counter[str] | None = None
    rejected: int = 0


def input_file(source: str) -> str:
    """``'data/a.jsonl#12' -> 'data/a.jsonl'``; a source without ``#`` is its own file."""
    return source.rpartition("#")[0] or source


def source_rows(root: str) -> dict[str, SourceRow]:
    """Input file -> its row, over every pack's meta.json and rejects.jsonl, sorted by file."""
    rows: defaultdict[str, SourceRow] = defaultdict(SourceRow)
    for _, raw in iter_packs(root, skip=ONLY_META):
        for seq in json.loads(bytes(raw.members[fmt.META])).get("sequences", []):
            row = rows[input_file(str(seq.get("source", "")))]
            row.packed += 1
            row.tokens += int(seq.get("length", 0))
            row.targets += int(seq.get("targets", 0))
            row.truncated += bool(seq.get("truncated", False))
            row.media = (row.media or Counter()) + Counter(seq.get("media", []))
    for reject in read_rejects(root):
        rows[input_file(str(reject.get("source", "")))].rejected += 1
    return dict(sorted(rows.items()))


def read_rejects(root: str) -> Iterator[dict[str, Any]]:
    """The lines of ``rejects.jsonl`` that are JSON objects, one at a time (a run may reject millions of
    records); none without the file; cook validate reports the rest."""
    path = os.path.join(root, fmt.REJECTS_NAME)
    if not os.path.isfile(path):
        return
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                yield row


def _source_table(rows: dict[str, SourceRow]) -> str:
    head = (
        '<tr><th>input file</th><th class="n">packed</th><th class="n">rejected</th><th class="n">tokens</th>'
        '<th class="n">targets</th><th class="n">truncated</th><th>media</th></tr>'
    )
    body = "".join(
        f'<tr><td>{text(name)}</td><td class="n">{r.packed:,}</td><td class="n">{r.rejected:,}</td>'
        f'<td class="n">{r.tokens:,}</td><td class="n">{r.targets:,}</td><td class="n">{r.truncated:,}</td>'
        f"<td>{text(', '.join(f'{k} {n}' for k, n in sorted((r.media or Counter()).items())) or '-')}</td></tr>"
        for name, r in rows.items()
    )
    return f'<table class="sources">{head}{body}</table>'


def _reject_table(summary: StatsSummary, rejects: Iterable[dict[str, Any]]) -> str:
    if not summary.rejects:
        return "<p>no rejects</p>"
    examples: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rejects:
        if len(examples[str(row.get("reason"))]) < EXAMPLES:
            examples[str(row.get("reason"))].append(row)
    body = "".join(
        f'<tr><td>{text(reason)}</td><td class="n">{n:,}</td><td>'
        + "<br>".join(
            f"{text(r.get('source', ''))}: {text(str(r.get('detail', ''))[:DETAIL_CHARS])}" for r in examples[reason]
        )
        + "</td></tr>"
        for reason, n in summary.rejects.items()
    )
    return f'<table class="rejects"><tr><th>reason</th><th class="n">records</th><th>examples</th></tr>{body}</table>'


def render_stats_page(root: str, summary: StatsSummary, plot_png: bytes) -> str:
    """The page: headline numbers, the plot, the per-file table and the reject reasons."""
    headline = "".join(f"<tr><th>{name}</th><td>{text(value)}</td></tr>" for name, value in summary.rows())
    body = (
        f'<header class="top" id="top"><h1>cook stats <small>{text(root)}</small></h1>'
        f"<table>{headline}</table></header>"
        f'<main><section class="sequence"><h2>histograms</h2><img class="plot" src="{data_uri(plot_png)}" '
        f'alt="fill, sequence length, sources per pack and reject reasons" style="max-width:100%"></section>'
        f'<section class="sequence"><h2>per input file</h2>{_source_table(source_rows(root))}</section>'
        f'<section class="sequence"><h2>reject reasons</h2>{_reject_table(summary, read_rejects(root))}</section>'
        "</main>"
    )
    return page(f"cook stats: {root}", body)
