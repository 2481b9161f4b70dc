"""CookWorker: one input unit -> UnitResult, composing sources -> cookers -> media -> tokenize -> fit.

A worker holds what is expensive to load (the tokenizer, the media store) and reuses it for every
unit. It knows nothing about Ray: the Ray layer wraps it in an actor, the local executor calls it
directly. Every record read ends up exactly once in ``samples`` or in ``rejects``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from cook.config import PipelineConfig
from cook.cookers import COOKERS
from cook.errors import Rejected
from cook.packing.packer import fit_sample
from cook.runner.units import Unit, UnitResult
from cook.sources import SOURCES
from cook.tokenize import ChatTokenizer, tokenize_batch
from cook.types import Conversation, MediaItem, RawRecord, RejectRecord, TokenizedSample

TOKENIZE_BATCH = 256
Cooked = tuple[Conversation, tuple[MediaItem, ...]]


def _reject(source: str, rejected: Rejected) -> RejectRecord:
    return RejectRecord(source=source, reason=rejected.reason, detail=rejected.detail)


class CookWorker:
    def __init__(self, config: PipelineConfig) -> None:
        self.config = config
        self.tokenizer = ChatTokenizer(config.tokenizer.path)
        self.cooker = COOKERS[config.cooker]
        self._media_store: object | None = None

    def _media(self, raw: RawRecord, conv: Conversation) -> tuple[MediaItem, ...]:
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
        store: MediaStore = self._media_store  # type: ignore[assignment]
        items: list[MediaItem] = []
        for ref in conv.media:
            data = store.resolve(ref.ref, raw.members, os.path.dirname(raw.origin))
            items.extend(process_media(ref, data, self.config.media))
        return tuple(items)

    def _cooked(
        self, unit: Unit, rejects: list[RejectRecord], counter: list[int]
    ) -> Iterator[tuple[Conversation, tuple[MediaItem, ...]]]:
        for raw in SOURCES[unit.format](unit.path, self.config.input.max_record_bytes):
            counter[0] += 1
            if isinstance(raw, RejectRecord):
                rejects.append(raw)
                continue
            try:
                conv = self.cooker(raw)
                yield conv, self._media(raw, conv)
            except Rejected as rejected:
                rejects.append(_reject(raw.source, rejected))

    def cook_unit(self, unit: Unit) -> UnitResult:
        samples: list[TokenizedSample] = []
        rejects: list[RejectRecord] = []
        counter = [0]
        batch: list[Cooked] = []
        for item in self._cooked(unit, rejects, counter):
            batch.append(item)
            if len(batch) >= TOKENIZE_BATCH:
                self._tokenize(batch, samples, rejects)
                batch = []
        self._tokenize(batch, samples, rejects)
        return UnitResult(unit.index, tuple(samples), tuple(rejects), counter[0])

    def _tokenize(self, batch: list[Cooked], samples: list[TokenizedSample], rejects: list[RejectRecord]) -> None:
        if not batch:
            return
        convs = [c for c, _ in batch]
        results = tokenize_batch(self.tokenizer, convs, [m for _, m in batch], self.config.tokenizer)
        for conv, result in zip(convs, results, strict=True):
            try:
                if isinstance(result, Rejected):
                    raise result
                samples.append(fit_sample(result, self.config.packing))
            except Rejected as rejected:
                rejects.append(_reject(conv.source, rejected))
