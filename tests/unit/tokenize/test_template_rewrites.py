"""Templates that rewrite a message's content (``template_check``): DeepSeek-R1 prints only what
follows ``</think>`` of each assistant reply. cook renders such a record a second time with its real
text and then gives exactly Hugging Face's ids, targets on what the template kept of the reply."""

from __future__ import annotations

from typing import Any

import pytest

from cook.config import TokenizerConfig
from cook.tokenize import tokenize_batch
from cook.tokenize.template_check import content_tests, held_literal
from cook.tokenize.tokenizer import ChatTokenizer
from cook.types import Conversation, RejectRecord, TextPart, TokenizedSample, Turn

ROWS = [
    [("user", "Hi there"), ("assistant", "<think>plan it</think>Hello!")],
    [
        ("user", "Q1"),
        ("assistant", "<think>\nhmm\n</think>\n\nA1"),
        ("user", "Q2"),
        ("assistant", "<think>x</think>A2"),
    ],
    [("system", "Sys"), ("user", "a </think> b"), ("assistant", "plain answer")],
    [("user", "x"), ("assistant", "no think at all")],
]
KEPT = [["Hello!"], ["\n\nA1", "A2"], ["plain answer"], ["no think at all"]]  # what the template keeps


def test_content_tests_reads_the_literals_a_template_tests_text_with() -> None:
    template = (
        "{% if '</think>' in content %}{% set content = content.split('</think>')[-1] %}{% endif %}"
        "{{ content.replace(\"[x]\", 'y') }}{{ content.split('\\n') }}{{ 'literal' + content }}"
    )
    pattern = content_tests(template)
    assert pattern is not None
    assert held_literal(pattern, ["plain", "a </think> b"]) == "</think>"
    assert held_literal(pattern, ["has [x]"]) == "[x]"
    assert held_literal(pattern, ["literal", "a\nb"]) is None  # printed literals and whitespace are not tests
    assert content_tests("{{ messages[0]['content'] | trim }}") is None


@pytest.fixture(scope="module")
def deepseek(family_tokenizer: Any) -> str:
    return str(family_tokenizer("deepseek-r1"))


def test_deepseek_r1_inline_thinking_gives_hf_ids_and_targets_what_is_kept(deepseek: str) -> None:
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(deepseek, local_files_only=True)
    tokenizer = ChatTokenizer(deepseek, "hf", chat_format="template")
    convs = [
        Conversation(f"r.jsonl#{k}", tuple(Turn(role, (TextPart(text),)) for role, text in row))  # type: ignore[arg-type]
        for k, row in enumerate(ROWS * 3)  # one batch: every record must get its own text
    ]
    out = tokenize_batch(tokenizer, convs, [()] * len(convs), TokenizerConfig(path=deepseek, chat_format="template"))
    eos = hf.eos_token
    for k, (row, sample) in enumerate(zip(ROWS * 3, out, strict=True)):
        assert isinstance(sample, TokenizedSample), sample if isinstance(sample, RejectRecord) else None
        messages = [{"role": role, "content": text} for role, text in row]
        assert sample.input_ids.tolist() == hf.apply_chat_template(messages, tokenize=True, return_dict=False)
        ids, mask = sample.input_ids.tolist(), sample.loss_mask.tolist()
        spans, current = [], []
        for token, flag in zip(ids, mask, strict=True):
            if flag:
                current.append(token)
            elif current:
                spans.append(hf.decode(current))
                current = []
        if current:
            spans.append(hf.decode(current))
        assert spans == [text + eos for text in KEPT[k % len(ROWS)]]
