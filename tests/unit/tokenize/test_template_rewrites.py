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
from cook.types import Conversation, TextPart, Turn

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
    for k, (row, tokenized) in enumerate(zip(ROWS * 3, out, strict=True)):
        sample = tokenized.sample()
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


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]
AGENT_ROWS = [
    {
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call1abcd",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call1abcd", "content": '{"temp": 20, "sky": "clear"}\nline "2" \\ end'},
            {"role": "assistant", "content": "It is 20 degrees."},
        ],
        "tools": TOOLS,
    },
    {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]},
]


@pytest.mark.slow
def test_llama31_tool_results_through_tojson_give_hf_ids(real_tokenizer: Any) -> None:
    """Llama-3.1 prints a tool result as ``message.content | tojson``: the quotes, backslashes and newlines
    are escaped in HF's render, and so in cook's ids; the tool call stays the assistant's target."""
    from transformers import AutoTokenizer

    from cook.cookers import COOKERS
    from cook.types import RawRecord

    path = str(real_tokenizer("llama3.1"))
    hf = AutoTokenizer.from_pretrained(path, local_files_only=True)
    tokenizer = ChatTokenizer(path, "hf", chat_format="template")
    convs = [COOKERS["openai"](RawRecord(f"a.jsonl#{k}", row, "a.jsonl")) for k, row in enumerate(AGENT_ROWS * 2)]
    out = tokenize_batch(tokenizer, convs, [()] * len(convs), TokenizerConfig(path=path, chat_format="template"))
    for row, tokenized in zip(AGENT_ROWS * 2, out, strict=True):
        sample = tokenized.sample()
        ref = hf.apply_chat_template(row["messages"], tools=row.get("tools"), tokenize=True, return_dict=False)
        assert sample.input_ids.tolist() == ref
    first = out[0].sample()
    targets = hf.decode([i for i, m in zip(first.input_ids.tolist(), first.loss_mask.tolist(), strict=True) if m])
    assert targets == '{"name": "get_weather", "parameters": {"city": "Paris"}}<|eot_id|>It is 20 degrees.<|eot_id|>'
