"""Issue 14: the torch-free reading of a plain tokenizer directory gives exactly what AutoTokenizer
gives (vocab size, pad/unk ids, control ids, the backend's ids); other directories go through it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from cook.format import CONTROL_TOKENS
from cook.tokenize.tokenizer_files import _with_transformers, needs_transformers, read_tokenizer_dir
from tests.conftest import DEMO_TOKENIZER, REPO

SP_TOKENIZER = REPO / "tests" / "assets" / "sp_tokenizer"
TOKENS = (*CONTROL_TOKENS, "<|pad|>", "<pad>", "<unk>", "not-a-token")


@pytest.mark.parametrize("path", [DEMO_TOKENIZER, SP_TOKENIZER], ids=["demo", "sp"])
def test_plain_directory_matches_autotokenizer(path: Path) -> None:
    light, auto = read_tokenizer_dir(str(path), TOKENS), _with_transformers(str(path), TOKENS)
    assert (light.loaded_with, auto.loaded_with) == ("tokenizers", "transformers")
    assert not needs_transformers(str(path))
    assert (light.vocab_size, light.pad_id, light.unk_id) == (auto.vocab_size, auto.pad_id, auto.unk_id)
    known = {t: i for t, i in auto.token_ids.items() if i is not None and i != auto.unk_id}
    assert {t: i for t, i in light.token_ids.items() if i is not None and i != light.unk_id} == known
    texts = ["Hello there, <|im_start|>world", "日本語 😀 123", "  spaces\n\n"]
    a, b = Tokenizer.from_str(light.tokenizer_json), Tokenizer.from_str(auto.tokenizer_json)
    a.encode_special_tokens = b.encode_special_tokens = True
    assert [e.ids for e in a.encode_batch(texts, add_special_tokens=False)] == [
        e.ids for e in b.encode_batch(texts, add_special_tokens=False)
    ]


def test_model_specific_class_goes_through_autotokenizer(tmp_path: Path) -> None:
    shutil.copytree(DEMO_TOKENIZER, tmp_path / "tok")
    config_path = tmp_path / "tok" / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["tokenizer_class"] = "Qwen2TokenizerFast"
    config_path.write_text(json.dumps(config))
    assert needs_transformers(str(tmp_path / "tok"))
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config["added_tokens_decoder"]["9000"] = {"content": "<extra>", "special": True}  # only the config has it
    config_path.write_text(json.dumps(config))
    assert needs_transformers(str(tmp_path / "tok"))
