"""The family test tokenizers (tests/assets/family_tokenizers.py): each loads with AutoTokenizer and with
cook's template mode, renders its real chat template (tools and tool calls where the template has them),
and carries its family's real pipeline and added-token flags."""

from __future__ import annotations

import hashlib
import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from cook.config import TokenizerConfig
from cook.tokenize import ChatTokenizer, tokenize_batch
from cook.types import Conversation, TextPart, Turn
from tests.assets.family_tokenizers import FAMILIES, FAMILY_SPECS, TEMPLATES, build

# transformers 5 rebuilds a GPT2Tokenizer's pre-tokenizer as plain ByteLevel(use_regex=True): the
# family's own Digits (SmolLM2) or cl100k Split (Phi-4) in tokenizer.json is not what AutoTokenizer runs.
GPT2_CLASS_REBUILT = pytest.mark.xfail(
    strict=True, reason="transformers 5 GPT2Tokenizer drops the tokenizer.json pre-tokenizer"
)


def _marked(marks: dict[str, Any]) -> list[Any]:
    """FAMILIES as pytest params, with the given marks on some of them."""
    return [pytest.param(n, marks=marks[n]) if n in marks else n for n in FAMILIES]


# ---------------------------------------------------------------- expected settings (from the real files)
PIPELINES = {  # family -> (normalizer type, pre-tokenizer types, byte-level?)
    "qwen2.5": ("NFC", ("Split", "ByteLevel"), True),
    "phi3": (None, ("Metaspace",), False),
    "phi4": (None, ("Split", "ByteLevel"), True),
    "gemma2": ("Replace", ("Split",), False),
    "deepseek-r1": ("NFC", ("Split", "ByteLevel"), True),
    "smollm2": (None, ("Digits", "ByteLevel"), True),
    "nemotron3-nano": (None, ("Split", "ByteLevel"), True),
    "nemotron-super": (None, ("Split", "ByteLevel"), True),
}
TOKENIZER_CLASS = {
    "qwen2.5": "Qwen2Tokenizer",
    "phi3": "LlamaTokenizer",
    "phi4": "GPT2Tokenizer",
    "gemma2": "GemmaTokenizer",
    "deepseek-r1": "LlamaTokenizerFast",
    "smollm2": "GPT2Tokenizer",
    "nemotron3-nano": "PreTrainedTokenizerFast",
    "nemotron-super": "PreTrainedTokenizerFast",
}
# (content, special, lstrip, rstrip) of the tokens that matter, as the real tokenizer.json has them
FLAGS = {
    "qwen2.5": [
        ("<|endoftext|>", True, False, False),
        ("<|im_start|>", True, False, False),
        ("<|im_end|>", True, False, False),
        ("<tool_call>", False, False, False),
        ("</tool_call>", False, False, False),
        ("<|fim_prefix|>", False, False, False),
        ("<|file_sep|>", False, False, False),
    ],
    "phi3": [
        ("<unk>", True, False, False),
        ("<s>", True, False, False),
        ("</s>", False, False, True),
        ("<|endoftext|>", True, False, False),
        ("<|system|>", True, False, True),
        ("<|user|>", True, False, True),
        ("<|assistant|>", True, False, True),
        ("<|end|>", True, False, True),
    ],
    "phi4": [
        ("<|endoftext|>", True, True, True),
        ("<|im_start|>", True, True, True),
        ("<|im_sep|>", True, True, True),
        ("<|im_end|>", True, True, True),
        ("<|dummy_87|>", True, True, True),
    ],
    "gemma2": [
        ("<pad>", True, False, False),
        ("<bos>", True, False, False),
        ("<eos>", True, False, False),
        ("<start_of_turn>", True, False, False),
        ("<end_of_turn>", True, False, False),
    ],
    "deepseek-r1": [
        ("<｜begin▁of▁sentence｜>", True, False, False),
        ("<｜end▁of▁sentence｜>", True, False, False),
        ("<｜User｜>", False, False, False),
        ("<｜Assistant｜>", False, False, False),
        ("<think>", False, False, False),
        ("</think>", False, False, False),
        ("<tool_call>", False, False, False),
    ],
    "smollm2": [
        ("<|endoftext|>", True, False, False),
        ("<|im_start|>", True, False, False),
        ("<|im_end|>", True, False, False),
        ("<empty_output>", True, False, False),
    ],
    "nemotron3-nano": [
        ("<|im_start|>", True, False, False),
        ("<|im_end|>", True, False, False),
        ("<think>", True, False, False),
        ("</think>", True, False, False),
        ("<tool_call>", True, False, False),
    ],
    "nemotron-super": [
        ("<|begin_of_text|>", True, False, False),
        ("<|start_header_id|>", True, False, False),
        ("<|end_header_id|>", True, False, False),
        ("<|eot_id|>", True, False, False),
        ("<|finetune_right_pad_id|>", True, False, False),
    ],
}
CLOSING = {
    "qwen2.5": "<|im_end|>",
    "phi3": "<|end|>",
    "phi4": "<|im_end|>",
    "gemma2": "<end_of_turn>",
    "deepseek-r1": "<｜end▁of▁sentence｜>",
    "smollm2": "<|im_end|>",
    "nemotron3-nano": "<|im_end|>",
    "nemotron-super": "<|eot_id|>",
}
# templates checked byte for byte against a Git LFS pointer of the same llama.cpp file (sha256)
LFS_SHA256 = {
    "phi3": "78d976a442bcde2f0be15aafbb8e3050e1104f86732266f68403251b89982a90",
    "gemma2": "ecd6ae513fe103f0eb62e8ab5bfa8d0fe45c1074fa398b089c93a7e70c15cfd6",
    "nemotron3-nano": "650b9d301337fd103f9014f6f6ae89b46660ae92e4421d95bd3157115e5b02ce",
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "City name"}},
                "required": ["city"],
            },
        },
    }
]


