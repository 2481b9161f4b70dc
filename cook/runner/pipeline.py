"""The one place the stages are composed into a run (SPEC §2 ``cook run``).

    units (planned from the sorted input files) -> executor: CookWorker per unit
        (sources -> cookers -> media -> tokenize -> fit), results consumed in unit order
    -> windows of ``packing.buffer_size`` samples -> pack_window -> shards (``output.shard_size``
       packs each; a window's last shard may be short) -> resume state
    -> at the end: rejects.jsonl, .nv-meta (Energon index), cook_manifest.json (last)

The output depends only on the input and the pipeline: units are cooked anywhere, in any order, but
consumed in unit order, so windows, packs, keys and shard names are the same for any number of
actors, any schedule, and across a kill and resume (``cook.runner.resume``).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Protocol

from cook.config import PipelineConfig
from cook.packing.metrics import PackingStats, stats_for
from cook.packing.packer import pack_window
from cook.runner.output_dir import prepare_output
from cook.runner.plan import plan_units
from cook.runner.progress import Progress
from cook.runner.resume import RunState, fingerprint, progress_dir, save_state
from cook.runner.units import Unit, UnitResult
from cook.tokenize.tokenizer import ChatTokenizer, tokenizer_files_sha256
from cook.types import Pack, TokenizedSample
from cook.writer.energon_index import EnergonIndex
from cook.writer.manifest import build_manifest, write_manifest
from cook.writer.rejects import RejectsWriter
from cook.writer.shards import write_shard

COUNT_KEYS = ("records_in", "sources_packed", "records_rejected", "packs", "tokens", "target_tokens", "padding_tokens")


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
    resumed: bool = False


class WindowedWriter:
    """Consumes unit results in order; closes a window every ``buffer_size`` samples; checkpoints."""

    def __init__(self, config: PipelineConfig, state: RunState, pad_id: int, progress: Progress) -> None:
        self.config = config
        self.out_dir = config.output.dir
        self.state = state
        self.pad_id = pad_id
        self.progress = progress
        self.counts = {key: state.counts.get(key, 0) for key in COUNT_KEYS}
        self.rejects = RejectsWriter(self.out_dir, state.rejects_bytes, state.rejects_by_reason)
        self.index = EnergonIndex(self.out_dir, len(state.shards))
        size = config.packing.buffer_size
        self.size: int | None = None if size == "all" else int(size)
        self.window: list[TokenizedSample] = []
        self.stats = _restore_stats(state.packing, config.packing.seq_len, config.packing.pad_multiple)
        self.unmet_multiple = int(state.packing.get("windows_short_of_pack_count_multiple", 0))
        self._resume_unit, self._resume_skip = (state.next_unit, state.skip) if state.skip else (-1, 0)

    def consume(self, result: UnitResult) -> None:
        samples = result.samples
        if result.unit == self._resume_unit:  # its rejects and records are already counted
            samples = samples[self._resume_skip :]
        else:
            self.rejects.write(result.rejects)
            self.counts["records_in"] += result.records_in
        self.progress.update(result.records_in, result.tokens, len(result.rejects))
        self.window.extend(samples)
        while self.size is not None and len(self.window) >= self.size:
            self._close_window(self.window[: self.size])
            self.window = self.window[self.size :]
            packed = len(result.samples) - len(self.window)  # the leftover is all from this unit
            if packed == len(result.samples):
                self._checkpoint(result.unit + 1, 0)
            else:
                self._checkpoint(result.unit, packed)

    def finish(self, total_units: int) -> None:
        if self.window:
            self._close_window(self.window)
            self.window = []
        self._checkpoint(total_units, 0)

    def _close_window(self, samples: list[TokenizedSample]) -> None:
        packs = pack_window(samples, self.config.packing, self.pad_id)
        lengths = [seq.length for pack in packs for seq in pack.sequences]
        groups, start = [], 0
        for pack in packs:
            self._count(pack)
            groups.append(range(start, start + len(pack.sequences)))
            start += len(pack.sequences)
        self.stats = self.stats.merge(stats_for(lengths, groups, self.stats.capacity, self.stats.pad_multiple))
        multiple = self.config.packing.pack_count_multiple
        if multiple and len(packs) % multiple:
            self.unmet_multiple += 1
        size = self.config.output.shard_size
        for start in range(0, len(packs), size):
            index = len(self.state.shards)
            shard, layout = write_shard(self.out_dir, index, self.state.packs, packs[start : start + size])
            self.index.add_shard(index, layout)
            self.state.shards.append(shard)
        self.state.windows += 1

    def _count(self, pack: Pack) -> None:
        self.counts["packs"] += 1
        self.counts["sources_packed"] += len(pack.sequences)
        self.counts["tokens"] += pack.tokens
        self.counts["target_tokens"] += int(pack.loss_mask.sum())
        self.counts["padding_tokens"] += pack.padded_tokens - pack.tokens

    def _checkpoint(self, next_unit: int, skip: int) -> None:
        self.state.next_unit, self.state.skip = next_unit, skip
        self.state.rejects_bytes = self.rejects.sync()
        self.state.rejects_by_reason = dict(self.rejects.by_reason)
        self.state.counts = {**self.counts, "records_rejected": self.rejects.count}
        self.state.packing = {**asdict(self.stats), "windows_short_of_pack_count_multiple": self.unmet_multiple}
        self.index.commit()  # the index rows before the state that counts their shards
        save_state(self.out_dir, self.state)


def _restore_stats(saved: dict, capacity: int, pad_multiple: int) -> PackingStats:
    if not saved:
        return PackingStats(capacity, pad_multiple)
    fields = {k: v for k, v in saved.items() if k != "windows_short_of_pack_count_multiple"}
    fields["sequences_per_pack"] = tuple(tuple(pair) for pair in fields["sequences_per_pack"])
    fields["fill_histogram"] = tuple(fields["fill_histogram"])
    return PackingStats(**fields)


def _finalize(config: PipelineConfig, writer: WindowedWriter, tokenizer: ChatTokenizer) -> dict:
    writer.rejects.close()
    out_dir = config.output.dir
    writer.index.finish(writer.state.shards)
    counts = writer.state.counts
    assert counts["records_in"] == counts["sources_packed"] + counts["records_rejected"], counts
    manifest = build_manifest(
        pipeline=config.to_dict(),
        tokenizer_path=os.path.abspath(config.tokenizer.path),
        tokenizer_sha256=tokenizer_files_sha256(config.tokenizer.path),
        vocab_size=tokenizer.vocab_size,
        pad_id=tokenizer.pad_id,
        control_ids=tokenizer.control_ids,
        counts=counts,
        packing={
            **writer.stats.to_dict(),
            "algorithm": config.packing.algorithm,
            "windows": writer.state.windows,
            "windows_short_of_pack_count_multiple": writer.unmet_multiple,
        },
        rejects_by_reason=dict(writer.rejects.by_reason),
        shards=writer.state.shards,
        seq_len=config.packing.seq_len,
    )
    write_manifest(out_dir, manifest)
    shutil.rmtree(progress_dir(out_dir), ignore_errors=True)  # finished: nothing left to resume
    return manifest


def run_pipeline(
    config: PipelineConfig, executor_factory: ExecutorFactory, overwrite: bool = False, progress: bool = True
) -> RunSummary:
    """Run (or resume) the whole pipeline into ``config.output.dir``; returns the summary counts."""
    started = time.monotonic()
    units = plan_units(config.input)
    run_fingerprint = fingerprint(config, units)
    lock, resumed = prepare_output(config.output.dir, overwrite, run_fingerprint)
    try:
        tokenizer = ChatTokenizer(config.tokenizer.path)
        state = resumed or RunState(run_fingerprint)
        bar = Progress(len(units) - state.next_unit, enabled=progress)
        writer = WindowedWriter(config, state, tokenizer.pad_id, bar)
        executor = executor_factory(config)
        try:
            for result in executor.map_units(units[state.next_unit :]):
                writer.consume(result)
            writer.finish(len(units))
        finally:
            executor.close()
            bar.close()
            writer.index.join_import()
        manifest = _finalize(config, writer, tokenizer)
    finally:
        lock.release()
    return RunSummary(
        out_dir=config.output.dir,
        counts=manifest["counts"],
        packing_efficiency=manifest["packing_efficiency"],
        rejects_by_reason=manifest["rejects_by_reason"],
        shards=len(state.shards),
        seconds=time.monotonic() - started,
        resumed=resumed is not None,
    )
