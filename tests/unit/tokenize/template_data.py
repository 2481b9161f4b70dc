"""Shared helpers for the template-mode tests: the family tokenizers, benign conversations, references."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from typing import Any

from hypothesis import strategies as st

from cook.config import TokenizerConfig
from cook.errors import Rejected
from cook.tokenize import ChatTokenizer, tokenize_batch
from cook.types import Conversation, TextPart, TokenizedSample, Turn
from tests.conftest import DEMO_TOKENIZER, REPO

TEMPLATES = REPO / "tests" / "assets" / "templates"
FAMILIES = ("llama3", "mistral", "gemma", "phi3")
CLOSING = {"llama3": "<|eot_id|>", "mistral": "</s>", "gemma": "<end_of_turn>", "phi3": "<|end|>"}


@dataclass(frozen=True)
class Family:
    name: str
    cook: ChatTokenizer
    hf: Any
    generation_template: str


@cache
def family(name: str) -> Family:
    from transformers import AutoTokenizer

    path = str(DEMO_TOKENIZER if name == "chatml" else TEMPLATES / name)
    generation = "" if name == "chatml" else (TEMPLATES / name / "generation_template.jinja").read_text()
    return Family(name, ChatTokenizer(path, chat_format="template"), AutoTokenizer.from_pretrained(path), generation)


def cook_one(tok: ChatTokenizer, conv: Conversation, media: tuple = (), **cfg: Any) -> TokenizedSample | Rejected:
    """The sample of ``conv`` in template mode, or the ``Rejected`` its ``sample()`` raises."""
    config = TokenizerConfig(path="unused", **{"chat_format": "template", **cfg})
    try:
        return tokenize_batch(tok, [conv], [media], config)[0].sample()
    except Rejected as rejected:
        return rejected


def messages(conv: Conversation) -> list[dict[str, str]]:
    """The record as ``apply_chat_template`` gets it (text parts joined)."""
    out = []
    for turn in conv.turns:
        message = {"role": turn.role, "content": "".join(p.text for p in turn.content if isinstance(p, TextPart))}
        if turn.reasoning:
            message["reasoning_content"] = turn.reasoning
        out.append(message)
    return out


def reference_ids(fam: Family, conv: Conversation) -> list[int]:
    tools = json.loads(conv.tools) if conv.tools else None
    return list(fam.hf.apply_chat_template(messages(conv), tools=tools, tokenize=True, return_dict=False))


def reference_mask(fam: Family, conv: Conversation) -> tuple[list[int], list[int]]:
    """(ids, assistant mask) from the ``{% generation %}`` variant of the family's template."""
    out = fam.hf.apply_chat_template(
        messages(conv),
        chat_template=fam.generation_template,
        tokenize=True,
        return_dict=True,
        return_assistant_tokens_mask=True,
    )
    return list(out["input_ids"]), list(out["assistant_masks"])


def holds_control_text(fam: Family, conv: Conversation) -> bool:
    texts = [p.text for t in conv.turns for p in t.content if isinstance(p, TextPart)]
    texts += [t.reasoning for t in conv.turns if t.reasoning] + [conv.tools or ""]
    return any(token in text for token in fam.cook.special_ids for text in texts)


# benign text: letters, digits, whitespace runs, punctuation (markup characters included), non-ASCII
PIECE = st.sampled_from(
    ["a", "sp", " x", "  ", "\n", "\n\n", " \n", "\t", "é", "中文", "🙂", "<", ">", "|", "[", "]", "/", "ok", "42", "."]
)
TEXT = st.lists(st.one_of(PIECE, st.text(alphabet="abc xyz\n.,", max_size=6)), max_size=8).map("".join)


@st.composite
def conversations(draw: st.DrawFn, reasoning: bool = False) -> Conversation:
    turns: list[Turn] = []
    if draw(st.booleans()):
        turns.append(Turn("system", (TextPart(draw(TEXT)),)))
    for _ in range(draw(st.integers(1, 3))):
        turns.append(Turn(draw(st.sampled_from(["user", "user", "tool"])), (TextPart(draw(TEXT)),)))
        thought = draw(st.one_of(st.none(), TEXT.filter(bool))) if reasoning else None
        turns.append(Turn("assistant", (TextPart(draw(TEXT)),), reasoning=thought))
    return Conversation("fuzz#1", tuple(turns))
