"""``cook validate DIR [--json] [--deep] [--jobs N] [--tokenizer PATH] [--reference N [--seed S]]``: check
every SPEC §9 invariant.

Exit 0 valid, 1 invalid, 2 not a dataset or a bad option (one line on stderr). ``--json`` prints exactly
one object: ``{"valid", "packs", "sources", "errors": [{"code", "shard", "key", "detail"}], "errors_total",
...}`` (at most ``--max-errors`` listed; ``errors_total`` counts all), and with ``--reference`` a
``"reference"`` object (``cook.validate.reference.ReferenceReport.as_json``).

``--reference N`` re-renders N sampled sequences from their source records with Hugging Face's
``apply_chat_template`` and compares ids and target masks (``cook.validate.reference``); each
difference is an error ``reference_mismatch`` naming the source record and the token position, and a
reference that cannot run at all (no tokenizer, no manifest pipeline) is ``reference_unavailable``.

The tokenizer (the manifest's ``tokenizer.path``, or ``--tokenizer``) supplies the placeholder token
ids; when it cannot be loaded those checks are skipped with a warning, never failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from cook.contract import expected_tokenizer_problems
from cook.errors import ConfigError
from cook.manifest import ManifestError, load_manifest
from cook.runner.progress import Progress
from cook.validate import Report, ValidateOptions, check_is_dataset, validate_dataset
from cook.validate.problems import Problem
from cook.validate.reference import DatasetUnreadable, ReferenceReport, check_reference
from cook.validate.tokenizer_info import load_token_info

TEXT_ERRORS = 50


def add_parser(sub: Any) -> None:
    p = sub.add_parser("validate", help="check a cooked dataset against every invariant (SPEC §9)")
    p.add_argument("dir", help="cooked dataset directory")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument(
        "--deep",
        action="store_true",
        help="also decode placeholder blocks per sequence and load every pack through megatron.energon",
    )
    p.add_argument("--jobs", type=int, default=None, help="shards checked in parallel (default min(4, cpus))")
    p.add_argument("--tokenizer", help="tokenizer directory (default: the manifest's tokenizer.path)")
    p.add_argument(
        "--expect-tokenizer",
        metavar="DIR2",
        help="also check the data contract against this training-side tokenizer directory (code contract_mismatch)",
    )
    p.add_argument("--max-errors", type=int, default=1000, help="errors listed in the report (all are counted)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument(
        "--reference",
        type=int,
        metavar="N",
        help="also re-render N sampled sequences from their source records with the tokenizer's own chat "
        "template (Hugging Face apply_chat_template) and compare ids and target masks",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the --reference sample (default 0)")
    p.set_defaults(handler=handle)


class _ShardProgress:
    """``ValidateOptions.on_shard`` -> the shared progress display (``cook.runner.progress``)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.bar: Progress | None = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            self.bar = Progress(total, enabled=self.enabled, desc="cook validate", unit="shards", last_line=True)
        self.bar.update(done - self.bar.done)
        if done == total:
            self.bar.close()


def render(report: Report, root: str) -> str:
    """The human report: one verdict line, then up to ``TEXT_ERRORS`` errors."""
    verdict = "VALID" if report.valid else f"INVALID ({report.problems_total} errors)"
    lines = [
        f"{verdict}  {root}: {report.shards} shards, {report.packs:,} packs, {report.sources:,} sources, "
        f"{report.bytes / 1e6:,.1f} MB"
    ]
    for problem in report.problems[:TEXT_ERRORS]:
        where = " ".join(part for part in (problem.shard, problem.key) if part) or "dataset"
        lines.append(f"  {problem.code:<18} {where}: {problem.detail}")
    if report.problems_total > TEXT_ERRORS:
        lines.append(f"  ... {report.problems_total - TEXT_ERRORS} more (--json lists up to --max-errors)")
    return "\n".join(lines)


