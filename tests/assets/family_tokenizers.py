"""Small test tokenizers that carry each model family's REAL tokenizer settings and REAL chat template.

    build(name, out) -> out/<name>/   (tokenizer.json, tokenizer_config.json; idempotent, deterministic)

The vocabulary is small: a BPE trained with ``tokenizers`` on the fixed corpus below (ASCII, NBSP, CJK,
RTL, emoji, combining marks), run through the family's own normalizer and pre-tokenizer. Every byte is
covered: byte-level families carry the 256 byte symbols, SentencePiece-style ones the 256 byte-fallback
tokens ``<0x00>`` .. ``<0xFF>``. What is the family's own: the model type (byte-level BPE, or BPE with
``byte_fallback`` and ``<unk>``), normalizer, pre-tokenizer, decoder, post-processor, the added tokens
(their real strings, in the real order, with their real ``special`` / ``lstrip`` / ``rstrip`` /
``normalized`` flags, non-special ones such as Qwen2.5's ``<tool_call>`` included), ``tokenizer_class``,
bos/eos/pad/unk and the chat template, verbatim, from ``family_templates/<name>.jinja``. The ids are
NOT the real ones (the vocabulary is small); a family's added tokens only keep their relative order.
Families with many reserved placeholders (Llama-3's 248 reserved tokens, Phi-4's ``<|dummy_N|>``,
Gemma's ``<unusedN>``) carry the named ones and the few placeholders the config refers to.

Transformers 5 rebuilds the normalizer, pre-tokenizer and decoder of a model-specific
``tokenizer_class`` (``Qwen2Tokenizer``, ``LlamaTokenizer``, ``GemmaTokenizer``) in its own ``__init__``
and keeps only the vocabulary, merges, added tokens and post-processor of ``tokenizer.json``; for
those three the pipelines written here are the ones the classes build, so the directory loads the same
through ``tokenizers`` alone and through ``AutoTokenizer``. DeepSeek-R1-Distill-Qwen's real config
names ``LlamaTokenizerFast`` over a Qwen2 byte-level ``tokenizer.json``: kept, transformers 5 notices
the mismatch and loads the file as it is. SmolLM2 and Phi-4 name ``GPT2Tokenizer``, whose ``__init__``
rebuilds a plain ``ByteLevel(use_regex=True)`` pre-tokenizer: their ``tokenizer.json`` keeps the real
``Digits`` / cl100k ``Split``, and AutoTokenizer (so cook, which loads such a directory through it)
runs GPT-2's regex instead, as it does for the real models.

Template sources (the file under ``family_templates/`` is the template byte for byte as found there):

* ``qwen2.5``: ggerganov/llama.cpp ``tests/chat/templates/Qwen-Qwen2.5-7B-Instruct.jinja`` (commit
  eaca756ecca033e6fdd241dad091974a2c0354ff), the Qwen/Qwen2.5-7B-Instruct template.
* ``phi3``: ggerganov/llama.cpp ``models/templates/microsoft-Phi-3.5-mini-instruct.jinja`` (commit
  7b5e0803c84435e8005725d8f9ddceb5d1820443); sha256 78d976a4...2a90, equal to the Git LFS pointer of
  the same path in Raudbjorn/ggml-llama.cpp (2b949f3de915a6434404caada3b6ff39c3890115).
* ``phi4``: the microsoft/phi-4 template as quoted in Red-Hat-AI-Innovation-Team/sdg_hub
  ``src/sdg_hub/prompts.py`` (PromptRegistry "microsoft/phi-4"; the later revision, with
  ``add_generation_prompt``); the same string is quoted in several other public repositories.
* ``gemma2``: ye-NX/llama.cpp ``models/templates/google-gemma-2-2b-it.jinja`` (commit
  b354d7c9ecb76c97c07098617cdebbdfffa2583e); sha256 ecd6ae51...cfd6, equal to the Git LFS pointer
  of the same path in Raudbjorn/ggml-llama.cpp. It raises on a system message (the real one does).
* ``deepseek-r1``: the ``chat_template`` of deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B's
  tokenizer_config.json as quoted whole in a public issue-style markdown file (the original release,
  generation prompt ``<｜Assistant｜>``; the later HF revision appends ``<think>\\n``). llama.cpp's
  ``deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja`` is a reformatted, edited copy, not used.
* ``smollm2``: the HuggingFaceTB/SmolLM2-*-Instruct template, identical in many public copies, e.g.
  a test that reads it back from the SmolLM2-135M-Instruct GGUF (the 1.7B-Instruct has the same).
  Its ``\\n`` are real newlines inside the Jinja string literals, as in the HF JSON.
* ``nemotron3-nano``: zommiommy/llama.cpp ``models/templates/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja``
  (commit a2c9fce98399d2ad9a22f892927307e4ca93a4a4), CRLF line endings kept; sha256 650b9d30...02ce,
  equal to the Git LFS pointer in Raudbjorn/ggml-llama.cpp (0ae4fc2a46e66dcbe5699f7c48b86145d018f043).
* ``nemotron-super``: the nvidia/Llama-3_3-Nemotron-Super-49B-v1 template ("detailed thinking on/off"
  goes in the system message) as quoted in a Megatron-LM fork's
  ``megatron/training/tokenizer/multimodal_tokenizer.py`` (``llama_nemotron_super_template``). Its
  ``\\n`` are real newlines inside the Jinja string literals (the HF JSON may escape them; the
  rendering is the same).

Tokenizer settings come from the real tokenizer.json / tokenizer_config.json as quoted in public
repositories (Qwen2.5 and DeepSeek-R1-Distill-Qwen: whole added-token tables and pipelines; Phi-3.5:
the whole added_tokens_decoder; SmolLM2: its 17 special tokens and pre-tokenizer; Phi-4: its
config values) and from transformers 5's own tokenizer classes. See ``FAMILY_NOTES`` for what is
assumed rather than established.

Run from the repository root to (re)build every family into a folder and print a rendering::

    .venv/bin/python tests/assets/family_tokenizers.py /tmp/family_tokenizers
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TEMPLATES = Path(__file__).resolve().parent / "family_templates"

# ---------------------------------------------------------------- pipeline pieces (tokenizers JSON)
QWEN2_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Llama-3's regex is cl100k's (tiktoken), \p{N}{1,3}; Phi-4 carries cl100k too.
CL100K_REGEX = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
# Mistral-NeMo "tekken" (131072-vocabulary) regex, the base of the Nemotron-H / Nemotron 3 tokenizers
TEKKEN_REGEX = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|"
    r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def _byte_level(add_prefix_space: bool = False, trim_offsets: bool = True, use_regex: bool = False) -> dict[str, Any]:
    return {
        "type": "ByteLevel",
        "add_prefix_space": add_prefix_space,
        "trim_offsets": trim_offsets,
        "use_regex": use_regex,
    }


def _split(regex: str) -> dict[str, Any]:
    return {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False}


def _bos_template(bos: str) -> dict[str, Any]:
    """``TemplateProcessing``: ``bos $A`` (and ``bos $A bos $B``), ids filled in by ``_finish``."""
    return {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [
            {"SpecialToken": {"id": bos, "type_id": 0}},
            {"Sequence": {"id": "A", "type_id": 0}},
            {"SpecialToken": {"id": bos, "type_id": 1}},
            {"Sequence": {"id": "B", "type_id": 1}},
        ],
        "special_tokens": {bos: {"id": bos, "ids": [0], "tokens": [bos]}},
    }


SP_DECODER = {
    "type": "Sequence",
    "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
        {"type": "ByteFallback"},
        {"type": "Fuse"},
    ],
}


@dataclass(frozen=True)
class Added:
    """One added token with the flags the real tokenizer.json gives it."""

    content: str
    special: bool = True
    lstrip: bool = False
    rstrip: bool = False
    normalized: bool = False
    single_word: bool = False


@dataclass(frozen=True)
class Family:
    template: str  # file name under family_templates/
    byte_level: bool  # byte-level BPE (256 byte symbols) or SentencePiece-style BPE with byte_fallback
    normalizer: dict[str, Any] | None
    pre_tokenizer: dict[str, Any] | None
    decoder: dict[str, Any]
    post_processor: dict[str, Any] | None
    leading: tuple[Added, ...]  # tokens at the start of the vocabulary (ids 0..), in the model vocab too
    trailing: tuple[Added, ...]  # added tokens after the trained vocabulary, in the real order
    config: dict[str, Any]  # tokenizer_config.json values besides chat_template / added_tokens_decoder
    unk: str | None = None  # the BPE model's unk_token (SentencePiece-style only)
    ignore_merges: bool = False
    leading_bytes: bool = True  # SentencePiece-style: byte tokens right after the leading tokens
    extra_words: tuple[str, ...] = field(default_factory=tuple)  # family words for the corpus


def _specials(*names: str, **flags: bool) -> tuple[Added, ...]:
    return tuple(Added(n, **flags) for n in names)


QWEN25_TRAILING = (
    *_specials(
        "<|endoftext|>",
        "<|im_start|>",
        "<|im_end|>",
        "<|object_ref_start|>",
        "<|object_ref_end|>",
        "<|box_start|>",
        "<|box_end|>",
        "<|quad_start|>",
        "<|quad_end|>",
        "<|vision_start|>",
        "<|vision_end|>",
        "<|vision_pad|>",
        "<|image_pad|>",
        "<|video_pad|>",
    ),
    *_specials(
        "<tool_call>",
        "</tool_call>",
        "<|fim_prefix|>",
        "<|fim_middle|>",
        "<|fim_suffix|>",
        "<|fim_pad|>",
        "<|repo_name|>",
        "<|file_sep|>",
        special=False,
    ),
)
QWEN2_PRE = {"type": "Sequence", "pretokenizers": [_split(QWEN2_REGEX), _byte_level(trim_offsets=False)]}
QWEN2_DECODER = _byte_level(trim_offsets=False)

DEEPSEEK_BOS, DEEPSEEK_EOS = "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"
DEEPSEEK_TRAILING = (
    Added(DEEPSEEK_EOS),
    Added("<｜User｜>", special=False),
    Added("<｜Assistant｜>", special=False),
    Added(DEEPSEEK_BOS),
    Added("<|EOT|>", special=False),
    Added("<think>", special=False),
    Added("</think>", special=False),
    *_specials(
        "<|quad_start|>",
        "<|quad_end|>",
        "<|vision_start|>",
        "<|vision_end|>",
        "<|vision_pad|>",
        "<|image_pad|>",
        "<|video_pad|>",
    ),
    *_specials(
        "<tool_call>",
        "</tool_call>",
        "<|fim_prefix|>",
        "<|fim_middle|>",
        "<|fim_suffix|>",
        "<|fim_pad|>",
        "<|repo_name|>",
        "<|file_sep|>",
        special=False,
    ),
)

PHI3_TRAILING = (
    Added("<|endoftext|>"),
    *_specials(
        "<|assistant|>",
        "<|placeholder1|>",
        "<|placeholder2|>",
        "<|placeholder3|>",
        "<|placeholder4|>",
        "<|system|>",
        "<|end|>",
        "<|placeholder5|>",
        "<|placeholder6|>",
        "<|user|>",
        rstrip=True,
    ),
)

# Phi-4 (cl100k base): ids 100256.. are <|dummy_0|>, <|endoftext|>, the FIM tokens, <|dummy_1..3|>,
# <|im_start|>, <|im_end|>, <|im_sep|>, more dummies; every one lstrip and rstrip. The real pad is
# <|dummy_87|> (the last id, 100351); only the dummies next to named tokens and the pad are kept.
PHI4_TRAILING = _specials(
    "<|dummy_0|>",
    "<|endoftext|>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|dummy_1|>",
    "<|dummy_2|>",
    "<|dummy_3|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|im_sep|>",
    "<|dummy_87|>",
    lstrip=True,
    rstrip=True,
)

GEMMA_LEADING = _specials("<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "[@BOS@]", "<unused0>")
GEMMA_TURNS = _specials("<start_of_turn>", "<end_of_turn>")

SMOLLM2_LEADING = _specials(
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<repo_name>",
    "<reponame>",
    "<file_sep>",
    "<filename>",
    "<gh_stars>",
    "<issue_start>",
    "<issue_comment>",
    "<issue_closed>",
    "<jupyter_start>",
    "<jupyter_text>",
    "<jupyter_code>",
    "<jupyter_output>",
    "<jupyter_script>",
    "<empty_output>",
)

# Llama-3.x: 256 special tokens from 128000, all special; the reserved ones are mostly left out here.
LLAMA3_TRAILING = _specials(
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|reserved_special_token_0|>",
    "<|reserved_special_token_1|>",
    "<|finetune_right_pad_id|>",
    "<|reserved_special_token_2|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eom_id|>",
    "<|eot_id|>",
    "<|python_tag|>",
)

NANO_LEADING = _specials("<unk>", "<s>", "</s>")
NANO_TRAILING = _specials(
    "<|im_start|>",
    "<|im_end|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
)

FAMILY_SPECS: dict[str, Family] = {
    "qwen2.5": Family(
        template="qwen2.5.jinja",
        byte_level=True,
        normalizer={"type": "NFC"},
        pre_tokenizer=QWEN2_PRE,
        decoder=QWEN2_DECODER,
        post_processor=_byte_level(trim_offsets=False),
        leading=(),
        trailing=QWEN25_TRAILING,
        config={
            "tokenizer_class": "Qwen2Tokenizer",
            "bos_token": None,
            "eos_token": "<|im_end|>",
            "pad_token": "<|endoftext|>",
            "unk_token": None,
            "add_prefix_space": False,
            "errors": "replace",
            "split_special_tokens": False,
            "model_max_length": 131072,
            "clean_up_tokenization_spaces": False,
            "additional_special_tokens": [t.content for t in QWEN25_TRAILING[1:14]],
        },
        extra_words=("Qwen", "Alibaba", "Cloud", "tools", "function", "arguments"),
    ),
    "phi3": Family(
        template="phi3.jinja",
        byte_level=False,
        normalizer=None,
        pre_tokenizer={"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False},
        decoder={
            "type": "Sequence",
            "decoders": [*SP_DECODER["decoders"], {"type": "Strip", "content": " ", "start": 1, "stop": 0}],
        },
        post_processor=None,  # Phi-3.5-mini: add_bos_token false
        leading=(Added("<unk>"), Added("<s>"), Added("</s>", special=False, rstrip=True)),
        trailing=PHI3_TRAILING,
        unk="<unk>",
        config={
            "tokenizer_class": "LlamaTokenizer",
            "bos_token": "<s>",
            "eos_token": "<|endoftext|>",
            "pad_token": "<|endoftext|>",
            "unk_token": "<unk>",
            "add_bos_token": False,
            "add_eos_token": False,
            "legacy": False,
            "model_max_length": 131072,
            "padding_side": "left",
            "sp_model_kwargs": {},
            "use_default_system_prompt": False,
            "clean_up_tokenization_spaces": False,
        },
        extra_words=("Phi", "Microsoft"),
    ),
    "phi4": Family(
        template="phi4.jinja",
        byte_level=True,
        normalizer=None,
        pre_tokenizer={"type": "Sequence", "pretokenizers": [_split(CL100K_REGEX), _byte_level()]},
        decoder=_byte_level(),
        post_processor=None,
        leading=(),
        trailing=PHI4_TRAILING,
        config={
            "tokenizer_class": "GPT2Tokenizer",
            "bos_token": "<|endoftext|>",
            "eos_token": "<|im_end|>",
            "pad_token": "<|dummy_87|>",
            "unk_token": "<|endoftext|>",
            "add_bos_token": False,
            "add_prefix_space": False,
            "errors": "replace",
            "model_max_length": 16384,
            "padding_side": "left",
            "clean_up_tokenization_spaces": False,
        },
        extra_words=("Phi", "Microsoft"),
    ),
    "gemma2": Family(
        template="gemma2.jinja",
        byte_level=False,
        normalizer={"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
        pre_tokenizer={"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious", "invert": False},
        decoder=SP_DECODER,
        post_processor=_bos_template("<bos>"),
        leading=(*GEMMA_LEADING, *GEMMA_TURNS),
        trailing=(),
        unk="<unk>",
        config={
            "tokenizer_class": "GemmaTokenizer",
            "bos_token": "<bos>",
            "eos_token": "<eos>",
            "pad_token": "<pad>",
            "unk_token": "<unk>",
            "add_bos_token": True,
            "add_eos_token": False,
            "additional_special_tokens": ["<start_of_turn>", "<end_of_turn>"],
            "model_max_length": 1000000000000000019884624838656,
            "padding_side": "left",
            "sp_model_kwargs": {},
            "spaces_between_special_tokens": False,
            "use_default_system_prompt": False,
            "clean_up_tokenization_spaces": False,
        },
        extra_words=("Gemma", "model"),
    ),
    "deepseek-r1": Family(
        template="deepseek-r1.jinja",
        byte_level=True,
        normalizer={"type": "NFC"},
        pre_tokenizer=QWEN2_PRE,
        decoder=QWEN2_DECODER,
        post_processor=_bos_template(DEEPSEEK_BOS),
        leading=(),
        trailing=DEEPSEEK_TRAILING,
        config={
            "tokenizer_class": "LlamaTokenizerFast",
            "bos_token": DEEPSEEK_BOS,
            "eos_token": DEEPSEEK_EOS,
            "pad_token": DEEPSEEK_EOS,
            "unk_token": None,
            "add_bos_token": True,
            "add_eos_token": False,
            "legacy": True,
            "model_max_length": 16384,
            "sp_model_kwargs": {},
            "use_default_system_prompt": False,
            "clean_up_tokenization_spaces": False,
        },
        extra_words=("think", "reasoning", "DeepSeek"),
    ),
    "smollm2": Family(
        template="smollm2.jinja",
        byte_level=True,
        normalizer=None,
        pre_tokenizer={
            "type": "Sequence",
            "pretokenizers": [{"type": "Digits", "individual_digits": True}, _byte_level(use_regex=True)],
        },
        decoder=_byte_level(add_prefix_space=True, use_regex=True),
        post_processor=_byte_level(add_prefix_space=True, trim_offsets=False, use_regex=True),
        leading=SMOLLM2_LEADING,
        trailing=(),
        config={
            "tokenizer_class": "GPT2Tokenizer",
            "bos_token": "<|im_start|>",
            "eos_token": "<|im_end|>",
            "pad_token": "<|im_end|>",
            "unk_token": "<|endoftext|>",
            "add_prefix_space": False,
            "model_max_length": 8192,
            "vocab_size": 49152,
            "clean_up_tokenization_spaces": False,
            "additional_special_tokens": ["<|im_start|>", "<|im_end|>"],
        },
        extra_words=("SmolLM", "Hugging", "Face"),
    ),
    "nemotron3-nano": Family(
        template="nemotron3-nano.jinja",
        byte_level=True,
        normalizer=None,
        pre_tokenizer={"type": "Sequence", "pretokenizers": [_split(TEKKEN_REGEX), _byte_level()]},
        decoder=_byte_level(),
        post_processor=_bos_template("<s>"),
        leading=NANO_LEADING,
        trailing=NANO_TRAILING,
        config={
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": "<s>",
            "eos_token": "<|im_end|>",
            "pad_token": "<unk>",
            "unk_token": "<unk>",
            "add_bos_token": False,
            "add_eos_token": False,
            "model_max_length": 262144,
            "clean_up_tokenization_spaces": False,
        },
        extra_words=("function", "parameter", "Nemotron", "NVIDIA"),
    ),
    "nemotron-super": Family(
        template="nemotron-super.jinja",
        byte_level=True,
        normalizer=None,
        pre_tokenizer={"type": "Sequence", "pretokenizers": [_split(CL100K_REGEX), _byte_level()]},
        decoder=_byte_level(add_prefix_space=True, use_regex=True),
        post_processor={
            "type": "Sequence",
            "processors": [
                _byte_level(add_prefix_space=True, trim_offsets=False, use_regex=True),
                _bos_template("<|begin_of_text|>"),
            ],
        },
        leading=(),
        trailing=LLAMA3_TRAILING,
        ignore_merges=True,
        config={
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": "<|begin_of_text|>",
            "eos_token": "<|eot_id|>",
            "pad_token": "<|finetune_right_pad_id|>",
            "model_input_names": ["input_ids", "attention_mask"],
            "model_max_length": 131072,
            "clean_up_tokenization_spaces": True,
        },
        extra_words=("detailed", "thinking", "Llama", "Nemotron"),
    ),
}
FAMILIES: tuple[str, ...] = tuple(FAMILY_SPECS)

# What each family carries and what is assumed rather than established (see the module docstring).
FAMILY_NOTES: dict[str, str] = {
    "qwen2.5": "added-token table and pipeline as quoted from the real files; established",
    "phi3": "Phi-3.5-mini config quoted whole; Metaspace(first, split=False) is what transformers 5's "
    "LlamaTokenizer builds (the real tokenizer.json's own normalizer is not reproduced)",
    "phi4": "config values (bos/eos/pad/unk, lstrip+rstrip on 100256..) from a public copy; cl100k Split "
    "behaviour 'Isolated' and ByteLevel flags assumed (Llama-3 style)",
    "gemma2": "pipeline is transformers 5 GemmaTokenizer's; Gemma's non-special user-defined added tokens "
    "(whitespace runs, HTML tags) and most <unusedN> omitted",
    "deepseek-r1": "added-token table, pipeline, config and template quoted whole from a public copy",
    "smollm2": "17 specials and Digits+ByteLevel pre-tokenizer established; bos/eos/pad from memory of the "
    "1.7B-Instruct config",
    "nemotron3-nano": "template established; tokenizer ASSUMED: tekken-style byte-level BPE, <think>, "
    "<tool_call> etc. special, pad=<unk>",
    "nemotron-super": "Llama-3 tokenizer (established for Llama 3.3); pad <|finetune_right_pad_id|> chosen "
    "(Llama 3.3 defines none)",
}

# ---------------------------------------------------------------- corpus and training
CORPUS_LINES = (
    "Hello, how are you today? I am fine, thank you.",
    "The quick brown fox jumps over the lazy dog. 0123456789",
    "Please answer the question: what is 17 * 23? The answer is 391.",
    "def add(a, b):\n    return a + b\n\nprint(add(2, 3))",
    '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}',
    "You are a helpful assistant. Think step by step before you answer.",
    "It's a test; we'll see what they've done, isn't it?",
    "Tabs\tand\nnew lines\r\nand  double  spaces   here.",
    "non\u00a0breaking\u00a0space and\u202fnarrow one",
    "中文测试：你好，世界！这是一个分词器。日本語のテキストとカタカナ。한국어 텍스트입니다.",
    "مرحبا بالعالم، هذا اختبار. שלום עולם, זה מבחן.",
    "Emoji: 😀 👍🏽 🇺🇸 ❤️ 🤖 and a family 👨‍👩‍👧.",
    "Combining marks: e\u0301 a\u0308 n\u0303 \u1e9b\u0323 and Café naïve résumé façade Ångström.",
    "Mathematics: ∑ x² ≤ ∞, α β γ δ, 3.14159 and 1,000,000.",
    "<html><body><h1>Title</h1><p>Paragraph</p></body></html>",
    "Россия и Україна, Ελληνικά, ქართული, हिन्दी, ไทย.",
)


def corpus(extra: tuple[str, ...]) -> list[str]:
    words = " ".join(extra)
    return [f"{line} {words}" if i % 3 == 0 else line for i, line in enumerate(CORPUS_LINES * 8)]


def _byte_tokens() -> list[str]:
    return [f"<0x{b:02X}>" for b in range(256)]


def _train(fam: Family) -> tuple[dict[str, int], list[list[str]]]:
    """Trained (vocab, merges), pieces only (no specials), with the family's own normalizer and pre-tokenizer."""
    from tokenizers import Tokenizer, trainers

    probe: dict[str, Any] = {
        "version": "1.0",
        "added_tokens": [],
        "normalizer": fam.normalizer,
        "pre_tokenizer": fam.pre_tokenizer,
        "post_processor": None,
        "decoder": None,
        "model": {"type": "BPE", "vocab": {}, "merges": [], "byte_fallback": not fam.byte_level},
    }
    if not fam.byte_level:  # train on words (merges stay within one, as SentencePiece's do)
        prepend = (fam.pre_tokenizer or {}).get("prepend_scheme", "never")
        probe["pre_tokenizer"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": prepend, "split": True}
    tok = Tokenizer.from_str(json.dumps(probe))
    if fam.byte_level:
        from tokenizers import pre_tokenizers

        trainer = trainers.BpeTrainer(
            vocab_size=1200, min_frequency=2, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
        )
    else:
        trainer = trainers.BpeTrainer(vocab_size=900, min_frequency=2, limit_alphabet=400, show_progress=False)
    tok.train_from_iterator(corpus(fam.extra_words), trainer=trainer)
    data = json.loads(tok.to_str())
    vocab = sorted(data["model"]["vocab"].items(), key=lambda kv: kv[1])
    merges = [m.split(" ", 1) if isinstance(m, str) else list(m) for m in data["model"]["merges"]]
    return dict(vocab), merges


def _added_entry(token: Added, token_id: int) -> dict[str, Any]:
    return {
        "id": token_id,
        "content": token.content,
        "single_word": token.single_word,
        "lstrip": token.lstrip,
        "rstrip": token.rstrip,
        "normalized": token.normalized,
        "special": token.special,
    }


def tokenizer_json(name: str) -> dict[str, Any]:
    fam = FAMILY_SPECS[name]
    pieces, merges = _train(fam)
    ordered: list[str] = [t.content for t in fam.leading]
    if not fam.byte_level and fam.leading_bytes:
        ordered += _byte_tokens()
    ordered += [p for p in pieces if p not in ordered]
    vocab = {piece: i for i, piece in enumerate(ordered)}
    ids = {t.content: vocab[t.content] for t in fam.leading}
    for n, token in enumerate(fam.trailing):
        ids[token.content] = len(vocab) + n
    if not fam.byte_level:  # SentencePiece-style models keep every added token in the model vocabulary
        vocab.update({t.content: ids[t.content] for t in fam.trailing})
    added = [_added_entry(t, ids[t.content]) for t in (*fam.leading, *fam.trailing)]
    post = json.loads(json.dumps(fam.post_processor))
    for proc in [post] if post is None or post.get("type") != "Sequence" else post["processors"]:
        if proc and proc.get("type") == "TemplateProcessing":
            for token, spec in proc["special_tokens"].items():
                spec["ids"] = [ids[token]]
    model: dict[str, Any] = {
        "type": "BPE",
        "dropout": None,
        "unk_token": fam.unk,
        "continuing_subword_prefix": None if not fam.byte_level else "",
        "end_of_word_suffix": None if not fam.byte_level else "",
        "fuse_unk": not fam.byte_level,
        "byte_fallback": not fam.byte_level,
        "ignore_merges": fam.ignore_merges,
        "vocab": vocab,
        "merges": [m for m in merges if "".join(m) in vocab],
    }
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": fam.normalizer,
        "pre_tokenizer": fam.pre_tokenizer,
        "post_processor": post,
        "decoder": fam.decoder,
        "model": model,
    }


