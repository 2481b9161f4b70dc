"""The one place the stages are composed into a run (SPEC §2 ``cook run``, §11).

    units (planned from the sorted input files)
      -> workers: cook_unit (sources -> cookers -> media -> tokenize -> fit), samples and lengths staged
      -> driver: unit counts in unit order -> windows of ``packing.buffer_size`` samples (``cook.runner.windows``)
      -> workers: plan_window (the window's pack plan from its staged lengths alone), plan staged
      -> driver: pack counts numbered in window order -> shard tasks
      -> workers: write_shard (plan + staged samples -> packs -> shard + .tar.idx, straight to the output,
         and the shard's Energon index rows under the progress directory)
      -> driver: shards committed in order -> resume state
    -> at the end: a worker publishes .nv-meta (Energon's index, from the rows); the driver writes
       .cook-run.json, rejects.jsonl, cook_manifest.json (last)

Windows are planned as soon as they fill and their shards are written while later units cook, so
a window closes during the run. The output depends only on the input and the pipeline: units are
cooked anywhere, in any order, but planned in unit order, so windows, packs, keys and shard names
are the same for any number of actors or nodes, any schedule, and across a kill and resume.

Once the manifest is written the run is finished: a rerun of the same run changes nothing and
reports it (``RunSummary.already_finished``), and an interrupt that lands after the manifest is
``InterruptedAfterFinish``, not a run to resume.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from cook.config import PipelineConfig
from cook.contract import Contract, MediaSettings, cooked_contract, frame_storage, tokenizer_files_sha256
from cook.manifest import LineageEntry, Manifest, PackingEntry, TokenizerEntry, load_manifest
from cook.packing.metrics import PackingStats
from cook.runner.driver import Driver, Executor
from cook.runner.output_dir import OutputDir
from cook.runner.plan import plan_units
from cook.runner.progress import Progress
from cook.runner.resume import RunState, run_identity
from cook.runner.units import Unit
from cook.runner.worker import first_unit_texts
from cook.tokenize.tokenizer import ChatTokenizer
from cook.writer.dataset import DatasetWriter

ExecutorFactory = Callable[[PipelineConfig], Executor]


class InterruptedAfterFinish(KeyboardInterrupt):
    """An interrupt that landed once the manifest in the output directory (its argument) was written:
    the output is complete (a leftover progress directory is removed by the next run, which reports
    the finished run)."""


@dataclass
class RunSummary:
    out_dir: str
    counts: dict[str, int]
    packing_efficiency: float  # tokens / (packs * seq_len), as in the manifest
    rejects_by_reason: dict[str, int]
    shards: int
    seconds: float
    resumed: bool = False
    driver_received_bytes: int = 0  # what crossed from the workers to the driver
    shards_by_writer: dict[str, int] = field(default_factory=dict)  # Ray node id -> shards written
    already_finished: bool = False  # the same run had finished in out_dir: nothing was done, counts are its
    stored_fill: float = 0.0  # tokens / stored tokens, as in the manifest
    # CPU seconds of the driver's process (every thread: Ray's in it too) from the first job handed out to
    # the last result taken, without start-up (tokenizer, Ray, actors) or shutdown: what the driver
    # spends per job and per sample, the figure that says how many cores one driver can feed
    driver_loop_cpu_s: float = 0.0


def _manifest(
    config: PipelineConfig, state: RunState, tokenizer: ChatTokenizer, lineage: tuple[LineageEntry, ...] = ()
) -> Manifest:
    counts = state.counts
    assert counts.records_in == counts.sources_packed + counts.records_rejected, counts
    stats = state.packing or PackingStats(config.packing.seq_len, config.packing.pad_multiple)
    return Manifest(
        pipeline=config.to_dict(),
        tokenizer=TokenizerEntry(
            path=os.path.abspath(config.tokenizer.path),
            sha256=tokenizer_files_sha256(config.tokenizer.path),
            vocab_size=tokenizer.vocab_size,
            pad_id=tokenizer.pad_id,
            control_ids=tokenizer.control_ids,
        ),
        tokenizer_backend=tokenizer.backend.to_dict(),
        counts=counts,
        packing=PackingEntry(
            stats=asdict(stats),
            algorithm=config.packing.algorithm,
            windows=state.windows,
            windows_short_of_pack_count_multiple=state.windows_short_of_pack_count_multiple,
        ),
        rejects_by_reason=state.rejects_by_reason,
        shards=tuple(state.shards),
        seq_len=config.packing.seq_len,
        contract=_contract(config, tokenizer),
        lineage=lineage,
    )


def _contract(config: PipelineConfig, tokenizer: ChatTokenizer) -> Contract:
    """The data contract's inputs from the resolved pipeline and the loaded tokenizer."""
    image, video = config.media.image, config.media.video
    media = MediaSettings(
        image_mode=image.mode,
        min_patches=image.min_patches,
        max_patches=image.max_patches,
        max_tiles=image.max_tiles,
        video_fps=video.fps,
        video_min_frames=video.min_frames,
        video_max_frames=video.max_frames,
        video_target_patches=video.target_patches,
    )
    return cooked_contract(
        tokenizer_path=config.tokenizer.path,
        chat_format=config.tokenizer.chat_format,
        vocab_size=tokenizer.vocab_size,
        control_ids=tokenizer.control_ids,
        media=media,
        seq_len=config.packing.seq_len,
        pad_multiple=config.packing.pad_multiple,
        storage=frame_storage(image.storage, image.jpeg_quality),
        video_storage=frame_storage(*config.media.video_storage),
    )


