"""Real model vocabularies from PyPI packages, converted to Hugging Face tokenizer directories.

Run from the repository root to build every family into a directory::

    .venv/bin/python tests/assets/real_tokenizers.py OUT_DIR

or, from a test, ``build(name, out)`` -> ``out/<name>/`` (what ``tests/conftest.py``'s
``real_tokenizer`` fixture does, once per cache). Nothing here reaches a model hub: each vocabulary
ships inside a pinned PyPI package (the ``test`` extra of ``pyproject.toml``), and each conversion is
transformers' own converter. The generated ``tokenizer.json`` files (2-18 MB) are never committed.

Families (``REAL_FAMILIES``), each the real vocabulary with the real model's chat template (verbatim,
``real_templates/<name>.jinja``; sources in ``TEMPLATE_SOURCES`` and ``real_templates/SOURCES.md``):

* ``llama3.1``: Meta-Llama-3.1-8B-Instruct. The Llama 3 tiktoken BPE (``llama_models/llama3/tokenizer.model``
  of ``llama-models``, 128000 ranks) through ``TikTokenConverter`` with the Llama 3 split pattern
  (``llama_models``' own ``pat_str``), plus the 256 Llama 3.1 special tokens (ids 128000-128255, all
  special, none normalized/lstrip/rstrip), the ByteLevel + ``<|begin_of_text|> $A`` post-processor;
  ``PreTrainedTokenizerFast``. No normalizer. The real config has no pad token: ``<|finetune_right_pad_id|>``
  (the id Meta reserves for it) is set here.
* ``mistral-nemo``: Mistral-Nemo-Instruct-2407. The Tekken BPE (``mistral_common/data/tekken_240718.json``,
  131072 ids, the first 1000 special: ``<unk> <s> </s> [INST] [/INST] [AVAILABLE_TOOLS] ... <pad> ...``
  then ``<SPECIAL_20>``..``<SPECIAL_999>``) through ``MistralConverter`` (Split on the Tekken pattern +
  ByteLevel without prefix space), the ``<s> $A`` post-processor; ``PreTrainedTokenizerFast``. Pad: ``<pad>``.
* ``mixtral``: Mixtral-8x7B-Instruct-v0.1. The SentencePiece v1 model (``mistral_common/data/tokenizer.model.v1``,
  32000 pieces, byte fallback) through ``LlamaConverter`` with ``legacy=True`` (as the real config): normalizer
  ``Prepend("▁") + Replace(" ", "▁")``, no pre-tokenizer; ``[INST]`` is plain text in v1. Pad: ``<unk>``.
* ``mistral-v3``: Mistral-7B-Instruct-v0.3. The SentencePiece v3 model (``mistral_instruct_tokenizer_240323.model.v3``,
  32768 pieces: ``<unk>`` and the 750 control pieces ``<s> </s> [INST] [/INST] [TOOL_CALLS] [AVAILABLE_TOOLS]
  ...`` are special added tokens, the 20 user-defined ``[REFERENCE_DOC_*]`` pieces non-special ones) through
  ``LlamaConverter`` with ``legacy=False``: no normalizer, ``Metaspace(prepend_scheme="first", split=False)``.
  Pad: ``<unk>``.
* ``mistral-v7``: Mistral-Large-Instruct-2411. The SentencePiece v7 model (``mistral_instruct_tokenizer_241114.model.v7``,
  as v3 plus ``[SYSTEM_PROMPT] [/SYSTEM_PROMPT] [TOOL_CONTENT] [IMG_BREAK] [IMG_END]``), ``legacy=False``.

Every added token has lstrip, rstrip and normalized false (single_word false), as in the real files.
Template + tokenizer give mistral_common's own instruct encoding token for token (``test_real_tokenizers.py``).
The ``legacy`` flags (Mixtral true, v0.3 false, as recalled from the real configs; 2411 taken as v0.3) do not
change that encoding (every run after a control token there starts with a space), so no test pins them.

The SentencePiece families keep the real config's ``tokenizer_class: LlamaTokenizer``, so ``AutoTokenizer``
(transformers 5) rebuilds their pre-tokenizer from the ``legacy`` flag exactly as it does for the real
checkpoints; cook's ``read_tokenizer_dir`` therefore loads them through AutoTokenizer.

Two adaptations to transformers 5: its ``LlamaConverter`` still calls the transformers 4 extractor
interface (``_spm_converter`` supplies it, with transformers' own ``generate_merges``), and its
``MistralConverter`` reads the special tokens of this 2024 (pre-``special_tokens``) tekken.json from
mistral_common only for mistral-common >= 1.11.5 (``_tekken_with_specials`` writes them in a scratch copy).

What differs from the real Hub files: the pad token (none of these models defines one); the mistral_common
SentencePiece v3/v7 files name some unused control pieces differently from the Hub's ``[control_N]`` (same
ids, same ``special`` flag); and ``model_max_length`` where the Hub value is unknown here.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

BUILDER_VERSION = "1"  # bump whenever the output of build() changes
STAMP = "real_tokenizer_build.json"  # beside the tokenizer files: what built them
TEMPLATES = Path(__file__).resolve().parent / "real_templates"

REAL_FAMILIES: tuple[str, ...] = ("llama3.1", "mistral-nemo", "mixtral", "mistral-v3", "mistral-v7")

# Where each verbatim template was copied from (the template text only; see real_templates/SOURCES.md).
HF_JS = "github.com/huggingface/huggingface.js @ fe42e68017ffc76d09922ea8f9b38a6964345710"
TEMPLATE_SOURCES: dict[str, str] = {
    "llama3.1": (
        f"meta-llama/Llama-3.1-8B-Instruct chat_template: {HF_JS}, packages/jinja/test/e2e.test.js "
        "(key 'meta-llama/Llama-3.1-8B-Instruct'); byte-identical to the GGUF copy in "
        "packages/ollama-utils/src/chat-template-automap.ts ('library/llama3.1:8b')"
    ),
    "mistral-nemo": (
        "mistralai/Mistral-Nemo-Instruct-2407 chat_template: github.com/ggerganov/llama.cpp @ "
        "7b5e0803c84435e8005725d8f9ddceb5d1820443, models/templates/mistralai-Mistral-Nemo-Instruct-2407.jinja"
    ),
    "mixtral": (
        f"mistralai/Mixtral-8x7B-Instruct-v0.1 chat_template (the revision with the system message): {HF_JS}, "
        "packages/ollama-utils/src/chat-template-automap.ts ('library/mixtral:8x7b', its GGUF metadata)"
    ),
    "mistral-v3": (
        "mistralai/Mistral-7B-Instruct-v0.3 chat_template (the revision with the ns.index alternation check), as "
        "quoted in full by public code (a MaziyarPanahi/Mistral-7B-Instruct-v0.3 copy); it is the Nemo template "
        "above with the v3 spacing ('[INST] ', '[AVAILABLE_TOOLS] [', '[TOOL_CALLS] [', ' ' + content|trim, "
        "'[TOOL_RESULTS] {')"
    ),
    "mistral-v7": (
        f"mistralai/Mistral-Large-Instruct-2411 chat_template: {HF_JS}, "
        "packages/ollama-utils/src/chat-template-automap.ts ('library/mistral-large:123b', its GGUF metadata)"
    ),
}

TEMPLATE_SHA256: dict[str, str] = {  # of real_templates/<name>.jinja, as recorded in real_templates/SOURCES.md
    "llama3.1": "e10ca381b1ccc5cf9db52e371f3b6651576caee0a630b452e2816b2d404d4b65",
    "mistral-nemo": "e4676cb56dffea7782fd3e2b577cfaf1e123537e6ef49b3ec7caa6c095c62272",
    "mixtral": "796853172235ab3aaa4810013ddfe2eab481bda3306dad4f700c00d436eed596",
    "mistral-v3": "e16746b40344d6c5b5265988e0328a0bf7277be86f1c335156eae07e29c82826",
    "mistral-v7": "3c4ad5fa60dd8c7ccdf82fa4225864c903e107728fcaf859fa6052cb80c92ee9",
}

# The Llama 3.1 special tokens, ids 128000-128255 (the Hub's tokenizer.json). llama-models 0.3.0's own list
# is the later Llama 3.2 one (``<|step_id|>`` at 128005, ``<|image|>`` at 128011); the rest agree.
LLAMA31_NAMED = (
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
LLAMA31_SPECIAL_TOKENS: tuple[str, ...] = LLAMA31_NAMED + tuple(
    f"<|reserved_special_token_{i}|>" for i in range(3, 3 + 256 - len(LLAMA31_NAMED))
)
SPM_HUGE_MAX_LENGTH = 1000000000000000019884624838656  # transformers' VERY_LARGE_INTEGER, as the Mistral configs


def llama3_model_file() -> Path:
    return Path(str(resources.files("llama_models") / "llama3" / "tokenizer.model"))


def mistral_data_file(name: str) -> Path:
    return Path(str(resources.files("mistral_common") / "data" / name))


SOURCE_FILES: dict[str, Callable[[], Path]] = {
    "llama3.1": llama3_model_file,
    "mistral-nemo": lambda: mistral_data_file("tekken_240718.json"),
    "mixtral": lambda: mistral_data_file("tokenizer.model.v1"),
    "mistral-v3": lambda: mistral_data_file("mistral_instruct_tokenizer_240323.model.v3"),
    "mistral-v7": lambda: mistral_data_file("mistral_instruct_tokenizer_241114.model.v7"),
}


def source_file(name: str) -> Path:
    """The packaged vocabulary file a family is converted from."""
    return SOURCE_FILES[name]()


def template_text(name: str) -> str:
    return (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")


ADDED_TOKEN_FLAGS = ("lstrip", "normalized", "rstrip", "single_word", "special")


def _added_tokens_decoder(tokenizer: Any) -> dict[str, dict[str, Any]]:
    """tokenizer_config.json's ``added_tokens_decoder``: the backend's added tokens with the same flags."""
    added = tokenizer.get_added_tokens_decoder()
    return {
        str(i): {"content": added[i].content, **{flag: bool(getattr(added[i], flag)) for flag in ADDED_TOKEN_FLAGS}}
        for i in sorted(added)
    }


def _bos_processor(bos: str, bos_id: int) -> Any:
    from tokenizers import processors

    return processors.TemplateProcessing(
        single=f"{bos}:0 $A:0", pair=f"{bos}:0 $A:0 {bos}:1 $B:1", special_tokens=[(bos, bos_id)]
    )


def _llama31() -> tuple[Any, dict[str, Any]]:
    from llama_models.llama3.tokenizer import Tokenizer as MetaTokenizer
    from tokenizers import processors
    from transformers.convert_slow_tokenizer import TikTokenConverter

    converter = TikTokenConverter(
        vocab_file=str(llama3_model_file()),
        pattern=MetaTokenizer.pat_str,
        add_prefix_space=False,
        extra_special_tokens=list(LLAMA31_SPECIAL_TOKENS),
    )
    tokenizer = converter.converted()
    bos_id = tokenizer.token_to_id("<|begin_of_text|>")
    if bos_id != 128000 or tokenizer.get_vocab_size() != 128256:
        raise RuntimeError(f"llama3.1: unexpected layout (bos {bos_id}, size {tokenizer.get_vocab_size()})")
    tokenizer.post_processor = processors.Sequence(
        [
            processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True),
            _bos_processor("<|begin_of_text|>", bos_id),
        ]
    )
    config = {
        "bos_token": "<|begin_of_text|>",
        "clean_up_tokenization_spaces": True,
        "eos_token": "<|eot_id|>",
        "model_input_names": ["input_ids", "attention_mask"],
        "model_max_length": 131072,
        "pad_token": "<|finetune_right_pad_id|>",  # not in the real config (it has none)
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    return tokenizer, config


def _tekken_with_specials(path: Path, scratch: Path) -> Path:
    """The tekken.json with its special tokens spelled out. This 2024 file predates the ``special_tokens``
    key: mistral_common's ``Tekkenizer.DEPRECATED_SPECIAL_TOKENS`` gives them, and transformers' converter
    reads them from mistral_common only when mistral_common >= 1.11.5 (whose numpy < 2.4 pin this project
    cannot take), so they are written into a scratch copy for it."""
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    data = json.loads(path.read_text(encoding="utf-8"))
    if "special_tokens" not in data:
        data["special_tokens"] = [
            {
                "rank": int(t["rank"]),
                "token_str": str(getattr(t["token_str"], "value", t["token_str"])),
                "is_control": True,
            }
            for t in Tekkenizer.DEPRECATED_SPECIAL_TOKENS
        ]
    copy = scratch / "tekken.json"  # the converter recognises Tekken files by this name
    copy.write_text(json.dumps(data), encoding="utf-8")
    return copy


def _tekken() -> tuple[Any, dict[str, Any]]:
    from transformers.integrations.mistral.tokenizer import MistralConverter

    with tempfile.TemporaryDirectory() as scratch:
        tekken = _tekken_with_specials(source_file("mistral-nemo"), Path(scratch))
        tokenizer = MistralConverter(str(tekken)).converted()
    if tokenizer.token_to_id("<pad>") != 11 or tokenizer.get_vocab_size() != 131072:
        raise RuntimeError("mistral-nemo: unexpected Tekken layout")
    tokenizer.post_processor = _bos_processor("<s>", 1)
    config = {
        "bos_token": "<s>",
        "clean_up_tokenization_spaces": False,
        "eos_token": "</s>",
        "model_max_length": SPM_HUGE_MAX_LENGTH,
        "pad_token": "<pad>",  # the Tekken pad piece (id 11); the real config names none
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": "<unk>",
    }
    return tokenizer, config


def _spm_converter() -> type:
    """transformers' ``LlamaConverter``, fed the SentencePiece vocabulary and merges the way transformers 4
    extracted them (transformers 5 keeps the converter but changed the extractor's call it makes)."""
    from transformers.convert_slow_tokenizer import LlamaConverter, SentencePieceExtractor
    from transformers.tokenization_utils_base import generate_merges

    class Extractor(SentencePieceExtractor):
        def extract(self, vocab_scores: Any = None) -> Any:  # type: ignore[override]
            vocab = {piece.piece: i for i, piece in enumerate(self.proto.pieces)}
            return vocab, generate_merges(vocab, vocab_scores)

    class Converter(LlamaConverter):
        SpmExtractor = Extractor

    return Converter


class _SpmSource:
    """What ``LlamaConverter`` reads from a slow LlamaTokenizer: the model file and its two flags."""

    add_prefix_space = True

    def __init__(self, vocab_file: Path, legacy: bool) -> None:
        self.vocab_file = str(vocab_file)
        self.legacy = legacy

    def convert_ids_to_tokens(self, index: int) -> str:
        return ("<unk>", "<s>", "</s>")[index]


def _sentencepiece(name: str, legacy: bool) -> tuple[Any, dict[str, Any]]:
    from tokenizers import AddedToken

    tokenizer = _spm_converter()(_SpmSource(source_file(name), legacy)).converted()
    # LlamaTokenizerFast registers unk/bos/eos as special added tokens (the converter adds only <s> </s>)
    tokenizer.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in ("<unk>", "<s>", "</s>")])
    tokenizer.post_processor = _bos_processor("<s>", 1)
    config = {
        "add_bos_token": True,
        "add_eos_token": False,
        "additional_special_tokens": [],
        "bos_token": "<s>",
        "clean_up_tokenization_spaces": False,
        "eos_token": "</s>",
        "legacy": legacy,
        "model_max_length": SPM_HUGE_MAX_LENGTH,
        "pad_token": "<unk>",  # the usual fine-tuning pad of these models; the real config names none
        "sp_model_kwargs": {},
        "spaces_between_special_tokens": False,
        "tokenizer_class": "LlamaTokenizer",
        "unk_token": "<unk>",
        "use_default_system_prompt": False,
    }
    return tokenizer, config


