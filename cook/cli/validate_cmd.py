"""``cook validate DIR [--json] [--deep] [--jobs N] [--tokenizer PATH]``: check every SPEC §9 invariant.

Exit 0 valid, 1 invalid, 2 not a dataset (one line on stderr). ``--json`` prints exactly one object:
``{"valid", "packs", "sources", "errors": [{"code", "shard", "key", "detail"}], "errors_total", ...}``
(at most ``--max-errors`` listed; ``errors_total`` counts all).

The tokenizer (the manifest's ``tokenizer.path``, or ``--tokenizer``) supplies the placeholder token
ids; when it cannot be loaded those checks are skipped with a warning, never failed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from typing import Any

from cook import format as fmt
from cook.contract import expected_tokenizer_problems
from cook.errors import ConfigError
from cook.validate import NotADataset, Report, TokenInfo, ValidateOptions, check_is_dataset, validate_dataset
from cook.validate.problems import Problem

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
    p.set_defaults(handler=handle)


def _manifest_tokenizer(root: str) -> dict[str, Any]:
    try:
        with open(os.path.join(root, fmt.MANIFEST_NAME), encoding="utf-8") as handle:
            entry = json.load(handle).get("tokenizer", {})
    except (OSError, ValueError, AttributeError):
        return {}
    return entry if isinstance(entry, dict) else {}


def tokenizer_path(root: str, override: str | None) -> tuple[str | None, list[str]]:
    """The tokenizer directory (``override`` wins over the manifest) and warnings about it."""
    entry = _manifest_tokenizer(root)
    path = override or entry.get("path")
    if not isinstance(path, str):
        return None, ["the manifest records no tokenizer.path; pass --tokenizer"]
    if not os.path.isdir(path):
        return None, [f"tokenizer directory {path} does not exist; pass --tokenizer"]
    recorded = entry.get("sha256")
    if isinstance(recorded, dict) and os.path.isdir(path):
        changed = [name for name, digest in sorted(recorded.items()) if _sha256(os.path.join(path, name)) != digest]
        if changed:
            return path, [f"tokenizer {path} differs from the one the dataset was cooked with ({', '.join(changed)})"]
    return path, []


def load_tokenizer(root: str, override: str | None) -> tuple[Any, list[str]]:
    """The dataset's ``transformers`` tokenizer (None when it cannot be loaded) and warnings about it."""
    path, warnings = tokenizer_path(root, override)
    if path is None:
        return None, warnings
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(path, local_files_only=True), warnings
    except (OSError, ValueError) as err:
        return None, [*warnings, f"tokenizer {path} cannot be loaded ({type(err).__name__}: {err}); pass --tokenizer"]


def load_token_info(root: str, override: str | None) -> tuple[TokenInfo | None, list[str]]:
    """Control token ids and vocab size: from ``tokenizer.json`` with the light ``tokenizers`` library when
    the directory has one (no ``transformers`` import), else through ``load_tokenizer``. A manifest that
    records ``tokenizer.control_ids`` and ``vocab_size`` needs no tokenizer at all (unless overridden)."""
    if override is None:
        recorded = _recorded_token_info(root)
        if recorded is not None:
            return recorded, []
    path, warnings = tokenizer_path(root, override)
    if path is None:
        return None, warnings
    if os.path.isfile(os.path.join(path, "tokenizer.json")):
        from tokenizers import Tokenizer

        try:
            fast = Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
        except Exception as err:  # tokenizers raises plain Exception; reported as a warning, not a failure
            return None, [*warnings, f"tokenizer {path} cannot be loaded ({err}); pass --tokenizer"]
        ids = {token: fast.token_to_id(token) for token in fmt.CONTROL_TOKENS}
        found = {token: i for token, i in ids.items() if i is not None}
        return TokenInfo(vocab_size=fast.get_vocab_size(with_added_tokens=True), control_ids=found), warnings
    tokenizer, more = load_tokenizer(root, override)
    return (token_info(tokenizer) if tokenizer is not None else None), more


def _recorded_token_info(root: str) -> TokenInfo | None:
    try:
        with open(os.path.join(root, fmt.MANIFEST_NAME), encoding="utf-8") as handle:
            entry = json.load(handle).get("tokenizer", {})
    except (OSError, ValueError, AttributeError):
        return None
    ids, vocab = entry.get("control_ids"), entry.get("vocab_size")
    if not isinstance(ids, dict) or not isinstance(vocab, int):
        return None
    return TokenInfo(vocab_size=vocab, pad_id=entry.get("pad_id"), control_ids={k: int(v) for k, v in ids.items()})


def _sha256(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return None


def token_info(tokenizer: Any) -> TokenInfo:
    """Control token ids (those the tokenizer knows as single tokens), vocab size and pad id."""
    ids = {}
    for token in fmt.CONTROL_TOKENS:
        found = tokenizer.convert_tokens_to_ids(token)
        if isinstance(found, int) and found != tokenizer.unk_token_id:
            ids[token] = found
    return TokenInfo(vocab_size=len(tokenizer), pad_id=tokenizer.pad_token_id, control_ids=ids)


class _Progress:
    """Shards done on stderr: a live line on a terminal, a line every 10 s otherwise."""

    def __init__(self, enabled: bool) -> None:
        self.enabled, self.tty, self.last = enabled, sys.stderr.isatty(), time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self.tty:
            print(
                f"\rcook validate: {done}/{total} shards",
                end="\n" if done == total else "",
                file=sys.stderr,
                flush=True,
            )
        elif time.monotonic() - self.last >= 10 or done == total:
            self.last = time.monotonic()
            print(f"cook validate: {done}/{total} shards", file=sys.stderr, flush=True)


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


def handle(args: argparse.Namespace) -> int:
    jobs = args.jobs if args.jobs is not None else min(4, os.cpu_count() or 1)
    if jobs < 1 or args.max_errors < 0:
        raise ConfigError("--jobs must be >= 1 and --max-errors >= 0")
    try:
        check_is_dataset(args.dir)
    except NotADataset as err:
        print(f"cook: error: {err}", file=sys.stderr)
        return 2
    tokens, warnings = load_token_info(args.dir, args.tokenizer)
    options = ValidateOptions(
        deep=args.deep,
        jobs=jobs,
        tokens=tokens,
        max_problems=args.max_errors,
        on_shard=_Progress(not args.quiet),
    )
    report = validate_dataset(args.dir, options)
    if args.expect_tokenizer:  # the data contract (cook.contract), one problem per differing field
        mismatches = [
            Problem("contract_mismatch", "", "", d)
            for d in expected_tokenizer_problems(args.dir, args.expect_tokenizer)
        ]
        report.problems += mismatches
        report.problems_total += len(mismatches)
    report.warnings = warnings + report.warnings
    for warning in report.warnings:
        print(f"cook validate: warning: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps(report.as_json(), ensure_ascii=False))
    else:
        print(render(report, args.dir))
    return 0 if report.valid else 1
