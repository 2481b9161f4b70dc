"""Real vocabularies converted to Hugging Face tokenizers (tests/assets/real_tokenizers.py): each loads
with AutoTokenizer and with cook's ChatTokenizer in template mode, renders a conversation with its real
chat template, and encodes text to the very ids of the library the vocabulary ships with (tiktoken for
Llama 3, mistral_common's Tekken and SentencePiece tokenizers): the conversion is faithful. For the
Mistral families, template + tokenizer also give mistral_common's own chat encoding, token for token.

Converting the two 128k-entry byte-level vocabularies takes about 6 s each, once per cache (see the
``real_tokenizer`` fixture): their tests are marked slow.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest

from tests.assets import real_tokenizers as rt

BIG = {"llama3.1", "mistral-nemo"}
SENTENCEPIECE = {"mixtral", "mistral-v3", "mistral-v7"}
FAMILIES = [pytest.param(n, marks=pytest.mark.slow) if n in BIG else n for n in rt.REAL_FAMILIES]
MISTRAL = [pytest.param(n, marks=pytest.mark.slow) if n in BIG else n for n in rt.REAL_FAMILIES if n != "llama3.1"]

TEXTS = (
    "Hello world!",
    "naïve café — 日本語 😀 ﷺ",
    "def f(x):\n    return x**2  # 12345\n",
    "[INST] <s> </s> <|eot_id|> <|begin_of_text|> <pad> [TOOL_CALLS] look like markup",
    "trailing  ",
    "\n\nnewlines first",
    "Ünïcödé\u00a0nbsp\u200bzw",
    "x" * 50 + " 1234567890",
    " leading space",
    "  two leading spaces\tand a tab",
)
# SentencePiece always adds its dummy-prefix "▁"; Hugging Face's Metaspace leaves it out when the text
# already starts with one (a space), in transformers 5's rebuilt LlamaTokenizer whatever ``legacy`` says.
# cook follows Hugging Face, so these are compared with it only.
LEADING_SPACE = {t for t in TEXTS if t.startswith(" ")}

CONVERSATIONS = {
    "plain": [("user", "Hi there"), ("assistant", "Hello! How can I help?"), ("user", "Tell me a joke.")],
    "system": [
        ("system", "You are terse."),
        ("user", "Hi there"),
        ("assistant", "Hello! How can I help?"),
        ("user", "Tell me a joke."),
    ],
}


def messages(name: str) -> list[dict[str, str]]:
    return [{"role": role, "content": content} for role, content in CONVERSATIONS[name]]


class Loaded:
    """One family's directory, loaded once for the module: AutoTokenizer, ChatTokenizer, the source."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer
        from transformers import AutoTokenizer

        from cook.tokenize.tokenizer import ChatTokenizer

        self.path = path
        self.name = path.name
        self.config = json.loads((path / "tokenizer_config.json").read_text(encoding="utf-8"))
        self.hf: Any = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        self.chat = ChatTokenizer(str(path), chat_format="template")
        self.file = Tokenizer.from_file(str(path / "tokenizer.json"))  # the tokenizer.json as written
        self.file.encode_special_tokens = True
        self.runtime = Tokenizer.from_str(self.hf.backend_tokenizer.to_str())  # as AutoTokenizer runs it
        self.runtime.encode_special_tokens = True

    @cached_property
    def source(self) -> Any:
        """The vocabulary's own library: tiktoken (via llama_models) or mistral_common."""
        if self.name == "llama3.1":
            from llama_models.llama3.tokenizer import Tokenizer as MetaTokenizer

            return MetaTokenizer(rt.llama3_model_file())
        from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

        return MistralTokenizer.from_file(str(rt.source_file(self.name)))

    def source_encoder(self) -> Callable[[str], list[int]]:
        """Plain text -> ids, markup-looking text spelled as text (as cook encodes data text)."""
        source = self.source
        if self.name == "llama3.1":
            return lambda text: list(source.model.encode(text, allowed_special=set(), disallowed_special=()))
        inner = source.instruct_tokenizer.tokenizer
        return lambda text: list(inner.encode(text, bos=False, eos=False))


@pytest.fixture(scope="module")
def loaded(real_tokenizer: Callable[[str], Path]) -> Callable[[str], Loaded]:
    cache: dict[str, Loaded] = {}

    def get(name: str) -> Loaded:
        if name not in cache:
            cache[name] = Loaded(real_tokenizer(name))
        return cache[name]

    return get


def test_templates_are_the_recorded_verbatim_copies() -> None:
    sources = (rt.TEMPLATES / "SOURCES.md").read_text(encoding="utf-8")
    for name in rt.REAL_FAMILIES:
        data = (rt.TEMPLATES / f"{name}.jinja").read_bytes()
        assert hashlib.sha256(data).hexdigest() == rt.TEMPLATE_SHA256[name], name
        assert rt.TEMPLATE_SHA256[name] in sources and f"`{name}.jinja`" in sources
        assert rt.TEMPLATE_SOURCES[name]


