"""``cook repack SRC [SRC ...] --output DIR [--set packing.K=V | output.K=V ...] [--workers auto|N]
[--ray-address] [--overwrite] [--quiet] [--json]``.

Packs the cooked sequences of one or more datasets again, into one new dataset, without tokenizing or
decoding anything (``cook.runner.repack``). The executor, the summary, resume after an interrupt and
the rerun of a finished repack are those of ``cook run`` (``cook.cli.run_cmd``).

Before any work, each a one-line exit 2: a source that is not a finished cooked dataset, sources
whose contracts differ apart from the packing fields (naming the fields), a ``--set`` of a key
outside ``packing.*`` and ``output.*``, a missing or changed tokenizer, an output that is a source.
"""

from __future__ import annotations

import argparse
from typing import Any

from cook import format as fmt
from cook.cli.run_cmd import add_run_flags, run_and_report, run_flags
from cook.runner.pipeline import RunSummary
from cook.runner.repack import load_sources, plan_repack, repack_config


def add_parser(sub: Any) -> None:
    p = sub.add_parser("repack", help="pack cooked datasets again (new seq_len, algorithm, shard size; merge)")
    p.add_argument("sources", nargs="+", metavar="SRC", help="cooked dataset directories, in this order")
    p.add_argument("--output", required=True, help="the new dataset's directory")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="packing.K=V|output.K=V",
        help="packing.* "
        "and output.* keys only (packing.seq_len, algorithm, pad_multiple, buffer_size, overflow; output.shard_size)",
    )
    add_run_flags(p)
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    sources = load_sources(args.sources, args.output)
    config = repack_config(sources[0], args.overrides, run_flags(args))
    units, lineage = plan_repack(sources, config)
    return run_and_report(config, args, units, _nothing_packed, lineage)


def _nothing_packed(summary: RunSummary) -> str:
    rejected = summary.counts["records_rejected"]
    return f"no sequence was packed ({rejected} rejected; see {summary.out_dir}/{fmt.REJECTS_NAME})"
