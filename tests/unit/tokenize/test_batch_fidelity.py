"""Fidelity of a whole batch: every record of a batch gets exactly the ids and mask it gets alone,
and those equal Hugging Face's ``apply_chat_template`` (ids) and ``return_assistant_tokens_mask``
(masks), also for tokenizers whose normalizer rewrites text (NFC), whose Metaspace prefixes only the
text at offset 0 (``prepend_scheme: first``) and whose control tokens swallow whitespace (``rstrip``).

The batch tests catch any cache keyed on text that hands one record another record's ids: records
share long markup (a default system prompt, a date header) and repeat each other's texts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cook.config import TokenizerConfig
from cook.tokenize import Tokenized, tokenize_batch
from cook.tokenize.assemble import LayoutBuilder, TextRun
from cook.tokenize.tokenizer import ChatTokenizer
from cook.types import Conversation, TextPart, Turn
from tests.conftest import REPO

ASSETS = REPO / "tests" / "assets"
CHATML_GENERATION = (
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' }}"
    "{% if m['role'] == 'assistant' %}{% generation %}{{ m['content'] + '<|im_end|>' }}{% endgeneration %}"
    "{% else %}{{ m['content'] + '<|im_end|>' }}{% endif %}{{ '\\n' }}{% endfor %}"
)
SHARED_SYSTEM = "You are a careful assistant. Answer in full sentences and cite your sources when you can."
TEXTS = (
    "Hi there",
    " leading space",
    "trailing  ",
    "\n\nnewlines first",
    "café cafe\u0301 \u212b Ångström",
    "\u00a0nbsp\u00a0 日本語のテキスト עברית العربية 😀👍🏽",
    "tabs\tand\r\nbreaks",
    "x",
    SHARED_SYSTEM,
)


def _conversation(source: str, turns: list[tuple[str, str]]) -> Conversation:
    return Conversation(source, tuple(Turn(role, (TextPart(text),)) for role, text in turns))  # type: ignore[arg-type]


def _records(draw_texts: list[str], system: bool) -> list[tuple[str, str]]:
    turns = [("system", SHARED_SYSTEM)] if system else []
    for k, text in enumerate(draw_texts):
        turns.append(("user" if k % 2 == 0 else "assistant", text))
    if turns[-1][0] != "assistant":
        turns.append(("assistant", "Done."))
    return turns


def _cook(path: str, chat_format: str, rows: list[list[tuple[str, str]]]) -> list[Tokenized]:
    tokenizer = _tokenizer(path, chat_format)
    config = TokenizerConfig(path=path, chat_format=chat_format, normalize_thinking=False)  # type: ignore[arg-type]
    convs = [_conversation(f"batch.jsonl#{k}", turns) for k, turns in enumerate(rows)]
    return tokenize_batch(tokenizer, convs, [()] * len(convs), config)


_TOKENIZERS: dict[tuple[str, str], ChatTokenizer] = {}


def _tokenizer(path: str, chat_format: str) -> ChatTokenizer:
    key = (path, chat_format)
    if key not in _TOKENIZERS:
        _TOKENIZERS[key] = ChatTokenizer(path, "hf", chat_format=chat_format)
    return _TOKENIZERS[key]


def _arrays(tokenized: Tokenized) -> tuple[list[int], list[int]]:
    sample = tokenized.sample()
    return sample.input_ids.tolist(), sample.loss_mask.tolist()


CASES = [
    (str(ASSETS / "demo_tokenizer"), "chatml"),
    (str(ASSETS / "sp_tokenizer"), "chatml"),
    (str(ASSETS / "templates" / "llama3"), "template"),
    (str(ASSETS / "templates" / "mistral"), "template"),
]


@pytest.mark.parametrize(("path", "chat_format"), CASES, ids=lambda v: Path(v).name)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.lists(
        st.tuples(st.lists(st.sampled_from(TEXTS), min_size=1, max_size=6), st.booleans()), min_size=2, max_size=12
    )
)
def test_each_record_of_a_batch_gets_what_it_gets_alone(path: str, chat_format: str, rows: list[Any]) -> None:
    records = [_records(texts, system) for texts, system in rows]
    batch = _cook(path, chat_format, records)
    for k, record in enumerate(records):
        alone = _cook(path, chat_format, [record])[0]
        assert _arrays(batch[k]) == _arrays(alone), f"record {k} differs in a batch of {len(records)}"


def _with_backend(tmp: Path, source: Path, name: str, change: Any) -> str:
    """A copy of a test tokenizer whose backend JSON is changed by ``change(data)`` (the added-token
    flags that ``tokenizer_config.json`` repeats are changed there too, as transformers reads them)."""
    out = tmp / name
    shutil.copytree(source, out)
    data = json.loads((out / "tokenizer.json").read_text())
    change(data)
    (out / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False))
    config = json.loads((out / "tokenizer_config.json").read_text())
    flags = {str(t["id"]): t for t in data["added_tokens"]}
    for token_id, token in (config.get("added_tokens_decoder") or {}).items():
        token.update({k: flags[token_id][k] for k in ("lstrip", "rstrip") if token_id in flags})
    (out / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False))
    return str(out)


def _nfc(data: dict[str, Any]) -> None:
    data["normalizer"] = {"type": "NFC"}


def _rstrip_chatml(data: dict[str, Any]) -> None:
    for token in data["added_tokens"]:
        if token["content"] in ("<|im_start|>", "<|im_end|>"):
            token["rstrip"] = True
        if token["content"] == "<|im_end|>":
            token["lstrip"] = True


@pytest.fixture(scope="module")
def variants(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("variants")
    return {
        "nfc": _with_backend(tmp, ASSETS / "demo_tokenizer", "nfc", _nfc),
        "strip": _with_backend(tmp, ASSETS / "demo_tokenizer", "strip", _rstrip_chatml),
        "metaspace_first": str(ASSETS / "sp_tokenizer"),
        "plain": str(ASSETS / "demo_tokenizer"),
    }


@pytest.mark.parametrize("variant", ["nfc", "strip", "metaspace_first", "plain"])
def test_chatml_ids_and_masks_equal_hugging_face(variants: dict[str, str], variant: str) -> None:
    from transformers import AutoTokenizer

    path = variants[variant]
    hf = AutoTokenizer.from_pretrained(path, local_files_only=True)
    records = [_records(list(TEXTS[k : k + 4]), k % 2 == 0) for k in range(len(TEXTS))]
    records += [[("user", "q"), ("assistant", text)] for text in TEXTS]
    cooked = _cook(path, "chatml", records)
    for record, sample in zip(records, cooked, strict=True):
        messages = [{"role": role, "content": text} for role, text in record]
        ref = hf.apply_chat_template(
            messages,
            chat_template=CHATML_GENERATION,
            tokenize=True,
            return_dict=True,
            return_assistant_tokens_mask=True,
        )
        ids, mask = _arrays(sample)
        assert ids == ref["input_ids"], (variant, record)
        assert mask == list(ref["assistant_masks"]), (variant, record)


def test_whitespace_beside_stripping_controls_goes_and_targets_shrink() -> None:
    builder = LayoutBuilder(lstrip=frozenset({8}), rstrip=frozenset({7, 8}))
    builder.control(7, False)
    builder.text("\n ", False, markup=True)
    builder.text(" Hi  ", True)
    builder.control(8, True)
    builder.text("\n", False, markup=True)
    builder.control(7, False)
    out = builder.finish()
    assert [(x.text, x.spans) if isinstance(x, TextRun) else x.ids for x in out] == [[7], ("Hi", ((0, 2),)), [8], [7]]


def test_nfc_runs_place_targets_through_offsets(variants: dict[str, str]) -> None:
    cooked = _cook(variants["nfc"], "chatml", [[("user", "q"), ("assistant", "cafe\u0301 \u212b")]])
    ids, mask = _arrays(cooked[0])
    assert np.asarray(mask).sum() > 0 and len(ids) == len(mask)


def test_template_mode_accepts_a_non_special_think_token(tmp_path: Path) -> None:
    """DeepSeek-R1's ``<think>`` is an added token that is not special: Hugging Face matches it in any
    text, so in template mode it is not cook's control token (ChatML mode still refuses it)."""
    from cook.errors import ConfigError

    def plain_think(data: dict[str, Any]) -> None:
        for token in data["added_tokens"]:
            if token["content"] in ("<think>", "</think>"):
                token["special"] = False

    path = _with_backend(tmp_path, ASSETS / "demo_tokenizer", "plain_think", plain_think)
    config = json.loads((Path(path) / "tokenizer_config.json").read_text())
    for token in (config.get("added_tokens_decoder") or {}).values():
        if token["content"] in ("<think>", "</think>"):
            token["special"] = False
    (Path(path) / "tokenizer_config.json").write_text(json.dumps(config))
    ChatTokenizer(path, "hf", chat_format="template")
    with pytest.raises(ConfigError, match="not special"):
        ChatTokenizer(path, "hf", chat_format="chatml")