BUILDERS: dict[str, Callable[[], tuple[Any, dict[str, Any]]]] = {
    "llama3.1": _llama31,
    "mistral-nemo": _tekken,
    "mixtral": lambda: _sentencepiece("mixtral", legacy=True),
    "mistral-v3": lambda: _sentencepiece("mistral-v3", legacy=False),
    "mistral-v7": lambda: _sentencepiece("mistral-v7", legacy=False),
}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _stamp(name: str) -> dict[str, str]:
    import tokenizers
    import transformers

    return {
        "builder_version": BUILDER_VERSION,
        "family": name,
        "source_sha256": _sha256(source_file(name)),
        "template_sha256": _sha256(TEMPLATES / f"{name}.jinja"),
        "builder_sha256": _sha256(Path(__file__)),  # any edit here rebuilds a kept (cached) directory
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
    }


def _is_built(target: Path, stamp: dict[str, str]) -> bool:
    try:
        return bool(json.loads((target / STAMP).read_text(encoding="utf-8")) == stamp)
    except (OSError, ValueError):
        return False


def _write(directory: Path, name: str, stamp: dict[str, str]) -> None:
    tokenizer, config = BUILDERS[name]()
    tokenizer.save(str(directory / "tokenizer.json"))
    config = {"added_tokens_decoder": _added_tokens_decoder(tokenizer), **config, "chat_template": template_text(name)}
    config = dict(sorted(config.items()))
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
    names = ("bos_token", "eos_token", "unk_token", "pad_token")
    special = {key: config[key] for key in names if config.get(key)}
    (directory / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")
    (directory / STAMP).write_text(json.dumps(stamp, indent=2) + "\n")


def build(name: str, out: Path) -> Path:
    """Write ``out/<name>/`` (tokenizer.json, tokenizer_config.json with the chat template,
    special_tokens_map.json) unless the same builder already wrote it from the same sources."""
    if name not in BUILDERS:
        raise ValueError(f"unknown family {name!r}; known: {', '.join(REAL_FAMILIES)}")
    out = Path(out)
    target = out / name
    stamp = _stamp(name)
    if _is_built(target, stamp):
        return target
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=out))
    try:
        staging.chmod(0o755)
        _write(staging, name, stamp)
        if _is_built(target, stamp):  # a concurrent build finished first
            return target
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    except OSError:
        if not _is_built(target, stamp):  # not a concurrent build that won the race
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(f"usage: {sys.argv[0]} OUT_DIR", file=sys.stderr)
        return 2
    for name in REAL_FAMILIES:
        print(build(name, Path(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
