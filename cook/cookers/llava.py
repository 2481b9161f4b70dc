"""LLaVA conversations -> Conversation.

    {"conversations": [{"from": "human", "value": "<image>\\nWhat is this?"},
                       {"from": "gpt", "value": "A cat."}],
     "image": "cat.jpg"}                      (or "images": [...], "video(s)", "audio(s)")

Each ``<image>``/``<video>``/``<audio>`` tag in a value consumes the next media of its kind, in
order over the whole conversation; tag and media counts must match exactly
(``media_count_mismatch``). In this format the tags ARE the media syntax; any other markup
(``<|im_start|>``, ``<think>`` in a human turn) stays text.

**WebDataset samples whose JSON names no media** (SPEC §4). The common LLaVA-in-WebDataset layout
is ``key.json`` holding only ``conversations`` plus ``key.jpg``. When the JSON names no media of a
kind (no field, or an empty list), the sample's members of that kind are its media, in member-name
order; the kind of a member is its last extension (``MEMBER_KINDS``). The counts must then match as
usual::

    key.json {"conversations": [{"from": "human", "value": "<image> and <image>?"}, ...]}
    key.0.jpg, key.1.png       -> images ["key.0.jpg", "key.1.png"]: one per tag, OK
    key.jpg                    -> one image for two tags: media_count_mismatch

Member names sort as strings (``key.10.jpg`` before ``key.2.jpg``). A JSON that names even one
media of a kind uses only what it names for that kind.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

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
MEMBER_KINDS: dict[str, MediaKind] = {
    **dict.fromkeys(("jpg", "jpeg", "png", "webp", "gif", "bmp", "tif", "tiff"), "image"),
    **dict.fromkeys(("mp4", "mkv", "webm", "mov", "avi", "m4v"), "video"),
    **dict.fromkeys(("wav", "flac", "mp3", "ogg", "opus", "m4a", "aac"), "audio"),
}


def member_media(members: Iterable[str], kind: MediaKind) -> list[str]:
    """Names of the sample members of ``kind`` (by their last extension), sorted.

    >>> member_media(["k.json", "k.1.png", "k.0.jpg", "k.wav"], "image")
    ['k.0.jpg', 'k.1.png']
    """
    return sorted(name for name in members if MEMBER_KINDS.get(name.rpartition(".")[2].lower()) == kind)


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
    pending = {
        kind: media_list(raw.fields, one, many) or member_media(raw.members, kind) for kind, one, many in MEDIA_FIELDS
    }
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
