"""Native tool calls in template mode: a record's ``tool_calls`` reach the template as the message field
(arguments as given), ids equal ``apply_chat_template``, each target assistant turn's tool-call markup
and closing token are targets (the ``{% generation %}`` references in ``tool_call_templates.py``), and
ChatML mode renders tool calls exactly as before. Real Qwen2.5, Llama-3.1 and Mistral-Nemo templates."""

from __future__ import annotations

import copy
import json
import pickle
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cook.config import TokenizerConfig
from cook.cookers import COOKERS
from cook.errors import RejectReason
from cook.tokenize import ChatTokenizer, Tokenized, tokenize_batch
from cook.tokenize.chat_format import render
from cook.types import Conversation, RawRecord, TextPart, TokenizedSample, Turn
from tests.conftest import DEMO_TOKENIZER
from tests.unit.tokenize.template_data import TEXT
from tests.unit.tokenize.tool_call_templates import TOOL_TEMPLATES, tool_tokenizer

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}


def _call(name: str, arguments: Any, call_id: str = "abc123XYZ") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _record(assistant: dict[str, Any], *, tools: bool = True, results: int = 1, final: bool = True) -> dict:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "What's the weather in Paris?"}, assistant]
    messages += [{"role": "tool", "content": "22 C sunny", "tool_call_id": "abc123XYZ"} for _ in range(results)]
    if final:
        messages.append({"role": "assistant", "content": "It is 22 C and sunny in Paris."})
    return {"messages": messages, **({"tools": [WEATHER, TIME]} if tools else {})}


CALL = _call("get_weather", {"city": "Paris"})
RECORDS = {
    "content null, arguments a dict": _record({"role": "assistant", "content": None, "tool_calls": [CALL]}),
    "content omitted, arguments a string": _record(
        {"role": "assistant", "tool_calls": [_call("get_weather", '{"city": "Paris"}')]}
    ),
    "content empty, no tools, ends on the call": _record(
        {"role": "assistant", "content": "", "tool_calls": [CALL]}, tools=False, results=0, final=False
    ),
    "content and a call": _record({"role": "assistant", "content": "Let me check.", "tool_calls": [CALL]}),
    "two calls": _record(
        {"role": "assistant", "content": None, "tool_calls": [CALL, _call("get_time", {}, "def456UVW")]},
        results=2,
    ),
}
SINGLE_CALL = {"llama3.1"}  # the template raises on two calls in one message


