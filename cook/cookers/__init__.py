"""Cookers: RawRecord -> Conversation, one function per raw format (SPEC §4).

``COOKERS`` is the literal table the pipeline's ``cooker`` key selects from; ``auto`` picks per
record from its fields.
"""

from __future__ import annotations

from collections.abc import Callable

from cook.cookers.granary import cook_granary
from cook.cookers.llava import cook_llava
from cook.cookers.openai import cook_openai
from cook.cookers.preformatted import cook_preformatted
from cook.errors import Rejected, RejectReason
from cook.types import Conversation, RawRecord

Cooker = Callable[[RawRecord], Conversation]


def cook_auto(raw: RawRecord) -> Conversation:
    """Pick the cooker from the record's fields: messages, conversations, audio_filepath, text."""
    for field_name, cooker in AUTO_FIELDS:
        if field_name in raw.fields:
            return cooker(raw)
    keys = ", ".join(sorted(map(str, raw.fields))[:8])
    raise Rejected(RejectReason.UNKNOWN_FORMAT, f"no known record layout (fields: {keys})")


AUTO_FIELDS: tuple[tuple[str, Cooker], ...] = (
    ("messages", cook_openai),
    ("conversations", cook_llava),
    ("audio_filepath", cook_granary),
    ("text", cook_preformatted),
)

COOKERS: dict[str, Cooker] = {
    "auto": cook_auto,
    "openai": cook_openai,
    "llava": cook_llava,
    "granary": cook_granary,
    "preformatted": cook_preformatted,
}

__all__ = ["COOKERS", "Cooker"]
