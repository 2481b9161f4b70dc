"""ChatML mode is faithful: ids equal the demo template's ``apply_chat_template`` (whitespace-leading
content included), and target spans map to tokens by the documented boundary rule."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cook.config import TokenizerConfig
from cook.tokenize import tokenize_batch
from cook.tokenize.boundaries import span_mask, token_byte_lengths
from cook.types import Conversation, TextPart, Turn
from tests.unit.tokenize.template_data import TEXT, conversations, family, holds_control_text, reference_ids

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _chatml(chat_tokenizer, conv: Conversation):
    return tokenize_batch(chat_tokenizer, [conv], [()], TokenizerConfig(path="unused"))[0].sample()


def test_whitespace_leading_content_joins_the_role_header(chat_tokenizer) -> None:
    """The skew the outside comparison found: '\\n'(209) ' '(231) ' sp'(450) vs '\\n '(2220) ' sp'(450)."""
    turns = (Turn("system", (TextPart("  sp"),)), Turn("user", (TextPart("Hi"),)), Turn("assistant", (TextPart("Yo"),)))
    conv = Conversation("t#1", turns)
    ids = _chatml(chat_tokenizer, conv).input_ids.tolist()
    system = chat_tokenizer.encode_texts(["system"])[0]
    assert ids[: len(system) + 4] == [1, *system, 2220, 450, 2]
    assert ids == reference_ids(family("chatml"), conv)


@FUZZ
@given(conv=conversations(reasoning=True))
def test_fuzz_chatml_ids_equal_the_demo_template(chat_tokenizer, conv: Conversation) -> None:
    fam = family("chatml")
    assume(not holds_control_text(fam, conv))
    assert _chatml(chat_tokenizer, conv).input_ids.tolist() == reference_ids(fam, conv)


@FUZZ
@given(text=TEXT.filter(bool), data=st.data())
def test_span_mask_equals_the_offset_overlap_rule(hf_tokenizer, chat_tokenizer, text: str, data) -> None:
    """A token is a target iff one of its characters lies in a target span (HF's own offset rule)."""
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), min_size=2, max_size=6, unique=True)))
    spans = [(a, b) for a, b in zip(cuts[::2], cuts[1::2], strict=False) if a < b]
    encoding = hf_tokenizer(text, add_special_tokens=False)
    expected = [int(any(start < b and stop > a for a, b in spans)) for start, stop in encoding.encodings[0].offsets]
    ids = chat_tokenizer.encode_texts([text])[0]
    assert ids == encoding["input_ids"]
    mask = span_mask(np.asarray(ids), token_byte_lengths(chat_tokenizer), text, spans)
    assert mask.tolist() == expected
