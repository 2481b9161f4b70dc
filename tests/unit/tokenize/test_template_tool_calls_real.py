"""Native tool calls on the real-vocabulary and family tokenizers (``real_tokenizer`` / ``family_tokenizer``):
Llama-3.1 (Llama 3 tiktoken BPE), Mistral-Nemo (Tekken), Qwen2.5 and Nemotron-3-Nano (their real
pipelines and added tokens: Qwen2.5's ``<tool_call>`` is a non-special added token). Ids equal
``apply_chat_template``; masks equal the ``{% generation %}`` variants where the template is one of
``tool_call_templates.py`` (checked verbatim), and for Nemotron-3-Nano the target is the tool-call
markup after ``<think></think>`` (its generation prompt without thinking) through ``<|im_end|>``."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from cook.tokenize import ChatTokenizer
from tests.unit.tokenize.test_template_tool_calls import RECORDS, SINGLE_CALL, _cook, _reference, _sample
from tests.unit.tokenize.tool_call_templates import TOOL_TEMPLATES

TOKENIZERS = {"llama3.1": "real", "mistral-nemo": "real", "qwen2.5": "family", "nemotron3-nano": "family"}


@pytest.fixture(scope="module")
def loaded(real_tokenizer, family_tokenizer):
    from transformers import AutoTokenizer

    cache: dict[str, tuple[ChatTokenizer, Any]] = {}

    def get(name: str) -> tuple[ChatTokenizer, Any]:
        if name not in cache:
            path = str((real_tokenizer if TOKENIZERS[name] == "real" else family_tokenizer)(name))
            cache[name] = ChatTokenizer(path, chat_format="template"), AutoTokenizer.from_pretrained(path)
        return cache[name]

    return get


@pytest.mark.parametrize("record", RECORDS, ids=list(RECORDS))
# the 128k-vocabulary tokenizers load in seconds each: test-slow (as in test_real_tokenizers.py)
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if TOKENIZERS[n] == "real" else n for n in TOKENIZERS]
)
def test_ids_and_masks_equal_the_references(loaded, name: str, record: str) -> None:
    if name in SINGLE_CALL and record == "two calls":
        pytest.skip("Llama-3.1 supports one call per message")
    if name == "nemotron3-nano" and record == "content omitted, arguments a string":
        pytest.skip("Nemotron-3-Nano's template iterates the arguments' items: a string raises")
    tok, hf = loaded(name)
    ids, _ = _reference(hf, RECORDS[record])
    sample = _sample(_cook(tok, RECORDS[record]))
    assert sample.input_ids.tolist() == ids
    if name in TOOL_TEMPLATES:
        assert hf.chat_template == TOOL_TEMPLATES[name][1]
        gen_ids, mask = _reference(hf, RECORDS[record], TOOL_TEMPLATES[name][2])
        assert gen_ids == ids
        assert sample.loss_mask.tolist() == mask


def test_nemotron3_nano_targets_the_tool_call_markup(loaded) -> None:
    tok, hf = loaded("nemotron3-nano")
    record = copy.deepcopy(RECORDS["two calls"])
    record["messages"] = record["messages"][:2]  # ends on the tool calls
    sample = _sample(_cook(tok, record, train_on="last_assistant"))
    ids, mask = sample.input_ids.tolist(), sample.loss_mask.tolist()
    assert ids == _reference(hf, record)[0]
    target = hf.decode([i for i, m in zip(ids, mask, strict=True) if m])
    calls = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>\n"
    calls += "<tool_call>\n<function=get_time>\n</function>\n</tool_call>\n"
    assert target == calls + "<|im_end|>"  # from the markup's first character past whitespace, like a header
    assert hf.decode(ids).endswith("<|im_start|>assistant\n<think></think>\n" + calls + "<|im_end|>\n")
