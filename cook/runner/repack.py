"""``cook repack``: cooked datasets -> one dataset packed again with new packing settings (SPEC §2).

    [dataset dir, ...] -load_source-> SourceManifest -> check_sources (one contract but the packing
        fields; the tokenizer they were cooked with, unchanged) -> repack_config (the first source's
        pipeline + ``--set packing.* / output.*``) -> index_source -> repack_units
        -> run_pipeline: the Driver, windows, staging, shard writer, resume and executors of ``cook run``
        -> cook_manifest.json with ``lineage``

It is ``cook run`` with another kind of input: a unit is a range of cooked sequences in input order
(``cook.runner.repack_index``), which a worker reads back out of their packs instead of cooking
(``cook.runner.repack_read``). Windows of ``packing.buffer_size`` run over that order as in ``cook
run``, so a repack of sources without truncated sequences writes the shards a fresh cook of the same
input with the new packing settings writes, byte for byte.

Counts: ``records_in`` is the sequences read (the sources' ``sources_packed``, as ``lineage`` lists
them), ``sources_packed`` the sequences packed, ``records_rejected`` those rejected here (``too_long``
under the new ``seq_len``): ``records_in == sources_packed + records_rejected`` as for a cook.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from cook import format as fmt
from cook.config import PipelineConfig, apply_override, config_from_dict
from cook.contract import Contract, ContractMismatch, check_blend, tokenizer_files_sha256
from cook.errors import ConfigError
from cook.manifest import LineageEntry
from cook.runner.repack_index import SourceManifest, index_source, load_source, repack_units
from cook.runner.units import Unit

REPACK_SECTIONS = ("packing", "output")  # the only keys --set may change


def load_sources(paths: Sequence[str], output_dir: str) -> list[SourceManifest]:
    """The sources' manifests, checked alike (``check_sources``); ``ConfigError`` (one line) otherwise."""
    if not paths:
        raise ConfigError("usage: give at least one cooked dataset to repack")
    sources = [load_source(path) for path in paths]
    out = os.path.realpath(output_dir)
    for source in sources:
        if os.path.realpath(source.path) == out:
            raise ConfigError(f"--output {output_dir!r} is the repack source {source.path!r}; write elsewhere")
    check_sources(sources)
    return sources


def check_sources(sources: Sequence[SourceManifest]) -> None:
    """Every source shares the first one's contract apart from the packing fields (``seq_len``,
    ``pad_multiple``), and the tokenizer they were cooked with is still there, unchanged."""
    contracts: list[tuple[str, Contract]] = []
    for source in sources:
        contract = source.manifest.contract
        if contract is None:
            raise ConfigError(
                f"repack source {source.path!r}: its manifest has no contract (an older cook); cook it again"
            )
        contracts.append((source.path, replace(contract, seq_len=0, pad_multiple=0)))
    for pair in ((contracts[0], other) for other in contracts[1:]):
        try:
            check_blend(list(pair))
        except ContractMismatch as err:
            raise ConfigError(
                f"repack sources {pair[0][0]!r} and {pair[1][0]!r} have different contracts: {'; '.join(err.problems)}"
            ) from None
    tokenizer = sources[0].manifest.tokenizer
    if not os.path.isdir(tokenizer.path) or tokenizer_files_sha256(tokenizer.path) != dict(tokenizer.sha256):
        raise ConfigError(
            f"repack: the tokenizer the sources were cooked with ({tokenizer.path}) is missing or its files changed"
        )


def repack_config(
    source: SourceManifest, overrides: Sequence[str], flags: Mapping[str, tuple[str, Any]]
) -> PipelineConfig:
    """``source``'s pipeline with the ``--set`` overrides (``packing.*`` and ``output.*`` only) and
    ``flags`` (key path -> (flag, value)) applied; the tokenizer is the one the source recorded."""
    data: dict[str, Any] = copy.deepcopy(dict(source.manifest.pipeline))
    written: dict[str, str] = {}
    for assignment in overrides:
        key = assignment.partition("=")[0]
        if key.split(".")[0] not in REPACK_SECTIONS or "." not in key:
            raise ConfigError(f"--set {key}: cook repack changes only packing.* and output.* keys")
        written[apply_override(data, assignment)] = f"--set {key}"
    data["input"]["path"] = source.path  # the manifest's lineage lists every source
    data["tokenizer"]["path"] = source.manifest.tokenizer.path
    data["tokenizer"]["backend"] = "hf"  # nothing is encoded: the cooked ids move as they are
    for key, (flag, value) in flags.items():
        section, _, name = key.partition(".")
        data.setdefault(section, {})[name] = value
        written[key] = flag
    return config_from_dict(data, origin=f"{source.path}/{fmt.MANIFEST_NAME} pipeline", flags=written)


def plan_repack(
    sources: Sequence[SourceManifest], config: PipelineConfig
) -> tuple[list[Unit], tuple[LineageEntry, ...]]:
    """Index every source's sequences (their packs' meta.json) and cut them into units; the units and
    the manifest's ``lineage``."""
    cooked = [index_source(source) for source in sources]
    lineage = tuple(LineageEntry(c.source.path, c.source.manifest_sha256, c.sequences) for c in cooked)
    return repack_units(cooked, config.input.unit_bytes), lineage
