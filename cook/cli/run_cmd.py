"""``cook run PIPELINE.yaml [--input] [--output] [--set k=v ...] [--ray-address] [--workers N] [--overwrite]``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cook.config import PipelineConfig, load_config
from cook.runner.pipeline import RunSummary, run_pipeline


def add_parser(sub: Any) -> None:
    p = sub.add_parser("run", help="cook a pipeline into an Energon dataset")
    p.add_argument("pipeline", help="pipeline YAML file")
    p.add_argument("--input", help="override input.path")
    p.add_argument("--output", help="override output.dir")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE")
    p.add_argument("--ray-address", help="join this Ray cluster (auto, ray://...) instead of an embedded one")
    p.add_argument("--workers", type=int, help="cooking actors (overrides ray.num_actors); 0 cooks in-process")
    p.add_argument("--overwrite", action="store_true", help="replace a finished run in the output directory")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(handler=handle)


def executor_factory(address: str | None, workers: int):
    def make(config: PipelineConfig):
        if workers == 0:
            from cook.runner.local import LocalExecutor

            return LocalExecutor(config)
        from cook.runner.ray import RayExecutor

        return RayExecutor(config, address, workers)

    return make


def summary_table(summary: RunSummary) -> str:
    c = summary.counts
    rows = [
        ("output", summary.out_dir + (" (resumed an interrupted run)" if summary.resumed else "")),
        ("records in", f"{c['records_in']:,}"),
        ("sources packed", f"{c['sources_packed']:,}"),
        ("records rejected", f"{c['records_rejected']:,}"),
        *((f"  {reason}", f"{n:,}") for reason, n in summary.rejects_by_reason.items()),
        ("packs", f"{c['packs']:,}"),
        ("shards", f"{summary.shards:,}"),
        ("tokens", f"{c['tokens']:,}"),
        ("target tokens", f"{c['target_tokens']:,}"),
        ("padding tokens", f"{c['padding_tokens']:,}"),
        ("packing efficiency", f"{summary.packing_efficiency:.2%}"),
        ("wall time", f"{summary.seconds:.1f} s"),
        ("throughput", f"{c['tokens'] / max(summary.seconds, 1e-9):,.0f} tokens/s"),
    ]
    width = max(len(k) for k, _ in rows)
    rule = "-" * (width + 2 + max(len(v) for _, v in rows))
    return "\n".join([rule, *(f"{k:<{width}}  {v}" for k, v in rows), rule])


def handle(args: argparse.Namespace) -> int:
    overrides = list(args.overrides)
    if args.input:
        overrides.append(f"input.path={args.input}")
    if args.output:
        overrides.append(f"output.dir={args.output}")
    if args.workers is not None:
        if args.workers < 0:
            from cook.errors import ConfigError

            raise ConfigError("--workers: must be >= 0")
        if args.workers > 0:
            overrides.append(f"ray.num_actors={args.workers}")
    if args.ray_address:
        overrides.append(f"ray.address={args.ray_address}")
    config = load_config(args.pipeline, overrides)
    workers = 0 if args.workers == 0 else config.ray.num_actors
    summary = run_pipeline(
        config, executor_factory(config.ray.address, workers), overwrite=args.overwrite, progress=not args.quiet
    )
    print(summary_table(summary), file=sys.stdout)
    return 0