def tokenizer_config(name: str, backend: dict[str, Any]) -> dict[str, Any]:
    fam = FAMILY_SPECS[name]
    decoder = {
        str(t["id"]): {k: t[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word", "special")}
        for t in backend["added_tokens"]
    }
    template = (TEMPLATES / fam.template).read_bytes().decode("utf-8")
    return {"added_tokens_decoder": decoder, **fam.config, "chat_template": template}


def _write_if_changed(path: Path, text: str) -> None:
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".")
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def build(name: str, out: Path) -> Path:
    """Write the family's tokenizer directory ``out/<name>/`` and return it (idempotent, deterministic)."""
    if name not in FAMILY_SPECS:
        raise KeyError(f"unknown family {name!r}; known: {', '.join(FAMILIES)}")
    from tokenizers import Tokenizer

    backend = tokenizer_json(name)
    text = json.dumps(backend, ensure_ascii=False, indent=1) + "\n"
    Tokenizer.from_str(text)  # it loads
    directory = Path(out) / name
    directory.mkdir(parents=True, exist_ok=True)
    _write_if_changed(directory / "tokenizer.json", text)
    config = json.dumps(tokenizer_config(name, backend), ensure_ascii=False, indent=2) + "\n"
    _write_if_changed(directory / "tokenizer_config.json", config)
    return directory


def main(argv: list[str]) -> None:
    from transformers import AutoTokenizer

    out = Path(argv[1] if len(argv) > 1 else tempfile.mkdtemp(prefix="family_tokenizers."))
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]
    for name in FAMILIES:
        directory = build(name, out)
        tok = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
        print(name, directory, len(tok), repr(tok.apply_chat_template(messages, tokenize=False)))


if __name__ == "__main__":
    main(sys.argv)
