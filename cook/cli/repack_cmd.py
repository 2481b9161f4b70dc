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
from cook.cli.run_cmd import run_and_report, workers_arg
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
    return run_and_report(config, args, plan.units, _nothing_packed, plan.lineage)


def _nothing_packed(summary: RunSummary) -> str:
    rejected = summary.counts["records_rejected"]
    return f"no sequence was packed ({rejected} rejected; see {summary.out_dir}/{fmt.REJECTS_NAME})"
