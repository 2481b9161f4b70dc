"""A cooked dataset directory -> ``Report``: every invariant of SPEC §9.

    DIR -read_manifest-> rules, shard entries -scan_shard (one process per shard)-> ShardScan
        -> per-shard manifest entries, totals vs counts, rejects.jsonl, sources, .nv-meta
        -> loadable: at least one pack, .nv-meta complete, a train split that names a shard
        -> (--deep) every pack loaded through megatron.energon
        -> Report(valid, packs, sources, problems)

A directory without ``cook_manifest.json`` or ``.nv-meta/`` is not a dataset (``NotADataset``); anything
else that is wrong is a ``Problem`` in the report, never an exception.
"""

from __future__ import annotations

import concurrent.futures as futures
import contextlib
import multiprocessing
import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Final

import numpy as np

from cook import format as fmt
from cook.errors import ConfigError
from cook.validate.manifest import (
    ShardEntry,
    Totals,
    check_counts,
    check_shard_entry,
    pack_rules,
    read_manifest,
    shard_entries,
)
from cook.validate.nv_meta import check_nv_meta
from cook.validate.problems import Code, PackRules, Problem, TokenInfo, problem
from cook.validate.rejects import check_by_reason, check_sources, read_rejects
from cook.validate.scan import ShardScan, scan_shard

CHUNKS_PER_JOB: Final = 4  # shards go to the workers in this many chunks each: few round trips, and balanced


class NotADataset(ConfigError):
    """The path is not a cooked dataset directory; the message is one line saying why (the CLI: exit 2)."""


@dataclass(frozen=True)
class ValidateOptions:
    deep: bool = False
    jobs: int = 1  # shard scans in parallel; 1 runs them in this process
    tokens: TokenInfo | None = None  # from the tokenizer: control ids, and vocab/pad when the manifest lacks them
    max_problems: int = 1000  # kept in the report; problems_total counts all
    on_shard: Callable[[int, int], None] | None = None  # (shards done, shards total), for progress


@dataclass
class Report:
    shards: int = 0
    packs: int = 0
    sources: int = 0
    bytes: int = 0
    problems: list[Problem] = field(default_factory=list)
    problems_total: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        return self.problems_total == 0

    def as_json(self) -> dict[str, Any]:
        """The ``cook validate --json`` object."""
        return {
            "valid": self.valid,
            "packs": self.packs,
            "sources": self.sources,
            "shards": self.shards,
            "bytes": self.bytes,
            "errors": [asdict(p) for p in self.problems],
            "errors_total": self.problems_total,
            "warnings": self.warnings,
        }


def check_is_dataset(path: str) -> None:
    """Raise ``NotADataset`` unless ``path`` is a directory with a manifest and ``.nv-meta/``."""
    if not os.path.isdir(path):
        raise NotADataset(f"{path} is not a directory")
    if not os.path.isfile(os.path.join(path, fmt.MANIFEST_NAME)):
        raise NotADataset(f"{path} has no {fmt.MANIFEST_NAME} (not a cooked dataset, or an unfinished run)")
    if not os.path.isdir(os.path.join(path, fmt.NV_META_DIR)):
        raise NotADataset(f"{path} has no {fmt.NV_META_DIR}/ (not an Energon dataset)")


def validate_dataset(path: str, options: ValidateOptions | None = None) -> Report:
    """Check every SPEC §9 invariant of the dataset at ``path`` (raises only ``NotADataset``)."""
    options = options or ValidateOptions()
    check_is_dataset(path)
    manifest, problems = read_manifest(path)
    rules = pack_rules(manifest, options.tokens, options.deep)
    entries, more = shard_entries(path, manifest)
    problems += more
    scans = _scan_all(path, entries, rules, options)
    report = Report(shards=len(scans), warnings=_warnings(rules))
    first = 0
    for entry, scan in zip(entries, scans, strict=True):
        problems += check_shard_entry(entry, scan.packs, scan.bytes, scan.sha256, first)
        first += scan.packs
        report.packs += scan.packs
        report.sources += scan.sources
        report.bytes += scan.bytes
    comparable = all(s.complete and not s.unparsed for s in scans) and not any(
        p.code == Code.SHARD_MISSING for p in problems
    )
    if comparable and not report.packs:
        problems.append(
            problem(Code.NO_PACKS, "the dataset holds no pack: megatron.energon cannot load an empty dataset")
        )
    problems += _dataset_checks(path, manifest, scans, comparable)
    if options.deep and report.packs:
        from cook.validate.deep import check_energon_load

        expected = {key: digest for scan in scans for key, digest in scan.pack_digests.items()}
        problems += check_energon_load(path, expected)
    report.problems_total = len(problems) + sum(scan.problems_total for scan in scans)
    report.problems = (problems + [p for scan in scans for p in scan.problems])[: options.max_problems]
    return report


def _dataset_checks(
    path: str, manifest: dict[str, Any] | None, scans: list[ShardScan], comparable: bool
) -> list[Problem]:
    rejects = read_rejects(path)
    problems = list(rejects.problems)
    if manifest is not None:
        totals = Totals(
            packs=sum(s.packs for s in scans),
            sources=sum(s.sources for s in scans),
            tokens=sum(s.tokens for s in scans),
            targets=sum(s.targets for s in scans),
            padded=sum(s.padded for s in scans),
        )
        problems += check_counts(manifest, totals if comparable else None, rejects.lines)
        problems += check_by_reason(manifest, rejects)
    digests = np.concatenate([np.zeros(0, np.uint64), *(s.source_digests for s in scans)])  # uint64 [S]
    packs = np.concatenate([np.zeros(0, np.int64), *(s.source_packs for s in scans)])  # int64 [S]
    problems += check_sources(digests, packs, rejects.sources)
    problems += check_nv_meta(path, {s.name: s.packs for s in scans}, comparable, {s.name: s.offsets for s in scans})
    return problems


def _warnings(rules: PackRules) -> list[str]:
    skipped = []
    if rules.tokens.vocab_size is None:
        skipped.append("token_range (vocab size unknown)")
    if rules.tokens.image_id is None or rules.tokens.audio_id is None:
        skipped.append(
            "placeholder_count (placeholder token ids unknown: the tokenizer has no <image> or "
            "<so_embedding> token, or could not be loaded)"
        )
    if rules.deep and len(rules.tokens.control_ids) < len(fmt.CONTROL_TOKENS):
        skipped.append("placeholder_block and target_span (control token ids unknown)")
    return [f"not checked: {what}" for what in skipped]


def _scan_all(path: str, entries: list[ShardEntry], rules: PackRules, options: ValidateOptions) -> list[ShardScan]:
    """One ``scan_shard`` per entry, in entry order; in parallel processes when ``options.jobs > 1``."""
    jobs = max(1, min(options.jobs, len(entries)))
    n = len(entries)
    args = ([path] * n, [entry.name for entry in entries], [entry.first_pack for entry in entries], [rules] * n)
    scans: list[ShardScan] = []
    results: Iterator[ShardScan]
    with contextlib.ExitStack() as stack:
        if jobs == 1:
            results = map(scan_shard, *args)
        else:
            context = multiprocessing.get_context("spawn")  # no fork of a process that may hold threads
            pool = stack.enter_context(futures.ProcessPoolExecutor(max_workers=jobs, mp_context=context))
            chunk = max(1, -(-n // (jobs * CHUNKS_PER_JOB)))  # balanced: shards are of a similar size
            results = pool.map(scan_shard, *args, chunksize=chunk)  # workers start once
        for scan in results:
            scans.append(scan)
            if options.on_shard:
                options.on_shard(len(scans), n)
    return scans