def render_reference(ref: ReferenceReport) -> list[str]:
    """The ``--reference`` lines: what was checked, then what was not and why (mismatches are errors)."""
    lines = [
        f"reference ({ref.chat_format}): {ref.checked} of {ref.requested} requested sequences checked against "
        f"apply_chat_template, {ref.checked - len(ref.mismatches)} match; target masks compared on "
        f"{ref.masks_compared}"
        + (f", {ref.truncated} truncated sequences on their cooked prefix" if ref.truncated else "")
    ]
    summary = ref.as_json()
    if ref.ids_only:
        why = _reasons(summary["ids_only_reasons"])
        lines.append(f"  ids only (the reference cannot decide the masks): {len(ref.ids_only)}: {why}")
    if ref.not_checkable:
        lines.append(
            f"  not checkable: {len(ref.not_checkable)}: {_reasons(summary['not_checkable_reasons'])} "
            f"(e.g. {', '.join(summary['not_checkable_sources'])})"
        )
    if ref.skipped:
        lines.append(
            f"  skipped (control-token text, encoded as text by cook by design): {len(ref.skipped)} "
            f"({', '.join(summary['skipped_control_text_sources'])})"
        )
    if ref.checked < ref.requested:
        lines.append(f"  only {ref.checked} checkable sequences found (of {ref.requested} requested)")
    return lines


def _reasons(counts: dict[str, int]) -> str:
    return "; ".join(f"{reason} {n}" for reason, n in counts.items())


def _reference(args: argparse.Namespace, report: Report) -> ReferenceReport | None:
    """Run ``--reference`` and add its mismatches (or why it could not run) to ``report``'s problems."""
    ref: ReferenceReport | None = None
    try:
        ref = check_reference(args.dir, args.reference, args.seed, args.tokenizer)
    except (DatasetUnreadable, OSError, ValueError, ImportError) as err:
        problems = [Problem("reference_unavailable", "", "", f"cannot run --reference: {err}"[:300])]
    else:
        problems = [Problem("reference_mismatch", m.shard, m.key, f"{m.source}: {m.detail}") for m in ref.mismatches]
    report.problems += problems[: max(0, args.max_errors - len(report.problems))]
    report.problems_total += len(problems)
    return ref


def handle(args: argparse.Namespace) -> int:
    jobs = args.jobs if args.jobs is not None else min(4, os.cpu_count() or 1)
    if jobs < 1 or args.max_errors < 0:
        raise ConfigError("--jobs must be >= 1 and --max-errors >= 0")
    if (args.reference is not None and args.reference < 1) or args.seed < 0:
        raise ConfigError("--reference must be >= 1 and --seed >= 0")
    check_is_dataset(args.dir)  # NotADataset is a ConfigError: exit 2, one line
    tokens, warnings = load_token_info(args.dir, args.tokenizer)
    options = ValidateOptions(
        deep=args.deep,
        jobs=jobs,
        tokens=tokens,
        max_problems=args.max_errors,
        on_shard=_ShardProgress(not args.quiet),
    )
    report = validate_dataset(args.dir, options)
    if args.expect_tokenizer:  # the data contract (cook.contract), one problem per differing field
        try:
            details = expected_tokenizer_problems(load_manifest(args.dir).contract, args.expect_tokenizer)
        except ManifestError as err:  # the manifest check above reports what is wrong with it
            details = [f"cannot check the contract: {err}"]
        mismatches = [Problem("contract_mismatch", "", "", d) for d in details]
        report.problems += mismatches
        report.problems_total += len(mismatches)
    ref = _reference(args, report) if args.reference is not None else None
    report.warnings = warnings + report.warnings
    for warning in report.warnings:
        print(f"cook validate: warning: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps({**report.as_json(), **({"reference": ref.as_json()} if ref else {})}, ensure_ascii=False))
    else:
        print("\n".join([render(report, args.dir), *(render_reference(ref) if ref else [])]))
    return 0 if report.valid else 1
