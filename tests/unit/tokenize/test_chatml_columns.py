"""The column fast path for text-only ChatML conversations equals the general piece/layout path,
id for id and mask for mask, on both backends (demo tokenizer)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cook.errors import Rejected
from cook.tokenize import ChatTokenizer
from cook.tokenize.assemble import assemble_batch, layout
from cook.tokenize.boundaries import token_byte_lengths
from cook.tokenize.chat_format import render
from cook.tokenize.chatml_columns import assemble_text_only, text_only
from cook.types import Conversation, MediaPart, TextPart, Turn

PIECES = ["a", "b c", " ", "  ", "\n", "\n\n", "é", "日本", "🙂", "<think>", "</think>", "<|im_start|>", "x<|im_end|>"]
texts = st.lists(st.sampled_from(PIECES), max_size=6).map("".join)
parts = st.lists(texts.map(TextPart), max_size=3).map(tuple)
turns = st.builds(
    Turn,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    content=parts,
    loss=st.sampled_from([None, True, False]),
    reasoning=st.sampled_from([None, "", " plan ", "日本\n"]),
)
conversations = st.builds(
    Conversation,
    source=st.just("t#1"),
    turns=st.lists(turns, min_size=1, max_size=5).map(tuple),
    tools=st.sampled_from([None, "", '[{"name": "f"}]']),
    template_applied=st.booleans(),
)


@pytest.fixture(scope="module", params=["hf", "auto"])
def tokenizer(request, tokenizer_path: str) -> ChatTokenizer:
    return ChatTokenizer(tokenizer_path, request.param)


def _general(tok: ChatTokenizer, convs: list[Conversation], train_on: str, normalize: bool) -> list:
    ids = {**tok.special_ids, **tok.control_ids}
    layouts = [layout(render(c, (), train_on, normalize), ids) for c in convs]
    return assemble_batch(tok, layouts, token_byte_lengths(tok))


def _same(got, want) -> None:
    assert isinstance(got, Rejected) == isinstance(want, Rejected)
    if not isinstance(want, Rejected):
        assert got[0].dtype == np.int32 and got[1].dtype == np.uint8
        assert got[0].tolist() == want[0].tolist()
        assert got[1].tolist() == want[1].tolist()
        assert got[2] == want[2] == 0


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    convs=st.lists(conversations, min_size=1, max_size=6),
    train_on=st.sampled_from(["all_assistant", "last_assistant"]),
    normalize=st.booleans(),
)
def test_columns_equal_general_path(tokenizer: ChatTokenizer, convs, train_on: str, normalize: bool) -> None:
    ids = {**tokenizer.special_ids, **tokenizer.control_ids}
    got = assemble_text_only(tokenizer, convs, ids, train_on, normalize, token_byte_lengths(tokenizer))
    want = _general(tokenizer, convs, train_on, normalize)
    assert len(got) == len(want) == len(convs)
    for g, w in zip(got, want, strict=True):
        _same(g, w)


def test_text_only_excludes_media_parts() -> None:
    assert text_only(Conversation("t#1", (Turn("user", (TextPart("x"),)),)))
    assert not text_only(Conversation("t#1", (Turn("user", (TextPart("x"), MediaPart(0))),)))


def test_partial_target_run_masks_only_the_content(tokenizer: ChatTokenizer) -> None:
    """Without think normalization the assistant header and content are ONE run: header 0, content 1."""
    conv = Conversation("t#1", (Turn("user", (TextPart("Hi"),)), Turn("assistant", (TextPart("Yo"),))))
    ids = {**tokenizer.special_ids, **tokenizer.control_ids}
    ((input_ids, mask, _),) = assemble_text_only(
        tokenizer, [conv], ids, "all_assistant", False, token_byte_lengths(tokenizer)
    )  # type: ignore[misc]
    header = tokenizer.encode_texts(["assistant\n"])[0]
    start = input_ids.tolist().index(1, 1)  # the assistant's <|im_start|>
    assert mask[: start + 1 + len(header)].tolist() == [0] * (start + 1 + len(header))
    assert mask[start + 1 + len(header) :].tolist()[:-1] == [1] * (len(mask) - start - 2 - len(header))
    assert mask[-1] == 0  # the "\n" after <|im_end|>
