"""``cook blend NAME=WEIGHT DIR [NAME=WEIGHT DIR ...] --output blend.yaml [--global-batch-size N
[--steps S]] [--json]``: an Energon metadataset that mixes cooked datasets by weight (``cook.blend``).

Before anything is written, every DIR must be a finished cooked dataset with packs and all must share
one data contract (``seq_len`` included; the packing algorithm and shard sizes may differ): else exit 2
with one line naming the part and the differing fields. A dataset reached by two parts (same
directory, manifest or shards) is a warning on stderr: Energon would draw it with the sum of the
weights. The YAML is written atomically; stdout gets a table of each part's packs, target tokens and
shares, or one JSON object with ``--json``. The shares are expectations over Energon's draws
(``DESCRIPTION``: the formulas of ``cook.blend``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from cook.blend import BlendPart, BlendReport, PartSpec, blend_report, blend_yaml, check_weight, duplicates, load_parts
from cook.cli.paths import check_output_file
from cook.errors import ConfigError
from cook.validate import NotADataset, check_is_dataset
from cook.writer.atomic import atomic_write

DESCRIPTION = """\
Write an Energon metadataset (MetadatasetV2) whose train split draws each pack from part i with
probability s_i = w_i / sum(w), before batching. All parts must share one data contract (seq_len
included). Expected shares, with P_i packs and T_i target tokens in part i (its manifest):
  samples (packs)   s_i = w_i / sum_j w_j
  target tokens     s_i * T_i / P_i  /  sum_j (s_j * T_j / P_j)
  steps per epoch of part i at --global-batch-size N:   P_i / (N * s_i)
  epochs of part i in --steps S:                        S * N * s_i / P_i"""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "blend",
        help="write an Energon metadataset mixing cooked datasets by weight",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("parts", nargs="+", metavar="NAME=WEIGHT DIR", help="a part's name, weight and cooked dataset")
    p.add_argument("--output", required=True, metavar="FILE.yaml", help="the metadataset to write")
    p.add_argument(
        "--global-batch-size", type=int, metavar="N", help="packs per step: report steps per epoch of each part"
    )
    p.add_argument("--steps", type=int, metavar="S", help="with --global-batch-size: epochs of each part in S steps")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.set_defaults(handler=handle)


def parse_parts(words: list[str]) -> list[PartSpec]:
    """``NAME=WEIGHT DIR`` pairs -> ``PartSpec``s; ``ConfigError`` for anything else."""
    if len(words) % 2:
        raise ConfigError(f"usage: give NAME=WEIGHT DIR pairs; {words[-1]!r} has no partner")
    specs = []
    for label, path in zip(words[::2], words[1::2], strict=True):
        name, sep, weight = label.partition("=")
        if not sep or not name:
            raise ConfigError(f"usage: {label!r} is not NAME=WEIGHT (e.g. chat=3)")
        specs.append(PartSpec(name, check_weight(name, weight), path))
    return specs


def check_run_length(global_batch_size: int | None, steps: int | None) -> None:
    if global_batch_size is not None and global_batch_size < 1:
        raise ConfigError(f"--global-batch-size: must be >= 1, got {global_batch_size}")
    if steps is not None and (steps < 1 or global_batch_size is None):
        raise ConfigError("--steps: must be >= 1 and needs --global-batch-size")


def load_datasets(specs: list[PartSpec]) -> tuple[BlendPart, ...]:
    """``cook.blend.load_parts`` after checking that every part is a finished cooked dataset."""
    for spec in specs:
        try:
            check_is_dataset(spec.path)
        except NotADataset as err:
            raise ConfigError(f"blend part {spec.name}: {err}") from None
    return load_parts(specs)


def handle(args: argparse.Namespace) -> int:
    specs = parse_parts(args.parts)
    check_output_file("--output", args.output, "blend.yaml")
    check_run_length(args.global_batch_size, args.steps)
    parts = load_datasets(specs)
    warnings = duplicates(parts)
    for line in warnings:
        print(f"cook blend: warning: {line}", file=sys.stderr)
    atomic_write(args.output, blend_yaml(parts, args.output))
    print(f"cook blend: wrote {args.output}", file=sys.stderr)
    report = blend_report(parts, args.global_batch_size, args.steps)
    print(json.dumps({"output": args.output, "warnings": warnings, **report.to_dict()}) if args.json else table(report))
    return 0


def _optional(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table(report: BlendReport) -> str:
    """One row per part and the expectations per drawn pack."""
    rows = [
        f"{'part':<16} {'weight':>8} {'packs':>10} {'target tokens':>14} {'samples':>8} {'targets':>8}"
        f" {'steps/epoch':>12} {'epochs':>8}"
    ]
    for part in report.parts:
        steps, epochs = _optional(part.steps_per_epoch, ",.1f"), _optional(part.epochs, ".2f")
        rows.append(
            f"{part.name:<16} {part.weight:>8g} {part.packs:>10,} {part.target_tokens:>14,} {part.sample_share:>8.2%}"
            f" {part.target_token_share:>8.2%} {steps:>12} {epochs:>8}"
        )
    rows += [
        "",
        f"seq_len {report.seq_len}; per drawn pack: {report.target_tokens_per_pack:,.1f} target tokens,"
        f" packing efficiency {report.packing_efficiency:.2%}",
    ]
    if report.global_batch_size is not None:
        run = f"; {report.steps:,} steps" if report.steps is not None else ""
        rows.append(f"global batch size {report.global_batch_size:,}{run}")
    return "\n".join(rows)