@pytest.fixture(scope="module")
def tool_family(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("tool_templates")

    @cache
    def get(name: str) -> tuple[ChatTokenizer, Any, str]:
        from transformers import AutoTokenizer

        path = str(tool_tokenizer(name, root))
        return ChatTokenizer(path, chat_format="template"), AutoTokenizer.from_pretrained(path), TOOL_TEMPLATES[name][2]

    return get


def _cook(tok: ChatTokenizer, record: dict, **cfg: Any) -> Tokenized:
    conv = COOKERS["openai"](RawRecord("t.jsonl#1", copy.deepcopy(record), "t.jsonl"))
    config = TokenizerConfig(path="unused", **{"chat_format": "template", **cfg})
    return tokenize_batch(tok, [conv], [()], config)[0]


def _reference(hf: Any, record: dict, template: str | None = None) -> tuple[list[int], list[int]]:
    """(ids, assistant mask) of ``apply_chat_template`` on the record as given (mask: with ``template``)."""
    kwargs: dict[str, Any] = {"tools": record.get("tools"), "tokenize": True, "return_dict": True}
    if template is not None:
        kwargs.update(chat_template=template, return_assistant_tokens_mask=True)
    out = hf.apply_chat_template(copy.deepcopy(record["messages"]), **kwargs)
    return list(out["input_ids"]), list(out.get("assistant_masks", []))


def _sample(result: Tokenized) -> TokenizedSample:
    return result.sample()


@pytest.mark.parametrize("record", RECORDS, ids=list(RECORDS))
@pytest.mark.parametrize("name", list(TOOL_TEMPLATES))
def test_ids_and_masks_equal_the_references(tool_family, name: str, record: str) -> None:
    if name in SINGLE_CALL and record == "two calls":
        pytest.skip("Llama-3.1 supports one call per message")
    tok, hf, generation = tool_family(name)
    ids, _ = _reference(hf, RECORDS[record])
    gen_ids, mask = _reference(hf, RECORDS[record], generation)
    assert gen_ids == ids  # the generation variant renders the same text
    sample = _sample(_cook(tok, RECORDS[record]))
    assert sample.input_ids.tolist() == ids
    assert sample.loss_mask.tolist() == mask
    last = _sample(_cook(tok, RECORDS[record], train_on="last_assistant")).loss_mask.tolist()
    starts = [i for i in range(len(mask)) if mask[i] and (i == 0 or not mask[i - 1])]
    assert last == [m if i >= starts[-1] else 0 for i, m in enumerate(mask)]


@pytest.mark.parametrize("name", list(TOOL_TEMPLATES))
def test_the_tool_call_markup_and_closing_token_are_the_target(tool_family, name: str) -> None:
    tok, hf, _ = tool_family(name)
    record = RECORDS["content null, arguments a dict"]
    record = {**record, "messages": record["messages"][:2]}  # end on the tool call: it is the last turn
    sample = _sample(_cook(tok, record, train_on="last_assistant"))
    ids, mask = sample.input_ids.tolist(), sample.loss_mask.tolist()
    target = hf.decode([i for i, m in zip(ids, mask, strict=True) if m])
    expected = {
        "qwen2.5": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>',
        "llama3.1": '{"name": "get_weather", "parameters": {"city": "Paris"}}<|eot_id|>',
        "mistral-nemo": '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abc123XYZ"}]</s>',
    }
    assert target == expected[name]


def test_a_loss_false_tool_call_turn_is_not_a_target(tool_family) -> None:
    tok, hf, _ = tool_family("qwen2.5")
    record = copy.deepcopy(RECORDS["content and a call"])
    record["messages"][1]["loss"] = False
    sample = _sample(_cook(tok, record))
    target = hf.decode([i for i, m in zip(sample.input_ids.tolist(), sample.loss_mask.tolist(), strict=True) if m])
    assert target == "It is 22 C and sunny in Paris.<|im_end|>"


@pytest.mark.parametrize("name", list(TOOL_TEMPLATES))
@pytest.mark.parametrize("where", ["name", "arguments", "argument key", "id"])
def test_a_control_token_in_a_tool_call_rejects_the_record(tool_family, name: str, where: str) -> None:
    tok, _, _ = tool_family(name)
    forged = {"qwen2.5": "<|im_end|>", "llama3.1": "<|eot_id|>", "mistral-nemo": "</s>"}[name]
    call = _call("get_weather", {"city": "Paris"})
    if where == "name":
        call["function"]["name"] = f"get{forged}"
    elif where == "arguments":
        call["function"]["arguments"] = {"city": f"Paris{forged}"}
    elif where == "argument key":
        call["function"]["arguments"] = {f"city{forged}": "Paris"}
    else:
        call["id"] = forged
    result = _cook(tok, _record({"role": "assistant", "content": None, "tool_calls": [call]}))
    assert result.failure is not None and result.failure.reason == RejectReason.TEMPLATE_ERROR


def test_a_control_token_in_a_tool_call_id_rejects_the_record(tool_family) -> None:
    tok, _, _ = tool_family("mistral-nemo")
    record = copy.deepcopy(RECORDS["content null, arguments a dict"])
    record["messages"][2]["tool_call_id"] = "[INST]abcd"
    result = _cook(tok, record)
    assert result.failure is not None and result.failure.reason == RejectReason.TEMPLATE_ERROR


def test_tool_messages_carry_their_call_id_and_name() -> None:
    record = RECORDS["two calls"]
    conv = COOKERS["openai"](RawRecord("t#1", record, "t"))
    assistant, tool = conv.turns[1], conv.turns[2]
    assert assistant.content == () and assistant.content_absent
    assert [json.loads(c) for c in assistant.tool_calls] == record["messages"][1]["tool_calls"]
    assert [list(json.loads(c)) for c in assistant.tool_calls] == [["id", "type", "function"]] * 2  # key order kept
    assert tool.tool_call_id == "abc123XYZ" and tool.name is None and not tool.content_absent
    named = COOKERS["openai"](
        RawRecord(
            "t#1",
            {"messages": [{"role": "tool", "content": "1", "name": "calc"}, {"role": "assistant", "content": "a"}]},
            "t",
        )
    )
    assert named.turns[0].name == "calc"
    assert hash(conv) == hash(pickle.loads(pickle.dumps(conv))) and pickle.loads(pickle.dumps(conv)) == conv


def test_openai_rejects_a_tool_call_id_that_is_not_a_string() -> None:
    from cook.errors import Rejected

    record = {"messages": [{"role": "tool", "content": "1", "tool_call_id": 7}, {"role": "assistant", "content": "a"}]}
    with pytest.raises(Rejected) as info:
        COOKERS["openai"](RawRecord("t#1", record, "t"))
    assert info.value.reason == RejectReason.BAD_TYPE and "tool_call_id" in info.value.detail


def _legacy(conv: Conversation) -> Conversation:
    """The conversation as the openai cooker built it before tool calls had a field: the calls as
    ``<tool_call>{json}</tool_call>`` text after the content."""
    turns = []
    for turn in conv.turns:
        content = turn.content
        if turn.tool_calls:
            content += (TextPart("".join(f"<tool_call>{c}</tool_call>" for c in turn.tool_calls)),)
        turns.append(Turn(turn.role, content, turn.loss, turn.reasoning))
    return Conversation(conv.source, tuple(turns), conv.media, conv.tools)


@pytest.mark.parametrize("record", RECORDS, ids=list(RECORDS))
def test_chatml_mode_renders_tool_calls_as_before(chat_tokenizer, record: str) -> None:
    conv = COOKERS["openai"](RawRecord("t#1", RECORDS[record], "t"))
    legacy = _legacy(conv)
    assert any("<tool_call>{" in p.text for t in legacy.turns for p in t.content if isinstance(p, TextPart))
    for normalize in (True, False):
        assert render(conv, [], "all_assistant", normalize) == render(legacy, [], "all_assistant", normalize)
        config = TokenizerConfig(path="unused", normalize_thinking=normalize)
        new, old = tokenize_batch(chat_tokenizer, [conv, legacy], [(), ()], config)  # the ChatML fast path
        new, old = _sample(new), _sample(old)
        assert new.input_ids.tolist() == old.input_ids.tolist()
        assert new.loss_mask.tolist() == old.loss_mask.tolist()


def test_tool_definitions_keep_the_record_key_order(chat_tokenizer) -> None:
    from transformers import AutoTokenizer

    from tests.unit.tokenize.template_data import TEMPLATES

    tools = [{"type": "function", "function": {"name": "calc", "parameters": {"type": "object", "properties": {}}}}]
    messages = [{"role": "user", "content": "add"}, {"role": "assistant", "content": "3"}]
    conv = COOKERS["openai"](RawRecord("t#1", {"messages": messages, "tools": tools}, "t"))
    assert conv.tools == json.dumps(tools)  # "type" before "function", as the record wrote it
    path = str(TEMPLATES / "llama3")
    tok, hf = ChatTokenizer(path, chat_format="template"), AutoTokenizer.from_pretrained(path)
    sample = _sample(tokenize_batch(tok, [conv], [()], TokenizerConfig(path="unused", chat_format="template"))[0])
    assert sample.input_ids.tolist() == list(
        hf.apply_chat_template(messages, tools=tools, tokenize=True, return_dict=False)
    )
    assert '"type": "function",\n    "function"' in hf.decode(sample.input_ids.tolist())
    chatml = _sample(tokenize_batch(chat_tokenizer, [conv], [()], TokenizerConfig(path=str(DEMO_TOKENIZER)))[0])
    text = chat_tokenizer.hf.decode(chatml.input_ids.tolist())
    assert '# Tools\n[{"type": "function", "function": {"name": "calc"' in text


ARG = st.text(alphabet='ab \n\t{}"\\:,é中🙂<>/', max_size=8)


@pytest.mark.parametrize("name", ["qwen2.5", "mistral-nemo"])
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    content=st.one_of(st.none(), TEXT),
    arguments=st.one_of(st.dictionaries(st.sampled_from(["q", "city", " k"]), ARG, max_size=2), ARG),
    calls=st.integers(1, 2),
    result=TEXT.filter(bool),
    final=TEXT,
)
def test_fuzz_ids_and_masks(tool_family, name, content, arguments, calls: int, result: str, final: str) -> None:
    tok, hf, generation = tool_family(name)
    assistant = {"role": "assistant", "content": content, "tool_calls": [_call("f", arguments)] * calls}
    record = {
        "messages": [
            {"role": "user", "content": "q"},
            assistant,
            {"role": "tool", "content": result, "tool_call_id": "abc123XYZ"},
            {"role": "assistant", "content": final or "ok"},
        ]
    }
    ids, _ = _reference(hf, record)
    gen_ids, mask = _reference(hf, record, generation)
    assert gen_ids == ids
    sample = _sample(_cook(tok, record))
    assert sample.input_ids.tolist() == ids
    assert sample.loss_mask.tolist() == mask


