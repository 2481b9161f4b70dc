"""Granary / NeMo ASR manifest rows -> Conversation.

{"audio_filepath": "clips/a.flac", "text": "hello world", "offset"?: 1.5, "duration"?: 3.0}
-> user: [audio, "Transcribe the audio."]   assistant: "hello world"
"""

from __future__ import annotations

from cook.cookers.fields import optional, require
from cook.errors import Rejected, RejectReason
from cook.types import Conversation, MediaPart, MediaRef, RawRecord, TextPart, Turn

TRANSCRIBE_PROMPT = "Transcribe the audio."


def cook_granary(raw: RawRecord) -> Conversation:
    path = require(raw.fields, "audio_filepath", str)
    text = require(raw.fields, "text", str)
    if not text.strip():
        raise Rejected(RejectReason.NO_TARGET, "empty transcription")
    offset = optional(raw.fields, "offset", (int, float))
    duration = optional(raw.fields, "duration", (int, float))
    start = float(offset) if offset else None
    end = (start or 0.0) + float(duration) if (duration and offset) else None
    audio = MediaRef(kind="audio", ref=path, start_s=start, end_s=end)
    user = Turn(role="user", content=(MediaPart(0), TextPart(TRANSCRIBE_PROMPT)))
    assistant = Turn(role="assistant", content=(TextPart(text),))
    return Conversation(source=raw.source, turns=(user, assistant), media=(audio,))
