"""``cook validate DIR --reference N``: N sampled sequences re-rendered from their source records by
Hugging Face (``render.py``) and compared, ids and target masks, with what the packs hold.

    report = check_reference("out/", count=200, seed=0)
    report.mismatches  # [Mismatch(source="chat.jsonl#12", position=37, what="input_ids", ...)] or []

Sequences are drawn until ``count`` are checked (``sample.py``); each drawn sequence is either checked,
*not checkable* (media, WebDataset or JSON-array input, llava/granary records, a missing input file:
counted with the reason), or *skipped* (its text holds control-token strings, which cook encodes as
text and Hugging Face does not). A truncated sequence is compared on its cooked prefix.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from cook.manifest import ManifestError, load_manifest
from cook.validate.reference.records import InputFiles, NotCheckable, to_record
from cook.validate.reference.render import ControlText, Reference, Renderer, RenderFailed
from cook.validate.reference.sample import DatasetUnreadable, Sequence, draw_sequences

LISTED = 10  # sources listed per kind of finding in the report
GIVE_UP_FACTOR = 10  # stop drawing after 10 N + 100 sequences that could not be checked (a media-only dataset)


@dataclass(frozen=True)
class Mismatch:
    source: str
    shard: str
    key: str
    position: int  # token index in the sequence (-1: the reference could not render the record)
    detail: str


@dataclass
class ReferenceReport:
    requested: int
    chat_format: str = ""
    checked: int = 0
    masks_compared: int = 0
    truncated: int = 0  # checked on their cooked prefix
    mismatches: list[Mismatch] = field(default_factory=list)
    not_checkable: list[tuple[str, str]] = field(default_factory=list)  # (source, reason)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (source, why): control-token text
    ids_only: list[tuple[str, str]] = field(default_factory=list)  # (source, why the mask was not compared)

    @property
    def valid(self) -> bool:
        return not self.mismatches

    def as_json(self) -> dict[str, Any]:
        return {
            "requested": self.requested,
            "chat_format": self.chat_format,
            "checked": self.checked,
            "matched": self.checked - len(self.mismatches),
            "masks_compared": self.masks_compared,
            "truncated_prefix_only": self.truncated,
            "mismatches": [asdict(m) for m in self.mismatches],
            "not_checkable": len(self.not_checkable),
            "not_checkable_reasons": dict(sorted(Counter(r for _, r in self.not_checkable).items())),
            "not_checkable_sources": [s for s, _ in self.not_checkable[:LISTED]],
            "skipped_control_text": len(self.skipped),
            "skipped_control_text_sources": [s for s, _ in self.skipped[:LISTED]],
            "ids_only": len(self.ids_only),
            "ids_only_reasons": dict(sorted(Counter(r for _, r in self.ids_only).items())),
            "ids_only_sources": [s for s, _ in self.ids_only[:LISTED]],
        }


def check_reference(root: str, count: int, seed: int = 0, tokenizer: str | None = None) -> ReferenceReport:
    """Draw sequences until ``count`` are checked (or none is left); raises ``DatasetUnreadable`` or
    ``OSError``/``ValueError`` when the tokenizer cannot be loaded."""
    try:
        manifest = load_manifest(root)
    except ManifestError as err:
        raise DatasetUnreadable(str(err)) from None
    pipeline = manifest.pipeline
    settings = pipeline.get("tokenizer", {})
    chat_format = str(settings.get("chat_format", "chatml"))
    report = ReferenceReport(requested=count, chat_format=chat_format)
    if count == 0:
        return report
    path = tokenizer or settings.get("path") or manifest.tokenizer.path
    renderer = Renderer(str(path), chat_format, bool(settings.get("normalize_thinking", True)))
    inputs = InputFiles(str(pipeline["input"]["path"]), str(pipeline["input"].get("format", "auto")))
    cooker, train_on = str(pipeline.get("cooker", "auto")), str(settings.get("train_on", "all_assistant"))
    for sequence in draw_sequences(root, manifest.shards, seed):
        if report.checked >= count or len(report.not_checkable) + len(report.skipped) > GIVE_UP_FACTOR * count + 100:
            break
        try:
            if sequence.media:
                raise NotCheckable("media")
            record = to_record(inputs.read(sequence.source), sequence.source, cooker, train_on)
            reference = renderer.reference(record)
        except NotCheckable as why:
            report.not_checkable.append((sequence.source, str(why)))
            continue
        except ControlText as why:
            report.skipped.append((sequence.source, str(why)))
            continue
        except RenderFailed as why:
            report.checked += 1
            report.mismatches.append(_mismatch(sequence, -1, f"the reference template raised on it: {why}"))
            continue
        report.checked += 1
        report.truncated += sequence.truncated
        _compare(sequence, reference, renderer, report)
    return report


def _compare(sequence: Sequence, reference: Reference, renderer: Renderer, report: ReferenceReport) -> None:
    """Record the first position where ids (then the mask) differ; a truncated sequence: its prefix."""
    ids = np.asarray(reference.ids, dtype=np.int64)
    length = len(sequence.ids)
    if sequence.truncated and length < len(ids):
        ids = ids[:length]
    position = _first_difference(sequence.ids.astype(np.int64), ids)
    if position is not None:
        report.mismatches.append(_mismatch(sequence, position, _ids_detail(sequence, ids, position, renderer)))
        return
    if reference.mask is None:
        report.ids_only.append((sequence.source, reference.masks_by))
        return
    report.masks_compared += 1
    expected = np.asarray(reference.mask[:length], dtype=np.int64)
    expected[:1] = 0  # the first token of a sequence is never predicted (SPEC §8)
    position = _first_difference(sequence.mask.astype(np.int64), expected)
    if position is not None:
        token = renderer.tokenizer.convert_ids_to_tokens([int(ids[position])])[0]
        detail = (
            f"loss_mask differs at token {position} of {length} (pack position {sequence.start + position}, "
            f"token {token!r}): cooked {int(sequence.mask[position])}, reference {int(expected[position])} "
            f"(masks by {reference.masks_by})"
        )
        report.mismatches.append(_mismatch(sequence, position, detail))


def _first_difference(cooked: np.ndarray, reference: np.ndarray) -> int | None:
    common = min(len(cooked), len(reference))
    differ = np.flatnonzero(cooked[:common] != reference[:common])
    if differ.size:
        return int(differ[0])
    return None if len(cooked) == len(reference) else common


def _ids_detail(sequence: Sequence, ids: np.ndarray, position: int, renderer: Renderer) -> str:
    def show(values: np.ndarray) -> str:
        if position >= len(values):
            return "(end)"
        token = renderer.tokenizer.convert_ids_to_tokens([int(values[position])])[0]
        return f"{int(values[position])} {token!r}"

    return (
        f"input_ids differ at token {position} (pack position {sequence.start + position}; cooked length "
        f"{len(sequence.ids)}, reference {len(ids)}): cooked {show(sequence.ids)}, reference {show(ids)}"
    )


def _mismatch(sequence: Sequence, position: int, detail: str) -> Mismatch:
    return Mismatch(sequence.source, sequence.shard, sequence.key, position, detail)
