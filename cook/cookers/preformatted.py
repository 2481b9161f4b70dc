"""Text whose chat markup is already applied -> Conversation (the "skip chat template" path).

    {"text": "<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\nHello<|im_end|>\\n"}
    -> user "Hi", assistant "Hello"  (template_applied: tokenized as-is, no think normalization)

Only the ``<|im_start|>role\\n`` ... ``<|im_end|>`` delimiters become control tokens; any other
special-token string inside a turn stays text. The whole text must be covered by turns (each
optionally followed by one newline); anything else is ``bad_markup``.
"""

from __future__ import annotations

import re

from cook.cookers.fields import require
from cook.errors import Rejected, RejectReason
from cook.format import IM_END, IM_START, ROLES
from cook.types import Conversation, RawRecord, TextPart, Turn

TURN = re.compile(re.escape(IM_START) + r"(" + "|".join(ROLES) + r")\n(.*?)" + re.escape(IM_END) + r"\n?", flags=re.S)


def cook_preformatted(raw: RawRecord) -> Conversation:
    text = require(raw.fields, "text", str)
    turns = []
    position = 0
    for match in TURN.finditer(text):
        if match.start() != position:
            raise Rejected(RejectReason.BAD_MARKUP, f"text outside a turn at character {position}")
        body = match.group(2)
        if IM_START in body:
            raise Rejected(RejectReason.BAD_MARKUP, f"unterminated turn before character {match.start(2)}")
        turns.append(Turn(role=match.group(1), content=(TextPart(body),) if body else ()))  # type: ignore[arg-type]
        position = match.end()
    if position != len(text) or not turns:
        raise Rejected(RejectReason.BAD_MARKUP, f"text does not split into turns (stops at character {position})")
    return Conversation(source=raw.source, turns=tuple(turns), template_applied=True)
