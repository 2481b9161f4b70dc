"""OpenAI messages -> Conversation.

    {"messages": [{"role": "user", "content": "Hi" | [{"type": "text", "text": "Hi"},
                                                      {"type": "image", "image": "cat.jpg"}, ...]},
                  {"role": "assistant", "content": "...", "reasoning_content"?: "...", "loss"?: false,
                   "tool_calls"?: [...]},
                  {"role": "tool", "content": "...", "tool_call_id"?: "...", "name"?: "..."}],
     "tools"?: [...]}

Media parts: ``{"type": K, K: ref}`` or ``{"type": K + "_url", K + "_url": {"url": ref}}`` for K in
image, video, audio; a video part may carry ``start``/``end`` seconds. ``tool_calls`` and ``tools``
are kept as JSON text in the record's own key order (``Turn.tool_calls``, ``Conversation.tools``), as
``apply_chat_template`` sees them; a message with tool calls may have empty or no content. Text is
never parsed for markup: a ``<image>`` typed by a user stays text.
"""

from __future__ import annotations

import json
from typing import Any, cast

from cook.cookers.fields import check_type, optional, require
from cook.errors import Rejected, RejectReason
from cook.format import ROLES
from cook.types import Conversation, MediaKind, MediaPart, MediaRef, Part, RawRecord, Role, TextPart, Turn

MEDIA_KINDS: tuple[MediaKind, ...] = ("image", "video", "audio")


def _media_ref(part: dict[str, Any], where: str) -> MediaRef:
    kind = part["type"].removesuffix("_url")
    value = part.get(kind, part.get(kind + "_url"))
    if isinstance(value, dict):
        value = value.get("url")
    if not isinstance(value, str) or not value:
        raise Rejected(RejectReason.MISSING_FIELD, f"{where}: {kind} part has no reference")
    start = optional(part, "start", (int, float), where + ".")
    end = optional(part, "end", (int, float), where + ".")
    return MediaRef(kind=kind, ref=value, start_s=start, end_s=end)


def _content(value: Any, where: str, media: list[MediaRef]) -> list[Part]:
    if value is None:
        return []
    if isinstance(value, str):
        return [TextPart(value)] if value else []
    parts: list[Part] = []
    for i, part in enumerate(check_type(value, list, where)):
        at = f"{where}[{i}]"
        check_type(part, dict, at)
        kind = require(part, "type", str, at + ".")
        if kind == "text":
            text = require(part, "text", str, at + ".")
            if text:
                parts.append(TextPart(text))
        elif kind.removesuffix("_url") in MEDIA_KINDS:
            media.append(_media_ref(part, at))
            parts.append(MediaPart(len(media) - 1))
        else:
            raise Rejected(RejectReason.BAD_TYPE, f"{at}.type {kind!r} is not text/image/video/audio")
    return parts


def _plain_turn(message: Any) -> Turn | None:
    """The common message without building any field name: a dict of ``role``, ``content`` (a
    non-empty string, or a list of ``{"type": "text", "text": str}`` parts) and optionally a string
    ``reasoning_content``. None sends anything else the checked way (``_turn``), which names every
    error; both ways build the same ``Turn`` for what this one takes."""
    if type(message) is not dict:
        return None
    role, content = message.get("role"), message.get("content")
    if role not in ROLES or type(role) is not str:
        return None
    reasoning = message.get("reasoning_content")
    if len(message) != (3 if "reasoning_content" in message else 2) or not (
        reasoning is None or type(reasoning) is str
    ):
        return None
    if type(content) is str:
        parts: tuple[Part, ...] = (TextPart(content),) if content else ()
    elif type(content) is list:
        texts = []
        for part in content:
            if (
                type(part) is not dict
                or len(part) != 2
                or part.get("type") != "text"
                or type(part.get("text")) is not str
            ):
                return None
            if part["text"]:
                texts.append(TextPart(part["text"]))
        parts = tuple(texts)
    else:
        return None
    if not parts and not reasoning:
        return None
    return Turn(role=cast(Role, role), content=parts, reasoning=reasoning)


def _turn(message: Any, where: str, media: list[MediaRef]) -> Turn:
    check_type(message, dict, where)
    role = require(message, "role", str, where + ".")
    if role not in ROLES:
        raise Rejected(RejectReason.BAD_ROLE, f"{where}.role {role!r} is not one of {', '.join(ROLES)}")
    parts = _content(message.get("content"), where + ".content", media)
    reasoning = optional(message, "reasoning_content", str, where + ".")
    calls = optional(message, "tool_calls", list, where + ".") or ()
    if not parts and not reasoning and not calls:
        raise Rejected(RejectReason.EMPTY_TURN, f"{where} ({role}) has no content")
    return Turn(
        role=role,
        content=tuple(parts),
        loss=optional(message, "loss", bool, where + "."),
        reasoning=reasoning,
        tool_calls=tuple(json.dumps(call, ensure_ascii=False) for call in calls),
        tool_call_id=optional(message, "tool_call_id", str, where + "."),
        name=optional(message, "name", str, where + "."),
        content_absent=message.get("content") is None,
    )


def cook_openai(raw: RawRecord) -> Conversation:
    messages = require(raw.fields, "messages", list)
    if not messages:
        raise Rejected(RejectReason.EMPTY_TURN, "'messages' is empty")
    media: list[MediaRef] = []
    turns = tuple(_plain_turn(m) or _turn(m, f"messages[{i}]", media) for i, m in enumerate(messages))
    tools = raw.fields.get("tools")
    tools_text = None if tools in (None, []) else json.dumps(tools, ensure_ascii=False)  # the record's key order
    return Conversation(source=raw.source, turns=turns, media=tuple(media), tools=tools_text)