def _hf(path: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)


def _backend(path: Path) -> dict[str, Any]:
    return json.loads((path / "tokenizer.json").read_text(encoding="utf-8"))


def _types(node: dict[str, Any] | None) -> tuple[str, ...]:
    if node is None:
        return ()
    if node["type"] == "Sequence":
        return tuple(p["type"] for p in node.get("pretokenizers") or node.get("normalizers") or [])
    return (node["type"],)


def _conversation(name: str) -> list[dict[str, Any]]:
    system = {"role": "system", "content": "detailed thinking off" if name == "nemotron-super" else "Be brief."}
    turns = [
        {"role": "user", "content": "Hi there! 中文, e\u0301, مرحبا, 12345 😀"},
        {"role": "assistant", "content": "Hello: 3.14 👍🏽"},
    ]
    return turns if name == "gemma2" else [system, *turns]  # Gemma 2's template raises on a system turn


def test_families_are_the_eight_asked_for() -> None:
    assert FAMILIES == (
        "qwen2.5",
        "phi3",
        "phi4",
        "gemma2",
        "deepseek-r1",
        "smollm2",
        "nemotron3-nano",
        "nemotron-super",
    )


@pytest.mark.parametrize("name", FAMILIES)
def test_settings_match_the_family(name: str, family_tokenizer) -> None:
    path = family_tokenizer(name)
    backend = _backend(path)
    config = json.loads((path / "tokenizer_config.json").read_text(encoding="utf-8"))
    normalizer, pre, byte_level = PIPELINES[name]
    assert (backend["normalizer"] or {}).get("type") == normalizer
    assert _types(backend["pre_tokenizer"]) == pre
    model = backend["model"]
    assert model["type"] == "BPE" and model["byte_fallback"] is (not byte_level)
    vocab = set(model["vocab"])
    if byte_level:
        from tokenizers import pre_tokenizers

        assert set(pre_tokenizers.ByteLevel.alphabet()) <= vocab  # all 256 byte symbols
        assert backend["decoder"]["type"] == "ByteLevel" and model["unk_token"] is None
    else:
        assert {f"<0x{b:02X}>" for b in range(256)} <= vocab and model["unk_token"] == "<unk>"
        assert [d["type"] for d in backend["decoder"]["decoders"]][:3] == ["Replace", "ByteFallback", "Fuse"]
    if name == "phi3":
        assert backend["pre_tokenizer"] == {
            "type": "Metaspace",
            "replacement": "▁",
            "prepend_scheme": "first",
            "split": False,
        }
    added = {t["content"]: t for t in backend["added_tokens"]}
    for content, special, lstrip, rstrip in FLAGS[name]:
        token = added[content]
        assert (token["special"], token["lstrip"], token["rstrip"], token["normalized"]) == (
            special,
            lstrip,
            rstrip,
            False,
        ), content
    assert config["tokenizer_class"] == TOKENIZER_CLASS[name]
    assert config["pad_token"] in added  # cook needs a pad token; the family's own
    decoder = {t["content"]: t for t in config["added_tokens_decoder"].values()}
    assert {c: (t["special"], t["rstrip"]) for c, t in decoder.items()} == {
        c: (t["special"], t["rstrip"]) for c, t in added.items()
    }


