"""Typed, frozen records that cross stage boundaries.

    files -sources-> RawRecord -cookers-> Conversation -media-> MediaItem per MediaRef
          -tokenize(conv, media)-> TokenizedSample -packing-> Pack -writer-> shards

Every record carries its ``source`` (``<input file>#<key or line>``) from start to end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from cook.errors import Rejected, RejectReason
from cook.format import SEQUENCE_KEYS, SEQUENCE_TRUNCATED_KEY, frame_patches

Role = Literal["system", "user", "assistant", "tool"]
MediaKind = Literal["image", "video", "audio"]


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One raw input record as a source read it.

    ``fields`` is the decoded JSON object or Parquet row; ``members`` holds the other members of the
    same WebDataset sample (name -> bytes; empty for JSONL/Parquet); ``origin`` is the input file.

    A source cannot raise for one record and go on, so a record it could not read (bad JSON, bad
    UTF-8, too large, an unsafe tar member, a broken file) comes in its place all the same, with no
    fields and its ``failure`` (``RawRecord.failed``); ``read()``, the first step on every record,
    raises it. A source's reject so takes the road of every later stage's: a raised ``Rejected``.
    """

    source: str
    fields: Mapping[str, Any]
    origin: str
    members: Mapping[str, bytes] = field(default_factory=dict)
    failure: Rejected | None = None

    @classmethod
    def failed(cls, source: str, origin: str, reason: RejectReason, detail: str) -> RawRecord:
        """A record its source could not read: ``read()`` raises ``Rejected(reason, detail)``."""
        return cls(source, {}, origin, failure=Rejected(reason, detail))

    def read(self) -> RawRecord:
        """This record, for a cooker; raises the source's ``Rejected`` when it could not be read."""
        if self.failure is not None:
            raise self.failure
        return self


@dataclass(frozen=True, slots=True)
class RejectRecord:
    """One line of ``rejects.jsonl``: a record that did not make it into a pack, and why.

    Every stage raises ``Rejected`` for a bad record (a source's through ``RawRecord.read``); the
    runner's ``RejectLog.catch`` is the one place that turns it into this record.
    """

    source: str
    reason: RejectReason
    detail: str


@dataclass(frozen=True, slots=True)
class MediaRef:
    """A media reference as written in the record; resolved to bytes by the media store."""

    kind: MediaKind
    ref: str
    start_s: float | None = None
    end_s: float | None = None


@dataclass(frozen=True, slots=True)
class TextPart:
    text: str


@dataclass(frozen=True, slots=True)
class MediaPart:
    """A media slot in a turn: ``index`` into ``Conversation.media``."""

    index: int


