"""A tokenizer directory -> ``TokenizerFiles`` (the backend JSON, vocab size, token ids), torch-free.

    read_tokenizer_dir(path, tokens) -> TokenizerFiles

``transformers`` imports torch (about 1.5 s of start-up per process) as soon as ``AutoTokenizer`` is
imported. For the plain case, a ``tokenizer.json`` plus a ``tokenizer_config.json`` whose class is the
generic ``PreTrainedTokenizerFast``, everything cook needs is in those two files, so they are read
with ``tokenizers`` alone. Any other directory (a model-specific tokenizer class, which may rewrite
the pre-tokenizer on load, a slow-only tokenizer, added tokens that only the config declares) goes
through ``AutoTokenizer`` as before, so the ids are AutoTokenizer's either way.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from cook.errors import ConfigError

PLAIN_CLASSES = (None, "PreTrainedTokenizerFast", "TokenizersBackend")
FLAGS = ("lstrip", "rstrip", "single_word", "normalized")  # an added token's matching flags


@dataclass(frozen=True)
class TokenizerFiles:
    tokenizer_json: str  # the backend (tokenizers) JSON, as AutoTokenizer would run it
    vocab_size: int  # including added tokens (``len(AutoTokenizer)``)
    token_ids: dict[str, int | None]  # the asked-for tokens -> id (None: not in the vocabulary)
    pad_id: int | None
    unk_id: int | None
    loaded_with: str  # "tokenizers" or "transformers"


def _read_json(path: str) -> dict[str, Any]:
    if not os.path.isfile(path):
        return {}
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    return data if isinstance(data, dict) else {}


def _token_name(value: object) -> str | None:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _is_plain(path: str, config: dict[str, Any], added: list[dict[str, Any]]) -> bool:
    """True when AutoTokenizer would run tokenizer.json unchanged."""
    if not os.path.isfile(os.path.join(path, "tokenizer.json")):
        return False
    if config.get("tokenizer_class") not in PLAIN_CLASSES or config.get("add_prefix_space"):
        return False
    try:
        known = {int(t["id"]): t for t in added}
        declared = config.get("added_tokens_decoder") or {}
        # transformers applies the config's flags (lstrip/rstrip swallow whitespace): any difference
        # from tokenizer.json, and AutoTokenizer's own view decides
        return all(
            int(i) in known
            and (t.get("content"), bool(t.get("special")))
            == (known[int(i)]["content"], bool(known[int(i)].get("special")))
            and all(bool(t[flag]) == bool(known[int(i)].get(flag)) for flag in FLAGS if flag in t)
            for i, t in declared.items()
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        return False  # odd files: AutoTokenizer decides (and names what is wrong)


def needs_transformers(path: str) -> bool:
    """True when ``path`` is loaded through AutoTokenizer (which imports torch)."""
    try:
        config = _read_json(os.path.join(path, "tokenizer_config.json"))
        data = _read_json(os.path.join(path, "tokenizer.json"))
    except (OSError, ValueError):
        return True
    return not _is_plain(path, config, list(data.get("added_tokens") or []))


def read_tokenizer_dir(path: str, tokens: tuple[str, ...]) -> TokenizerFiles:
    config = _read_json(os.path.join(path, "tokenizer_config.json"))
    json_path = os.path.join(path, "tokenizer.json")
    try:
        data = _read_json(json_path)
    except (OSError, ValueError) as err:
        raise ConfigError(f"tokenizer.path: cannot read {json_path!r} ({err})") from None
    if not _is_plain(path, config, list(data.get("added_tokens") or [])):
        return _with_transformers(path, tokens)
    from tokenizers import Tokenizer

    with open(json_path, encoding="utf-8") as handle:
        text = handle.read()
    try:
        backend = Tokenizer.from_str(text)
    except Exception as err:  # tokenizers raises a bare Exception on a bad tokenizer.json
        raise ConfigError(f"tokenizer.path: cannot load {json_path!r} with tokenizers ({err})") from None
    names = {**_read_json(os.path.join(path, "special_tokens_map.json")), **config}
    pad, unk = _token_name(names.get("pad_token")), _token_name(names.get("unk_token"))
    return TokenizerFiles(
        tokenizer_json=text,
        vocab_size=backend.get_vocab_size(with_added_tokens=True),
        token_ids={t: backend.token_to_id(t) for t in tokens},
        pad_id=backend.token_to_id(pad) if pad is not None else None,
        unk_id=backend.token_to_id(unk) if unk is not None else None,
        loaded_with="tokenizers",
    )


def _with_transformers(path: str, tokens: tuple[str, ...]) -> TokenizerFiles:
    from transformers import AutoTokenizer

    try:
        hf: Any = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError) as err:
        raise ConfigError(f"tokenizer.path: cannot load {path!r} with AutoTokenizer ({err})") from None
    if not getattr(hf, "is_fast", False):
        raise ConfigError(f"tokenizer.path: {path!r} has no fast (tokenizers) backend")
    return TokenizerFiles(
        tokenizer_json=hf.backend_tokenizer.to_str(),
        vocab_size=len(hf),
        token_ids={t: hf.convert_tokens_to_ids(t) for t in tokens},
        pad_id=hf.pad_token_id,
        unk_id=hf.unk_token_id,
        loaded_with="transformers",
    )