@pytest.mark.parametrize("name", FAMILIES)
def test_template_is_the_stored_text_verbatim(name: str, family_tokenizer) -> None:
    path = family_tokenizer(name)
    stored = (TEMPLATES / FAMILY_SPECS[name].template).read_bytes()
    config = json.loads((path / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config["chat_template"].encode("utf-8") == stored
    if name in LFS_SHA256:
        assert hashlib.sha256(stored).hexdigest() == LFS_SHA256[name]


@pytest.mark.parametrize("name", FAMILIES)
def test_autotokenizer_loads_with_the_real_flags(name: str, family_tokenizer) -> None:
    hf = _hf(family_tokenizer(name))
    flags = {t.content: t for t in hf.added_tokens_decoder.values()}
    for content, special, lstrip, rstrip in FLAGS[name]:
        assert (flags[content].special, flags[content].lstrip, flags[content].rstrip) == (special, lstrip, rstrip)
    assert hf.pad_token is not None and hf.pad_token_id is not None
    text = "Hello wörld, 中文 e\u0301 مرحبا\u00a0😀"
    nfc = PIPELINES[name][0] == "NFC"  # Qwen2's NFC normalizer composes e + U+0301
    expected = unicodedata.normalize("NFC", text) if nfc else text
    assert hf.decode(hf.encode(text, add_special_tokens=False)) == expected


@pytest.mark.parametrize("name", FAMILIES)
def test_cook_template_mode_loads(name: str, family_tokenizer) -> None:
    tok = ChatTokenizer(str(family_tokenizer(name)), chat_format="template")
    assert tok.pad_id is not None


@pytest.mark.parametrize("name", FAMILIES)
def test_renders_system_user_assistant(name: str, family_tokenizer) -> None:
    hf = _hf(family_tokenizer(name))
    rendered = hf.apply_chat_template(_conversation(name), tokenize=False)
    assert "Hi there! 中文" in rendered and "Hello: 3.14 👍🏽" in rendered
    assert CLOSING[name] in rendered
    if name != "gemma2":
        system = _conversation(name)[0]["content"]
        assert system in rendered
    else:
        from jinja2 import TemplateError

        with pytest.raises(TemplateError, match="System role not supported"):
            hf.apply_chat_template([{"role": "system", "content": "x"}, *_conversation(name)], tokenize=False)


def test_default_system_prompts(family_tokenizer) -> None:
    user = [{"role": "user", "content": "Hi"}]
    qwen = _hf(family_tokenizer("qwen2.5")).apply_chat_template(user, tokenize=False)
    assert qwen.startswith("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.")
    smol = _hf(family_tokenizer("smollm2")).apply_chat_template(user, tokenize=False)
    assert smol.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face")
    nano = _hf(family_tokenizer("nemotron3-nano")).apply_chat_template(user, tokenize=False, add_generation_prompt=True)
    assert nano.endswith("<|im_start|>assistant\n<think>\n")


def test_tools_and_tool_calls_qwen25(family_tokenizer) -> None:
    hf = _hf(family_tokenizer("qwen2.5"))
    messages = [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
        },
        {"role": "tool", "content": '{"temp": 21}'},
        {"role": "assistant", "content": "It is 21 °C."},
    ]
    rendered = hf.apply_chat_template(messages, tools=TOOLS, tokenize=False)
    assert "# Tools" in rendered and '"name": "get_weather"' in rendered
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in rendered
    assert '<tool_response>\n{"temp": 21}\n</tool_response>' in rendered
    ids = hf.apply_chat_template(messages, tools=TOOLS, tokenize=True, return_dict=False)
    assert hf.convert_tokens_to_ids("<tool_call>") in ids  # a non-special added token, matched in text


def test_tools_and_tool_calls_nemotron3_nano(family_tokenizer) -> None:
    hf = _hf(family_tokenizer("nemotron3-nano"))
    messages = [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "The user wants the weather.",
            "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
        },
        {"role": "tool", "content": "21 C"},
        {"role": "assistant", "content": "It is 21 °C."},
    ]
    rendered = hf.apply_chat_template(messages, tools=TOOLS, tokenize=False)
    assert "<tools>\n<function>\n<name>get_weather</name>" in rendered
    assert "<think>\nThe user wants the weather.\n</think>" in rendered
    assert (
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
        in rendered
    )
    assert "<tool_response>\n21 C\n</tool_response>" in rendered
    assert "<|im_start|>assistant\n<think></think>It is 21 °C.<|im_end|>" in rendered