Part = TextPart | MediaPart


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn. ``loss`` is an explicit per-turn loss flag (None: the default policy decides).

    ``reasoning`` is assistant thinking given out of band (e.g. ``reasoning_content``); thinking
    inline in the text as ``<think>...</think>`` is found by the tokenizer's normalization.

    ``tool_calls`` holds the JSON text of each of the message's tool calls, in the record's own key
    order (``'{"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}'``): ChatML
    renders it as ``<tool_call>{json}</tool_call>`` text after the content, template mode passes the
    parsed calls to the template as the message's ``tool_calls``. ``tool_call_id`` and ``name`` are
    the message's fields of those names (a tool result's call id, a participant's name), passed to the
    template as given. ``content_absent``: the record gave no content (``null`` or no key), so the
    template sees none, as Hugging Face's does (an empty ``content`` is ``""``).
    """

    role: Role
    content: tuple[Part, ...]
    loss: bool | None = None
    reasoning: str | None = None
    tool_calls: tuple[str, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    content_absent: bool = False


@dataclass(frozen=True, slots=True)
class Conversation:
    """One canonical conversation. ``media`` is numbered in placeholder order: the i-th ``MediaPart``
    met when reading the turns in order has ``index == i``."""

    source: str
    turns: tuple[Turn, ...]
    media: tuple[MediaRef, ...] = ()
    tools: str | None = None  # JSON text of the record's tool definitions (its key order), rendered in the prompt
    template_applied: bool = False  # preformatted: turns are tokenized as-is, no think normalization


@dataclass(frozen=True, slots=True)
class PlaceholderBlock:
    """One run of placeholder tokens: ``prefix`` (plain text), ``start``, ``token`` x ``count``, ``end``.

    An image is one block ``<img><image>x256</img>``; a video is one block per frame group, each with
    a ``Frame i sampled at X.XX seconds: `` prefix; an audio is one ``<so_start>...<so_end>`` block.
    """

    start: str
    token: str
    count: int
    end: str
    prefix: str = ""


@dataclass(frozen=True, slots=True, eq=False)
class MediaItem:
    """A decoded, pre-patchified media item and the placeholders it expands to.

    Visual items: ``patches`` uint8 [P, 768] and ``size`` (frames, height px, width px); or, read back
    from png/jpeg storage by ``cook repack``, ``stored_frames`` (each frame's member bytes, moved as
    they are) in place of ``patches``.
    Audio items: ``audio_features`` float16 [C, F, 128] and ``audio_lengths`` int32 [C].
    """

    kind: MediaKind
    blocks: tuple[PlaceholderBlock, ...]
    patches: np.ndarray | None = None  # uint8 [P, 768]
    size: tuple[int, int, int] | None = None  # (frames, height_px, width_px)
    visual_kind: Literal["image", "video", "tiles"] | None = None
    audio_features: np.ndarray | None = None  # float16 [C, F, 128]
    audio_lengths: np.ndarray | None = None  # int32 [C]
    stored_frames: tuple[memoryview | bytes, ...] = ()  # one per frame: a frame.<k> member's bytes

    @property
    def n_embeddings(self) -> int:
        return sum(block.count for block in self.blocks)

    @property
    def n_patches(self) -> int:
        if self.patches is not None:
            return int(self.patches.shape[0])
        if self.stored_frames and self.size is not None:
            frames, height_px, width_px = self.size
            return frames * frame_patches(height_px, width_px)
        return 0


@dataclass(frozen=True, slots=True, eq=False)
class TokenizedSample:
    """One conversation as token ids and a target mask, with its media in placeholder order.

    ``loss_mask[t] == 1`` means token ``t`` is a target (predicted from tokens ``< t``).
    """

    source: str
    input_ids: np.ndarray  # int32 [L]
    loss_mask: np.ndarray  # uint8 [L]
    media: tuple[MediaItem, ...] = ()
    media_end: int = 0  # index just past the last media placeholder token (0: no media)
    truncated: bool = False
    truncated_tokens: int = 0  # tokens cut off by truncation (0 unless ``truncated``)

    @property
    def length(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def n_targets(self) -> int:
        return int(self.loss_mask.sum())

    @property
    def n_patches(self) -> int:
        return sum(item.n_patches for item in self.media)


@dataclass(frozen=True, slots=True)
class SequenceMeta:
    """Per-sequence entry of a pack's ``meta.json``."""

    source: str
    length: int
    targets: int
    media: tuple[str, ...] = ()  # visual_kind or "audio" of each media item, in placeholder order
    truncated: bool = False

    def to_meta(self) -> dict[str, Any]:
        """This sequence's entry in ``meta.json`` (key names: ``format.SEQUENCE_KEYS``)."""
        entry: dict[str, Any] = dict(
            zip(SEQUENCE_KEYS, (self.source, self.length, self.targets, list(self.media)), strict=True)
        )
        if self.truncated:
            entry[SEQUENCE_TRUNCATED_KEY] = True
        return entry

    @classmethod
    def from_meta(cls, entry: Mapping[str, Any]) -> SequenceMeta:
        """The inverse of ``to_meta``, for an entry already checked."""
        source, length, targets, media = (entry[key] for key in SEQUENCE_KEYS)
        return cls(source, length, targets, tuple(media), bool(entry.get(SEQUENCE_TRUNCATED_KEY, False)))


@dataclass(frozen=True, slots=True, eq=False)
class Pack:
    """One packed training sample: the arrays of SPEC §8, before serialization."""

    input_ids: np.ndarray  # int32 [T]
    loss_mask: np.ndarray  # uint8 [T]
    cu_seqlens: np.ndarray  # int32 [n+1]
    cu_seqlens_padded: np.ndarray  # int32 [n+1]
    sequences: tuple[SequenceMeta, ...]
    pixel_patches: np.ndarray | None = None  # uint8 [P, 768]
    media_sizes: np.ndarray | None = None  # int32 [M, 3]
    audio_features: np.ndarray | None = None  # float16 [C, F, 128]
    audio_lengths: np.ndarray | None = None  # int32 [C]
    # ``pixel_patches`` in pieces (each uint8 [P_i, 768]), written one after another instead of being
    # concatenated first: the shard writer hands each image's own buffer to the kernel
    pixel_patch_parts: tuple[np.ndarray, ...] = ()
    # the frame members as stored (``MediaItem.stored_frames``, in placeholder order), in place of patches
    stored_frames: tuple[memoryview | bytes, ...] = ()

    @property
    def tokens(self) -> int:
        return int(self.cu_seqlens[-1])

    @property
    def padded_tokens(self) -> int:
        return int(self.input_ids.shape[0])
