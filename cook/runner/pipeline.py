"""The one place the stages are composed into a run (SPEC §2 ``cook run``).

    units (sorted input files) -> executor: CookWorker per unit (sources, cookers, media, tokenize, fit)
        -> windows of ``packing.buffer_size`` samples, in unit then record order -> pack_window
        -> shards (``output.shard_size`` packs each) -> .nv-meta -> manifest (last)

The output depends only on the input and the pipeline: units are cooked anywhere, but their results
are consumed in unit order, so windows, packs, keys and shard names are the same for any number of
actors and any schedule.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from cook.config import PipelineConfig
from cook.packing.packer import pack_window
from cook.runner.output_dir import prepare_output
from cook.runner.progress import Progress
from cook.runner.units import Unit, UnitResult
from cook.sources import list_inputs
from cook.tokenize.tokenizer import tokenizer_files_sha256
from cook.types import Pack, TokenizedSample
from cook.writer.energon_meta import write_energon_meta
from cook.writer.manifest import build_manifest, write_manifest
from cook.writer.rejects import RejectsWriter
from cook.writer.shards import ShardInfo, write_shard


class Executor(Protocol):
    def map_units(self, units: Iterable[Unit]) -> Iterator[UnitResult]: ...
    def close(self) -> None: ...


ExecutorFactory = Callable[[PipelineConfig], Executor]


@dataclass
class RunSummary:
    out_dir: str
    counts: dict[str, int]
    packing_efficiency: float
    rejects_by_reason: dict[str, int]
    shards: int
    seconds: float
    extra: dict[str, float] = field(default_factory=dict)


def plan_units(config: PipelineConfig) -> list[Unit]:
    return [Unit(i, path, fmt) for i, (path, fmt) in enumerate(list_inputs(config.input.path, config.input.format))]


class DatasetWriter:
    """Accumulates packs into shards of ``output.shard_size`` and tallies the counts."""

    def __init__(self, out_dir: str, shard_size: int) -> None:
        self.out_dir = out_dir
        self.shard_size = shard_size
        self.pending: list[Pack] = []
        self.shards: list[ShardInfo] = []
        self.packs = self.sources = self.tokens = self.targets = self.padded = 0

    def add(self, packs: Iterable[Pack]) -> None:
        for pack in packs:
            self.pending.append(pack)
            self.sources += len(pack.sequences)
            self.tokens += pack.tokens
            self.padded += pack.padded_tokens
            self.targets += int(pack.loss_mask.sum())
            if len(self.pending) >= self.shard_size:
                self.flush()

    def flush(self) -> None:
        if self.pending:
            self.shards.append(write_shard(self.out_dir, len(self.shards), self.packs, self.pending))
            self.packs += len(self.pending)
            self.pending = []


def _windows(
    results: Iterable[UnitResult], size: int | None, rejects: RejectsWriter, progress: Progress
) -> Iterator[list[TokenizedSample]]:
    window: list[TokenizedSample] = []
    for result in results:
        rejects.write(result.rejects)
        progress.update(result.records_in, result.tokens, len(result.rejects))
        window.extend(result.samples)
        while size is not None and len(window) >= size:
            yield window[:size]
            window = window[size:]
    if window:
        yield window


def run_pipeline(
    config: PipelineConfig, executor_factory: ExecutorFactory, overwrite: bool = False, progress: bool = True
) -> RunSummary:
    """Run the whole pipeline into ``config.output.dir``; returns the counts for the summary table."""
    started = time.monotonic()
    units = plan_units(config)
    out_dir = config.output.dir
    lock = prepare_output(out_dir, overwrite)
    try:
        from cook.tokenize import ChatTokenizer

        tokenizer = ChatTokenizer(config.tokenizer.path)
        writer = DatasetWriter(out_dir, config.output.shard_size)
        rejects = RejectsWriter(out_dir)
        bar = Progress(len(units), enabled=progress)
        executor = executor_factory(config)
        try:
            size = None if config.packing.buffer_size == "all" else int(config.packing.buffer_size)
            for window in _windows(executor.map_units(units), size, rejects, bar):
                writer.add(pack_window(window, config.packing, tokenizer.pad_id))
        finally:
            executor.close()
            bar.close()
        writer.flush()
        rejects.close()
        records_in = bar.records
        write_energon_meta(out_dir, [s.name for s in writer.shards])
        counts = {
            "records_in": records_in,
            "sources_packed": writer.sources,
            "records_rejected": rejects.count,
            "packs": writer.packs,
            "tokens": writer.tokens,
            "target_tokens": writer.targets,
            "padding_tokens": writer.padded - writer.tokens,
        }
        assert counts["records_in"] == counts["sources_packed"] + counts["records_rejected"], counts
        manifest = build_manifest(
            pipeline=config.to_dict(),
            tokenizer_path=os.path.abspath(config.tokenizer.path),
            tokenizer_sha256=tokenizer_files_sha256(config.tokenizer.path),
            vocab_size=tokenizer.vocab_size,
            pad_id=tokenizer.pad_id,
            counts=counts,
            packing={},
            rejects_by_reason=dict(rejects.by_reason),
            shards=writer.shards,
            seq_len=config.packing.seq_len,
        )
        write_manifest(out_dir, manifest)
    finally:
        lock.release()
    return RunSummary(
        out_dir=out_dir,
        counts=counts,
        packing_efficiency=manifest["packing_efficiency"],
        rejects_by_reason=manifest["rejects_by_reason"],
        shards=len(writer.shards),
        seconds=time.monotonic() - started,
    )