def test_tool_calls_and_think_deepseek_r1(family_tokenizer) -> None:
    from jinja2 import UndefinedError
    from transformers.utils.chat_template_utils import _compile_jinja_template

    hf = _hf(family_tokenizer("deepseek-r1"))
    messages = [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,  # the template's tool-call branch wants exactly this
            "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}],
        },
        {"role": "tool", "content": "21 C"},
        {"role": "assistant", "content": "<think>\nhot?\n</think>\n\nIt is 21 °C."},
    ]
    # transformers 5 drops None-valued keys before rendering, so the original R1 template's tool-call
    # branch (``content is none``) is never taken and ``'</think>' in content`` meets an undefined value
    with pytest.raises(UndefinedError):
        hf.apply_chat_template(messages, tokenize=False)
    rendered = _compile_jinja_template(hf.chat_template).render(messages=messages, **hf.special_tokens_map)
    assert rendered.startswith(
        "<｜begin▁of▁sentence｜><｜User｜>Weather in Paris?<｜Assistant｜><｜tool▁calls▁begin｜>"
    )
    assert 'get_weather\n```json\n{"city": "Paris"}\n```<｜tool▁call▁end｜>' in rendered
    assert "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>21 C<｜tool▁output▁end｜>" in rendered
    # after tool outputs the template keeps the whole content; elsewhere it drops what ends with </think>
    assert rendered.endswith("<｜tool▁outputs▁end｜><think>\nhot?\n</think>\n\nIt is 21 °C.<｜end▁of▁sentence｜>")
    plain = hf.apply_chat_template([messages[0], messages[3]], tokenize=False)
    assert plain.endswith("<｜Assistant｜>\n\nIt is 21 °C.<｜end▁of▁sentence｜>") and "hot?" not in plain


def test_detailed_thinking_system_prompt_nemotron_super(family_tokenizer) -> None:
    hf = _hf(family_tokenizer("nemotron-super"))
    messages = [
        {"role": "system", "content": "detailed thinking on"},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "<think>\nsay hi\n</think>\n\nHello!"},
    ]
    rendered = hf.apply_chat_template(messages, tokenize=False)
    assert rendered == (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\ndetailed thinking on<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
    )


@pytest.mark.parametrize("name", FAMILIES)
def test_cook_ids_equal_apply_chat_template(name: str, family_tokenizer) -> None:
    path = family_tokenizer(name)
    tok = ChatTokenizer(str(path), chat_format="template")
    hf = _hf(path)
    messages = _conversation(name)
    conv = Conversation(f"{name}#1", tuple(Turn(m["role"], (TextPart(m["content"]),)) for m in messages))
    sample = tokenize_batch(tok, [conv], [()], TokenizerConfig(path="unused", chat_format="template"))[0].sample()
    assert sample.input_ids.tolist() == list(hf.apply_chat_template(messages, tokenize=True, return_dict=False))
    targets = [i for i, m in zip(sample.input_ids.tolist(), sample.loss_mask.tolist(), strict=True) if m]
    assert hf.decode(targets).endswith(CLOSING[name])


@pytest.mark.parametrize(
    "name",
    _marked({"smollm2": GPT2_CLASS_REBUILT, "phi4": GPT2_CLASS_REBUILT}),
)
def test_cook_runs_the_family_pre_tokenizer(name: str, family_tokenizer) -> None:
    from tokenizers import Tokenizer

    path = family_tokenizer(name)
    own = Tokenizer.from_file(str(path / "tokenizer.json"))
    cook = ChatTokenizer(str(path), chat_format="template").backend_tokenizer
    for text in ("Call 12345 now", "DON'T stop\n\n\n  here", "x=1;y=22"):
        if own.pre_tokenizer is None:
            assert cook.pre_tokenizer is None
            continue
        assert cook.pre_tokenizer.pre_tokenize_str(text) == own.pre_tokenizer.pre_tokenize_str(text), text


def test_build_is_deterministic_and_idempotent(tmp_path: Path, family_tokenizer) -> None:
    for name in ("qwen2.5", "phi3"):
        first = build(name, tmp_path)
        files = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in first.iterdir()}
        again = build(name, tmp_path)
        assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in again.iterdir()} == files  # untouched
        assert {n: b for n, (b, _) in files.items()} == {
            p.name: p.read_bytes() for p in family_tokenizer(name).iterdir()
        }


TOOL_RECORD = {
    "messages": [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
        },
        {"role": "tool", "content": "21 C"},
        {"role": "assistant", "content": "It is 21 °C."},
    ],
    "tools": TOOLS,
}


@pytest.mark.parametrize("name", ["qwen2.5", "nemotron3-nano"])
def test_cook_ids_equal_apply_chat_template_with_tools_and_tool_calls(name: str, family_tokenizer) -> None:
    from cook.cookers import COOKERS
    from cook.types import RawRecord

    path = family_tokenizer(name)
    hf = _hf(path)
    conv = COOKERS["openai"](RawRecord(f"{name}#tools", json.loads(json.dumps(TOOL_RECORD)), "t"))
    tok = ChatTokenizer(str(path), chat_format="template")
    sample = tokenize_batch(tok, [conv], [()], TokenizerConfig(path="unused", chat_format="template"))[0].sample()
    reference = hf.apply_chat_template(TOOL_RECORD["messages"], tools=TOOLS, tokenize=True, return_dict=False)
    assert sample.input_ids.tolist() == list(reference)
    targets = hf.decode([i for i, m in zip(sample.input_ids.tolist(), sample.loss_mask.tolist(), strict=True) if m])
    assert "get_weather" in targets and targets.endswith("It is 21 °C." + CLOSING[name])
