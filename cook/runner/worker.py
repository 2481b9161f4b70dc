"""CookWorker: the jobs a worker does (SPEC §11).

    cook_unit(Unit) -> UnitDone            sources -> cookers -> media -> tokenize -> fit; the samples and
                                           their lengths go to the staging store, the driver gets counts
                                           and rejects
    plan_window(WindowTask) -> WindowDone  staged lengths -> plan_window -> the pack plan, staged; the
                                           driver gets the pack count and packing stats
    write_shards(WriteTask) -> WriteDone   per ShardTask, the window's plan + staged samples -> build_pack
                                           -> shard + .tar.idx + its Energon index rows on disk; the
                                           driver gets each shard's sha256, size, counts
    IndexTask -> IndexDone                 once, at the end: ``.nv-meta/`` from the shards' index rows
    LineCountTask -> LineCounts            before any cook: the newlines of JSONL units (their files'
                                           line numbers, ``cook.runner.plan``)

A ``cook repack`` unit (``Unit.reads``) is not cooked: its sequences are read back out of the source
packs (``cook.runner.repack_read``) and fitted to the new packing; the rest is the same.

A worker holds what is expensive to load (the tokenizer, the media store) and reuses it for every
unit. It knows nothing about Ray: the Ray layer wraps it in an actor, the local executor calls it
directly. Every record read ends up exactly once in the staged samples or in ``rejects``. While it
cooks a unit, it tells ``report`` how far it is (``UnitProgress``, at most once every
``report_interval_s``, and once when it is cooked); the executor carries that to the driver's progress bar.

Each record's cook and media stages run under a time budget (``ray.record_timeout_s``, enforced
with ``SIGALRM`` when the worker runs on its process's main thread; ``RecordBudget``): a pathological record becomes a
``timeout`` reject instead of stalling the worker. After a worker died on a unit, the unit is cooked
again with an ``Attempt`` that traces each record's ordinal to a file before cooking it, so the
executor can name the record that kills a worker and reject it as ``worker_crash``.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from cook.config import PipelineConfig
from cook.contract import frame_storage
from cook.cookers import COOKERS
from cook.errors import Rejected, RejectReason
from cook.format import Counts
from cook.packing.packer import build_pack, fit_sample
from cook.runner.plan import count_lines
from cook.runner.progress import REPORT_INTERVAL_S, UnitProgress, UnitReporter
from cook.runner.reject_log import RejectLog
from cook.runner.repack_read import repack_unit
from cook.runner.staging import DiskStore, SampleStore
from cook.runner.units import (
    TRACE_DONE,
    Attempt,
    IndexDone,
    IndexTask,
    Job,
    LineCounts,
    LineCountTask,
    PackPlan,
    Result,
    ShardDone,
    ShardTask,
    Unit,
    UnitDone,
    UnitSummary,
    WindowDone,
    WindowTask,
    WriteDone,
)
from cook.runner.windows import plan_window_task
from cook.sources import SOURCES, Cursor, source_name
from cook.tokenize import ChatTokenizer, tokenize_batch
from cook.tokenize.backends import SAMPLE_TEXTS
from cook.types import Conversation, MediaItem, Pack, RawRecord, TextPart, TokenizedSample
from cook.writer.energon_index import publish_index
from cook.writer.index_rows import write_rows
from cook.writer.members import encode_item_frames
from cook.writer.shards import write_shard

TOKENIZE_BATCH = 256
Cooked = tuple[Conversation, tuple[tuple[MediaItem, ...], ...]]  # media items grouped per MediaRef


class _RecordTimeout(Exception):
    pass


class RecordBudget:
    """``seconds`` per record, for a whole unit: the SIGALRM handler is installed once per unit (not
    swapped in and out around every record); each record arms a one-shot timer and disarms it, so
    the alarm fires only in a record that overruns, as before. Only on the process's main thread."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._armed = False
        self._running = False

    @contextlib.contextmanager
    def armed(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.signal(signal.SIGALRM, self._on_alarm)
        self._armed = True
        try:
            yield
        finally:
            self._armed = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    def _on_alarm(self, signum: int, frame: Any) -> None:
        if self._running:
            self._running = False  # once per record
            raise _RecordTimeout

    def run(self, cook: Callable[[RawRecord], Cooked], raw: RawRecord) -> Cooked:
        """``cook(raw)``, or ``Rejected(timeout)`` once it has run longer than the budget."""
        if not self._armed:
            return cook(raw)
        self._running = True
        signal.setitimer(signal.ITIMER_REAL, self.seconds)
        try:
            return cook(raw)
        except _RecordTimeout:
            raise Rejected(
                RejectReason.TIMEOUT, f"record took longer than ray.record_timeout_s={self.seconds}"
            ) from None
        finally:
            self._running = False
            signal.setitimer(signal.ITIMER_REAL, 0)


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while a unit cooks (docs/SCALING.md: it pays on text jobs).
    Cooking and tokenizing allocate many small acyclic objects that reference counting frees at once;
    the collector's passes over them find nothing. It runs again once the unit is done."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class CookWorker:
    def __init__(
        self,
        config: PipelineConfig,
        store: SampleStore | None = None,
        report: Callable[[UnitProgress], object] = lambda progress: None,
        report_interval_s: float = REPORT_INTERVAL_S,
    ) -> None:
        """``report`` gets how far a unit's cook is, at most once every ``report_interval_s`` and at its end."""
        self.config = config
        self.store: SampleStore = store if store is not None else DiskStore(config.output.dir)
        self.report, self.report_interval_s = report, report_interval_s
        self.tokenizer = ChatTokenizer(
            config.tokenizer.path, config.tokenizer.backend, chat_format=config.tokenizer.chat_format
        )
        self.cooker = COOKERS[config.cooker]
        self._media_store: Any = None
        self._budget = RecordBudget(config.ray.record_timeout_s)
        image = config.media.image
        self._storages = (frame_storage(image.storage, image.jpeg_quality), frame_storage(*config.media.video_storage))

    def _media(self, raw: RawRecord, conv: Conversation) -> tuple[tuple[MediaItem, ...], ...]:
        if not conv.media:
            return ()
        from cook.media import process_media
        from cook.sources.media_store import MediaStore

        if self._media_store is None:
            cfg = self.config
            self._media_store = MediaStore(
                media_root=cfg.input.media_root,
                stores=list(cfg.input.media_stores),
                max_media_bytes=cfg.media.max_media_bytes,
            )
        groups = []
        for ref in conv.media:
            data = self._media_store.resolve(ref.ref, raw.members, os.path.dirname(raw.origin))
            groups.append(process_media(ref, data, self.config.media))
        return tuple(groups)

    def _cook_and_media(self, raw: RawRecord) -> Cooked:
        conv = self.cooker(raw)
        return conv, self._media(raw, conv)

    def work(self, job: Job, attempt: Attempt | None = None) -> Result:
        """Do ``job`` (``attempt``: how to cook a unit this time)."""
        if isinstance(job, Unit):
            return self.cook_unit(job, attempt)
        if isinstance(job, WindowTask):
            return self.plan_window(job)
        if isinstance(job, IndexTask):
            publish_index(self.config.output.dir, job.shards)
            return IndexDone(job.shards)
        if isinstance(job, LineCountTask):
            return LineCounts(job.first_unit, tuple(count_lines(job.path, job.spans)))
        return WriteDone(tuple(map(self.write_shard, job.shards)))

    def cook_unit(self, unit: Unit, attempt: Attempt | None = None) -> UnitDone:
        """Cook ``unit`` into the staging store; returns its counts and rejects. A ``cook repack``
        unit's sequences are read back from their packs instead, and their patch rows are staged as
        references into the source shards."""
        if unit.reads is not None:
            summary, samples, spans = repack_unit(unit, self.config.packing, self.tokenizer.control_ids)
        else:
            (summary, samples), spans = self.cook_samples(unit, attempt), None
        self.store.put(summary, samples, spans)
        return summary.done()

    def plan_window(self, task: WindowTask) -> WindowDone:
        """Plan ``task``'s packs from its units' staged lengths; the plan is staged for its shards."""
        return self._plan(task)[1]

    def _plan(self, task: WindowTask) -> tuple[PackPlan, WindowDone]:
        plan, done = plan_window_task(task, self.store.lengths, self.config.packing)
        self.store.put_plan(task, plan)
        return plan, done

    def cook_samples(self, unit: Unit, attempt: Attempt | None = None) -> tuple[UnitSummary, list[TokenizedSample]]:
        try:
            with _no_cyclic_gc(), self._budget.armed():
                return self._cook_unit(unit, attempt or Attempt())
        finally:
            self.tokenizer.reset_backend_cache()  # a long job must not grow the encoder's caches

    def _cook_unit(self, unit: Unit, attempt: Attempt) -> tuple[UnitSummary, list[TokenizedSample]]:
        """read -> cook -> media per record, then tokenize -> fit per batch of ``TOKENIZE_BATCH`` cooked
        records; each record's steps run under ``rejects.catch``, the one place a reject is recorded."""
        rejects = RejectLog()
        samples: list[TokenizedSample] = []
        batch: list[Cooked] = []
        records_in = 0
        cursor = Cursor()
        reporter = UnitReporter(self.report, unit.index, unit.size_bytes, cursor, self.report_interval_s)
        for ordinal, raw in read_unit(self.config, unit, attempt.trace, cursor):
            records_in += 1
            with rejects.catch(raw.source):
                record = raw.read()
                attempt.check(ordinal)
                batch.append(self._budget.run(self._cook_and_media, record))
            if len(batch) == TOKENIZE_BATCH:
                samples += self._tokenize_and_fit(batch, rejects)
                batch = []
            reporter.tick(records_in)
        samples += self._tokenize_and_fit(batch, rejects)
        reporter.send(records_in)
        return UnitSummary.of(unit.index, records_in, rejects.records, samples), samples

    def _tokenize_and_fit(self, batch: list[Cooked], rejects: RejectLog) -> list[TokenizedSample]:
        """Tokenize ``batch`` at once (one conversation's failure never fails the others), then take
        and fit each sample under its record's reject handler, in batch order."""
        if not batch:
            return []
        convs, media = [conv for conv, _ in batch], [groups for _, groups in batch]
        samples: list[TokenizedSample] = []
        for tokenized in tokenize_batch(self.tokenizer, convs, media, self.config.tokenizer):
            with rejects.catch(tokenized.source):
                samples.append(self._stored(fit_sample(tokenized.sample(), self.config.packing)))
        return samples

    def _stored(self, sample: TokenizedSample) -> TokenizedSample:
        """``sample`` with its visual frames encoded as its shard will store them (png/jpeg storage), so
        the stage and the shard writer hold the encoded frames, not the patches (``encode_item_frames``)."""
        image, video = self._storages
        if not sample.media or not image.stores_frames:
            return sample
        return replace(sample, media=tuple(encode_item_frames(item, image, video) for item in sample.media))

    def write_shard(self, task: ShardTask) -> ShardDone:
        """Build the task's packs from its window's plan and staged samples and write them as one
        shard, then its Energon index rows (a plan that is not staged, after a crash or on a fresh
        node, is made again: it is pure)."""
        plan = self.store.plan(task.window) or self._plan(task.window)[0]
        refs, pack_bounds = plan.packs_in(task.start, task.stop)
        samples = self.store.take(refs)
        bounds = pack_bounds.tolist()
        pad_id, pad_multiple = self.tokenizer.pad_id, self.config.packing.pad_multiple
        packs = [build_pack(samples[a:b], pad_id, pad_multiple, False) for a, b in itertools.pairwise(bounds)]
        image, video = self._storages
        info, layout = write_shard(
            self.config.output.dir,
            task.shard_index,
            task.first_pack,
            packs,
            direct=self.config.ray.direct_io,
            storage=image,
            video_storage=video,
        )
        write_rows(self.config.output.dir, task.shard_index, info, layout)
        return ShardDone(task.shard_index, info, _packed_counts(packs, samples))


def read_unit(
    config: PipelineConfig, unit: Unit, trace: str | None = None, cursor: Cursor | None = None
) -> Iterator[tuple[int, RawRecord]]:
    """``unit``'s records, numbered from 0. With a ``trace`` path, each number is written there (and
    flushed) before its record is handed on, so the executor can name a record that kills a worker,
    and ``TRACE_DONE`` once the last one has been cooked (a worker lost after that, with its reply in
    flight, was not killed by a record of this unit). ``cursor`` follows how far the reader is."""
    assert unit.first_index is not None, f"unit {unit.index}: the lines before it are not counted"
    name = source_name(unit.path, config.input.path)
    reader = SOURCES[unit.format]
    records = enumerate(
        reader(unit.path, config.input.max_record_bytes, unit.span, unit.first_index, name=name, cursor=cursor)
    )
    if trace is None:
        yield from records
        return
    with open(trace, "w") as out:
        for ordinal, raw in records:
            out.write(f"{ordinal}\n")
            out.flush()
            yield ordinal, raw
        out.write(f"{TRACE_DONE}\n")
        out.flush()


def first_unit_texts(config: PipelineConfig, unit: Unit, limit: int = SAMPLE_TEXTS) -> list[str]:
    """Up to ``limit`` data texts (turn text, thinking) of ``unit``'s first records, for the backend
    self-check. Records that do not cook are skipped here; the workers reject them properly."""
    cooker = COOKERS[config.cooker]
    texts: list[str] = []
    for _, raw in read_unit(config, unit):
        if len(texts) >= limit:
            break
        try:
            conv = cooker(raw.read())
        except Rejected:
            continue
        for turn in conv.turns:
            texts.extend(part.text for part in turn.content if isinstance(part, TextPart) and part.text)
            if turn.reasoning:
                texts.append(turn.reasoning)
    return texts[:limit]


def _packed_counts(packs: list[Pack], samples: list[TokenizedSample]) -> Counts:
    tokens = sum(p.tokens for p in packs)
    return Counts(
        packs=len(packs),
        sources_packed=len(samples),
        tokens=tokens,
        target_tokens=sum(int(p.loss_mask.sum()) for p in packs),
        padding_tokens=sum(p.padded_tokens for p in packs) - tokens,
        truncated_sequences=sum(s.truncated for s in samples),
        truncated_tokens=sum(s.truncated_tokens for s in samples),
    )
