"""The tokenizer a cooked dataset names: its path (``--tokenizer`` wins over the manifest), a warning when
its files differ from the recorded sha256, and the control-token ids and vocab size the checks need
(from the manifest when it records them, else from ``tokenizer.json`` with the light ``tokenizers``
library, else through ``transformers``). Used by ``cook validate``, ``cook inspect`` and the benches."""

from __future__ import annotations

import json
import os
from typing import Any

from cook import format as fmt
from cook.contract import tokenizer_files_sha256
from cook.validate.problems import TokenInfo


def _manifest_tokenizer(root: str) -> dict[str, Any]:
    """The manifest's ``tokenizer`` section, ``{}`` when the manifest is missing or unreadable."""
    try:
        with open(os.path.join(root, fmt.MANIFEST_NAME), encoding="utf-8") as handle:
            entry = json.load(handle).get("tokenizer", {})
    except (OSError, ValueError, AttributeError):
        return {}
    return entry if isinstance(entry, dict) else {}


def tokenizer_path(root: str, override: str | None) -> tuple[str | None, list[str]]:
    """The tokenizer directory (``override`` wins over the manifest) and warnings about it."""
    entry = _manifest_tokenizer(root)
    path = override or entry.get("path")
    if not isinstance(path, str):
        return None, ["the manifest records no tokenizer.path; pass --tokenizer"]
    if not os.path.isdir(path):
        return None, [f"tokenizer directory {path} does not exist; pass --tokenizer"]
    recorded = entry.get("sha256")
    if isinstance(recorded, dict):
        current = tokenizer_files_sha256(path)
        changed = [name for name, digest in sorted(recorded.items()) if current.get(name) != digest]
        if changed:
            return path, [f"tokenizer {path} differs from the one the dataset was cooked with ({', '.join(changed)})"]
    return path, []


def load_tokenizer(root: str, override: str | None) -> tuple[Any, list[str]]:
    """The dataset's ``transformers`` tokenizer (None when it cannot be loaded) and warnings about it."""
    path, warnings = tokenizer_path(root, override)
    if path is None:
        return None, warnings
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(path, local_files_only=True), warnings
    except (OSError, ValueError) as err:
        return None, [*warnings, f"tokenizer {path} cannot be loaded ({type(err).__name__}: {err}); pass --tokenizer"]


def load_token_info(root: str, override: str | None) -> tuple[TokenInfo | None, list[str]]:
    """Control token ids and vocab size: from ``tokenizer.json`` with the light ``tokenizers`` library when
    the directory has one (no ``transformers`` import), else through ``load_tokenizer``. A manifest that
    records ``tokenizer.control_ids`` and ``vocab_size`` needs no tokenizer at all (unless overridden)."""
    if override is None:
        recorded = _recorded_token_info(root)
        if recorded is not None:
            return recorded, []
    path, warnings = tokenizer_path(root, override)
    if path is None:
        return None, warnings
    if os.path.isfile(os.path.join(path, "tokenizer.json")):
        from tokenizers import Tokenizer

        try:
            fast = Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
        except Exception as err:  # tokenizers raises plain Exception; reported as a warning, not a failure
            return None, [*warnings, f"tokenizer {path} cannot be loaded ({err}); pass --tokenizer"]
        ids = {token: fast.token_to_id(token) for token in fmt.CONTROL_TOKENS}
        found = {token: i for token, i in ids.items() if i is not None}
        return TokenInfo(vocab_size=fast.get_vocab_size(with_added_tokens=True), control_ids=found), warnings
    tokenizer, more = load_tokenizer(root, override)
    return (token_info(tokenizer) if tokenizer is not None else None), more


def _recorded_token_info(root: str) -> TokenInfo | None:
    entry = _manifest_tokenizer(root)
    ids, vocab = entry.get("control_ids"), entry.get("vocab_size")
    if not isinstance(ids, dict) or not isinstance(vocab, int):
        return None
    return TokenInfo(vocab_size=vocab, pad_id=entry.get("pad_id"), control_ids={k: int(v) for k, v in ids.items()})


def token_info(tokenizer: Any) -> TokenInfo:
    """Control token ids (those the tokenizer knows as single tokens), vocab size and pad id."""
    ids = {}
    for token in fmt.CONTROL_TOKENS:
        found = tokenizer.convert_tokens_to_ids(token)
        if isinstance(found, int) and found != tokenizer.unk_token_id:
            ids[token] = found
    return TokenInfo(vocab_size=len(tokenizer), pad_id=tokenizer.pad_token_id, control_ids=ids)