def _summary(output: OutputDir, manifest: Manifest, started: float, **more: Any) -> RunSummary:
    """The summary of the run in ``output`` from its ``manifest`` (``more``: what only a run that cooked knows)."""
    return RunSummary(
        out_dir=output.path,
        counts=manifest.counts.to_dict(),
        packing_efficiency=manifest.packing_efficiency,
        stored_fill=manifest.stored_fill,
        rejects_by_reason=dict(sorted(manifest.rejects_by_reason.items())),
        shards=len(manifest.shards),
        seconds=time.monotonic() - started,
        resumed=output.resumed,
        **more,
    )


def run_pipeline(
    config: PipelineConfig,
    executor_factory: ExecutorFactory,
    overwrite: bool = False,
    progress: bool = True,
    units: list[Unit] | None = None,
    lineage: tuple[LineageEntry, ...] = (),
) -> RunSummary:
    """Run (or resume) the whole pipeline into ``config.output.dir``; returns the summary counts, or
    those of the same run finished there before (``already_finished``; nothing is written).
    ``units``: ``plan_units(config.input)``, when the caller has it already (the input is read once),
    or ``cook repack``'s units of cooked sequences, with the ``lineage`` its manifest records.

    An interrupt once the manifest is on disk (this run's, or the same run's before) is raised as
    ``InterruptedAfterFinish``: the output is complete. While the run cooks, what is printed to stdout
    goes to stderr: stdout carries ``cook run --json``'s summary alone.
    """
    started = time.monotonic()
    units = plan_units(config.input) if units is None else units
    output = OutputDir(config.output.dir, run_identity(config, units), overwrite)
    try:
        with output:
            if output.finished:
                return _summary(output, load_manifest(output.path), started, already_finished=not output.resumed)
            # Ray's driver prints an actor's death to stdout ("(raylet) A worker died ...")
            with contextlib.redirect_stdout(sys.stderr):
                return _run(config, executor_factory, units, output, progress, started, lineage)
    except KeyboardInterrupt as interrupt:
        if isinstance(interrupt, InterruptedAfterFinish) or not output.finished_on_disk():
            raise
        raise InterruptedAfterFinish(output.path) from interrupt


def _run(
    config: PipelineConfig,
    executor_factory: ExecutorFactory,
    units: list[Unit],
    output: OutputDir,
    progress: bool,
    started: float,
    lineage: tuple[LineageEntry, ...] = (),
) -> RunSummary:
    """Cook, pack and write every unit from ``output.state``, then publish the run."""
    tokenizer = ChatTokenizer(config.tokenizer.path, config.tokenizer.backend, chat_format=config.tokenizer.chat_format)
    if units and tokenizer.backend.name != "hf":
        tokenizer.check_sample(first_unit_texts(config, units[0]))  # the backend's self-check, part 2
    resolved = replace(config.tokenizer, backend=tokenizer.backend.name)  # every worker encodes alike
    state = output.state
    output.save()  # from here on, staged units survive an interrupt
    writer = DatasetWriter(output.path, state.rejects_bytes, state.rejects_by_reason)  # continues from the state
    bar = Progress(sum(unit.size_bytes for unit in units[state.next_unit :]), enabled=progress)
    try:
        workers = max(1, min(config.ray.num_actors, len(units) - state.next_unit))  # never more than units
        executor = executor_factory(replace(config, ray=replace(config.ray, num_actors=workers), tokenizer=resolved))
        clearing = threading.Thread(target=output.remove_staged, name="cook-remove-staged")
        try:
            driver = Driver(config, output, executor, writer, bar)
            loop_started = time.process_time()
            driver.run(units)
            loop_cpu_s = time.process_time() - loop_started
            clearing.start()  # every staged sample is in a shard now: free them while the workers stop
        finally:
            executor.close()
            if clearing.is_alive():
                clearing.join()
    except BaseException:
        writer.close()
        output.discard_if_nothing_done()
        raise
    finally:
        bar.close()
    manifest = _manifest(config, state, tokenizer, lineage)
    output.finish(writer, manifest)
    return _summary(
        output,
        manifest,
        started,
        driver_received_bytes=executor.received_bytes,
        shards_by_writer=dict(sorted(driver.shards_by_writer.items())),
        driver_loop_cpu_s=round(loop_cpu_s, 3),
    )