@pytest.mark.parametrize("name", FAMILIES)
def test_loads_with_its_template_and_pad(loaded: Callable[[str], Loaded], name: str) -> None:
    family = loaded(name)
    hf, config = family.hf, family.config
    assert hf.chat_template == config["chat_template"] == rt.template_text(name)
    assert hf.pad_token == config["pad_token"] and hf.pad_token_id is not None
    assert family.chat.pad_id == hf.pad_token_id
    assert family.chat.vocab_size == len(hf)
    assert hf.bos_token == config["bos_token"] and hf.eos_token == config["eos_token"]
    # every added token carries the flags the config declares (cook reads either file)
    added = {str(i): t for i, t in hf.added_tokens_decoder.items()}
    for index, declared in config["added_tokens_decoder"].items():
        token = added[index]
        assert token.content == declared["content"]
        assert (token.special, token.lstrip, token.rstrip, token.normalized) == (
            declared["special"],
            declared["lstrip"],
            declared["rstrip"],
            declared["normalized"],
        )


@pytest.mark.parametrize("name", FAMILIES)
def test_renders_a_two_turn_conversation(loaded: Callable[[str], Loaded], name: str) -> None:
    hf = loaded(name).hf
    text = hf.apply_chat_template(messages("plain"), tokenize=False)
    assert text.startswith(hf.bos_token)
    for _, content in CONVERSATIONS["plain"]:
        assert content in text
    assert "Hello! How can I help?" + hf.eos_token in text  # the assistant turn closes with eos
    with_system = hf.apply_chat_template(messages("system"), tokenize=False, add_generation_prompt=True)
    assert "You are terse." in with_system


@pytest.mark.parametrize("name", FAMILIES)
def test_conversion_encodes_like_the_source_library(loaded: Callable[[str], Loaded], name: str) -> None:
    family = loaded(name)
    encode = family.source_encoder()
    for text in TEXTS:
        expected = encode(text)
        cook_ids = family.chat.encode_first([text])[0]  # a run at offset 0, as the source sees it
        runtime = family.runtime.encode(text, add_special_tokens=False).ids
        if name in SENTENCEPIECE and text in LEADING_SPACE:
            assert cook_ids == runtime != expected  # the one known HF / SentencePiece difference
            continue
        assert family.file.encode(text, add_special_tokens=False).ids == expected, text
        assert runtime == expected, text
        assert cook_ids == expected, text


@pytest.mark.slow
def test_llama31_special_tokens_are_metas() -> None:
    from llama_models.llama3.tokenizer import Tokenizer as MetaTokenizer

    meta = MetaTokenizer(rt.llama3_model_file()).special_tokens
    ours = {token: 128000 + i for i, token in enumerate(rt.LLAMA31_SPECIAL_TOKENS)}
    assert len(ours) == 256 and max(ours.values()) == 128255
    # llama-models 0.3.0 lists the later Llama 3.2 tokens (<|step_id|> at 128005, <|image|> at 128011, so
    # its reserved_N are numbered differently); every named Llama 3.1 token sits at Meta's id
    named = [t for t in rt.LLAMA31_NAMED if "reserved" not in t]
    assert len(named) == 8 and all(meta[t] == ours[t] for t in named)
    assert meta["<|reserved_special_token_0|>"] == 128002 and meta["<|reserved_special_token_1|>"] == 128003


@pytest.mark.slow
def test_llama31_rendered_chat_encodes_like_tiktoken(loaded: Callable[[str], Loaded]) -> None:
    family = loaded("llama3.1")
    source = family.source
    text = family.hf.apply_chat_template(messages("system"), tokenize=False, add_generation_prompt=True)
    assert "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n" in text
    ids = family.hf(text, add_special_tokens=False)["input_ids"]
    assert ids == source.model.encode(text, allowed_special="all")
    assert ids[0] == 128000 and ids[-4:] == [128006, 78191, 128007, 271]  # <|start_header_id|>assistant...


@pytest.mark.parametrize("name", MISTRAL)
@pytest.mark.parametrize("conversation", sorted(CONVERSATIONS))
def test_mistral_chat_matches_mistral_common(loaded: Callable[[str], Loaded], name: str, conversation: str) -> None:
    """The real template through the converted tokenizer = mistral_common's own instruct encoding."""
    from mistral_common.protocol.instruct.messages import AssistantMessage, SystemMessage, UserMessage
    from mistral_common.protocol.instruct.request import ChatCompletionRequest

    family = loaded(name)
    kinds: dict[str, Any] = {"user": UserMessage, "assistant": AssistantMessage, "system": SystemMessage}
    request = ChatCompletionRequest(messages=[kinds[r](content=c) for r, c in CONVERSATIONS[conversation]])
    expected = family.source.encode_chat_completion(request).tokens
    text = family.hf.apply_chat_template(messages(conversation), tokenize=False)
    assert family.hf(text, add_special_tokens=False)["input_ids"] == expected