CONSECUTIVE = {
    "a call, then the answer": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "tool_calls": [CALL]},
        {"role": "assistant", "content": "done"},
    ],
    "two call turns in a row": [
        {"role": "user", "content": "q"},
        {"role": "assistant", "tool_calls": [CALL]},
        {"role": "assistant", "content": None, "tool_calls": [_call("get_time", {}, "def456UVW")]},
    ],
    "calls in two exchanges": [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "tool_calls": [CALL]},
        {"role": "tool", "content": "r", "tool_call_id": "abc123XYZ"},
        {"role": "user", "content": "again"},
        {"role": "assistant", "tool_calls": [_call("get_time", {}, "def456UVW")]},
    ],
}


@pytest.mark.parametrize("case", CONSECUTIVE, ids=list(CONSECUTIVE))
@pytest.mark.parametrize("name", list(TOOL_TEMPLATES))
def test_tool_call_turns_next_to_each_other(tool_family, name: str, case: str) -> None:
    if name == "mistral-nemo" and case == "calls in two exchanges":
        pytest.skip("Mistral-Nemo's alternation check refuses two user turns in a row")
    tok, hf, generation = tool_family(name)
    record = {"messages": CONSECUTIVE[case]}
    ids, _ = _reference(hf, record)
    gen_ids, mask = _reference(hf, record, generation)
    assert gen_ids == ids
    sample = _sample(_cook(tok, record))
    assert sample.input_ids.tolist() == ids
    assert sample.loss_mask.tolist() == mask
