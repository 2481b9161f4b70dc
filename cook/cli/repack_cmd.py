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
import json
import sys
from dataclasses import asdict
from typing import Any

from cook import format as fmt
from cook.cli.run_cmd import (
    INTERRUPTED_AFTER_FINISH,
    already_finished,
    executor_factory,
    joined_cluster,
    pick_workers,
    summary_table,
    truncation_warning,
    workers_arg,
)
from cook.runner.pipeline import InterruptedAfterFinish, RunSummary, run_pipeline
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
    p.add_argument("--ray-address", help="join this Ray cluster instead of an embedded one")
    p.add_argument(
        "--workers",
        type=workers_arg,
        default="auto",
        metavar="auto|N",
        help="as for cook run: auto (default), N Ray actors, or 0 (in-process)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace a finished run in the output directory")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.add_argument("--json", action="store_true", help="print the run summary as one JSON object instead of a table")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    sources = load_sources(args.sources, args.output)
    flags: dict[str, tuple[str, Any]] = {"output.dir": ("--output", args.output)}
    if isinstance(args.workers, int) and args.workers > 0:
        flags["ray.num_actors"] = ("--workers", args.workers)
    if args.ray_address:
        flags["ray.address"] = ("--ray-address", args.ray_address)
    config = repack_config(sources[0], args.overrides, flags)
    plan = plan_repack(sources, config)
    workers = pick_workers(args.workers, config, args.quiet, plan.units)
    summary: RunSummary | None = None
    try:
        with joined_cluster(config, workers):
            summary = run_pipeline(
                config,
                executor_factory(config.ray.address, workers, args.quiet),
                overwrite=args.overwrite,
                progress=not args.quiet,
                units=plan.units,
                lineage=plan.lineage,
            )
    except KeyboardInterrupt as interrupt:
        if summary is None and not isinstance(interrupt, InterruptedAfterFinish):
            raise  # work is left: cook.cli.main says to rerun the same command
        print(INTERRUPTED_AFTER_FINISH.format(config.output.dir), file=sys.stderr)
        return 130
    if args.json:
        print(json.dumps(asdict(summary), sort_keys=True), flush=True)
    else:
        text = already_finished(summary) if summary.already_finished else summary_table(summary, config.packing.seq_len)
        print(text, flush=True)
    warning = truncation_warning(summary.counts, config.packing.seq_len)
    if warning and not summary.already_finished:
        print(warning, file=sys.stderr)
    if summary.counts["packs"] == 0:
        rejected, where = summary.counts["records_rejected"], f"{summary.out_dir}/{fmt.REJECTS_NAME}"
        print(f"cook: error: no sequence was packed ({rejected} rejected; see {where})", file=sys.stderr)
        return 1
    return 0
