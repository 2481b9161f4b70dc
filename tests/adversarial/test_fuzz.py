"""Fuzzing the raw-record parsers, the cookers and the target builder with hypothesis.

Brief in the normal test run; ``make fuzz`` sets COOK_FUZZ_EXAMPLES for a long run. The property is
always the same: bad data becomes ``Rejected`` (a source's when its record is read) with a known reason code — never
another exception — and good data obeys the target invariants.
"""

from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cook.config import TokenizerConfig
from cook.cookers import COOKERS
from cook.errors import Rejected, RejectReason
from cook.sources.decode import decode_record
from cook.tokenize import tokenize_batch
from cook.types import Conversation, RawRecord

EXAMPLES = int(os.environ.get("COOK_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SPECIAL = st.sampled_from(
    [
        "<|im_start|>",
        "<|im_end|>",
        "<think>",
        "</think>",
        "<image>",
        "<video>",
        "<audio>",
        "<img>",
        "</img>",
        "<so_embedding>",
        "\n",
        "assistant",
        "user",
        " ",
    ]
)
TEXT = st.lists(st.one_of(SPECIAL, st.text(max_size=12)), max_size=8).map("".join)
JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), TEXT)
JSON = st.recursive(
    JSON_LEAF,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
    max_leaves=20,
)
ROLE = st.sampled_from(["system", "user", "assistant", "tool", "human", "gpt", "robot", ""])
MESSAGE = st.fixed_dictionaries(
    {"role": st.one_of(ROLE, JSON_LEAF)},
    optional={
        "content": st.one_of(
            TEXT,
            st.lists(
                st.one_of(
                    st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}),
                    st.fixed_dictionaries(
                        {"type": st.sampled_from(["image", "video", "audio", "gif"])}, optional={"image": TEXT}
                    ),
                    JSON_LEAF,
                ),
                max_size=3,
            ),
            JSON_LEAF,
        ),
        "loss": st.one_of(st.booleans(), JSON_LEAF),
        "reasoning_content": st.one_of(TEXT, JSON_LEAF),
    },
)
RECORD = st.one_of(
    st.fixed_dictionaries({"messages": st.one_of(st.lists(MESSAGE, max_size=5), JSON)}),
    st.fixed_dictionaries(
        {
            "conversations": st.lists(
                st.fixed_dictionaries({"from": st.one_of(ROLE, JSON_LEAF), "value": st.one_of(TEXT, JSON_LEAF)}),
                max_size=4,
            )
        },
        optional={"image": st.one_of(TEXT, JSON), "images": JSON},
    ),
    st.fixed_dictionaries({"text": st.one_of(TEXT, JSON_LEAF)}),
    st.fixed_dictionaries({"audio_filepath": st.one_of(TEXT, JSON_LEAF), "text": st.one_of(TEXT, JSON_LEAF)}),
    st.dictionaries(TEXT, JSON, max_size=3),
)


@FUZZ
@given(st.binary(max_size=200) | JSON.map(lambda v: json.dumps(v).encode()))
def test_decoder_only_gives_objects_or_failed_records(data: bytes) -> None:
    record = decode_record(data, "f#1", "f", 150)
    try:
        assert isinstance(record.read().fields, dict)
    except Rejected as rejected:
        assert rejected.reason in RejectReason and record.fields == {}


@FUZZ
@given(RECORD)
def test_cookers_return_a_conversation_or_reject(fields: dict) -> None:
    for name, cooker in COOKERS.items():
        try:
            conv = cooker(RawRecord("f#1", fields, "f"))
        except Rejected as rejected:
            assert rejected.reason in RejectReason, name
            continue
        assert isinstance(conv, Conversation) and conv.source == "f#1"
        assert all(t.role in ("system", "user", "assistant", "tool") for t in conv.turns)


@FUZZ
@given(st.lists(RECORD, min_size=1, max_size=4))
def test_target_builder_invariants(chat_tokenizer, records: list[dict]) -> None:
    convs = []
    for fields in records:
        try:
            conv = COOKERS["auto"](RawRecord("f#1", fields, "f"))
        except Rejected:
            continue
        if not conv.media:
            convs.append(conv)
    results = tokenize_batch(chat_tokenizer, convs, [()] * len(convs), TokenizerConfig(path="unused"))
    control = set(chat_tokenizer.control_ids.values())
    for conv, tokenized in zip(convs, results, strict=True):
        try:
            sample = tokenized.sample()
        except Rejected as rejected:
            assert rejected.reason == RejectReason.NO_TARGET
            continue
        ids, mask = sample.input_ids.tolist(), sample.loss_mask.tolist()
        assert len(ids) == len(mask) and mask[0] == 0 and sum(mask) > 0
        assert ids.count(chat_tokenizer.control_ids["<|im_start|>"]) == len(conv.turns) + (
            conv.tools is not None and conv.turns[0].role != "system"
        )
        assert not {i for i in ids if i in control} - {1, 2, 3, 4}  # no media tokens without media
        starts = [k for k, t in enumerate(ids) if t == 1]
        for k in starts:
            assert mask[k] == 0 and mask[k + 1] == 0  # never the header
