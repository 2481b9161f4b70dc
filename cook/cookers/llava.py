"""LLaVA conversations -> Conversation.

    {"conversations": [{"from": "human", "value": "<image>\\nWhat is this?"},
                       {"from": "gpt", "value": "A cat."}],
     "image": "cat.jpg"}                      (or "images": [...], "video(s)", "audio(s)")

Each ``<image>``/``<video>``/``<audio>`` tag in a value consumes the next media of its kind, in
order over the whole conversation; tag and media counts must match exactly
(``media_count_mismatch``). In this format the tags ARE the media syntax; any other markup
(``<|im_start|>``, ``<think>`` in a human turn) stays text.
"""

from __future__ import annotations

import re

from cook.cookers.fields import check_type, media_list, optional, require
from cook.errors import Rejected, RejectReason
from cook.types import Conversation, MediaKind, MediaPart, MediaRef, Part, RawRecord, Role, TextPart, Turn

ROLE_NAMES: dict[str, Role] = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "system": "system",
    "tool": "tool",
    "function": "tool",
}
TAG = re.compile(r"<(image|video|audio)>")
MEDIA_FIELDS: tuple[tuple[MediaKind, str, str], ...] = (
    ("image", "image", "images"),
    ("video", "video", "videos"),
    ("audio", "audio", "audios"),
)


def _split(value: str, pending: dict[MediaKind, list[str]], media: list[MediaRef], where: str) -> list[Part]:
    parts: list[Part] = []
    position = 0
    for match in TAG.finditer(value):
        if match.start() > position:
            parts.append(TextPart(value[position : match.start()]))
        kind: MediaKind = match.group(1)  # type: ignore[assignment]
        if not pending[kind]:
            raise Rejected(RejectReason.MEDIA_COUNT_MISMATCH, f"{where}: more <{kind}> tags than {kind}s")
        media.append(MediaRef(kind=kind, ref=pending[kind].pop(0)))
        parts.append(MediaPart(len(media) - 1))
        position = match.end()
    if position < len(value):
        parts.append(TextPart(value[position:]))
    return parts


def cook_llava(raw: RawRecord) -> Conversation:
    turns_raw = require(raw.fields, "conversations", list)
    if not turns_raw:
        raise Rejected(RejectReason.EMPTY_TURN, "'conversations' is empty")
    pending = {kind: media_list(raw.fields, one, many) for kind, one, many in MEDIA_FIELDS}
    media: list[MediaRef] = []
    turns = []
    for i, turn in enumerate(turns_raw):
        where = f"conversations[{i}]"
        check_type(turn, dict, where)
        speaker = require(turn, "from", str, where + ".")
        if speaker not in ROLE_NAMES:
            raise Rejected(RejectReason.BAD_ROLE, f"{where}.from {speaker!r} is not one of {', '.join(ROLE_NAMES)}")
        parts = _split(require(turn, "value", str, where + "."), pending, media, where)
        if not parts:
            raise Rejected(RejectReason.EMPTY_TURN, f"{where} ({speaker}) has no content")
        loss = optional(turn, "loss", bool, where + ".")
        turns.append(Turn(role=ROLE_NAMES[speaker], content=tuple(parts), loss=loss))
    left = {kind: len(refs) for kind, refs in pending.items() if refs}
    if left:
        detail = ", ".join(f"{n} {kind}(s) without a <{kind}> tag" for kind, n in left.items())
        raise Rejected(RejectReason.MEDIA_COUNT_MISMATCH, detail)
    return Conversation(source=raw.source, turns=tuple(turns), media=tuple(media))
