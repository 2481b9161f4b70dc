"""A local Hugging Face tokenizer, loaded once per worker, with injection-proof text encoding.

``ChatTokenizer.encode_texts`` encodes DATA text with the backend's ``encode_special_tokens`` set, so
a user typing ``<|im_start|>`` or ``<image>`` gets those characters as ordinary text. Control tokens
are inserted by id, never by parsing text. Loading probes this: a control token that data text
could still produce (an added token that is not special) is a config error.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from cook.errors import ConfigError
from cook.format import CONTROL_TOKENS, IM_END, IM_START, THINK_END, THINK_START

REQUIRED_TOKENS = (IM_START, IM_END, THINK_START, THINK_END)


def tokenizer_files_sha256(path: str) -> dict[str, str]:
    """sha256 of every file in the tokenizer directory (sorted names), for the manifest."""
    out = {}
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        if os.path.isfile(full):
            with open(full, "rb") as handle:
                out[name] = hashlib.sha256(handle.read()).hexdigest()
    return out


class ChatTokenizer:
    """Holds the loaded tokenizer: control-token ids, pad id, vocab size and a safe batch encoder."""

    def __init__(self, path: str, chat_format: str = "chatml") -> None:
        if not os.path.isdir(path):
            raise ConfigError(f"tokenizer.path: {path!r} is not a directory")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from tokenizers import Tokenizer
        from transformers import AutoTokenizer

        try:
            hf: Any = AutoTokenizer.from_pretrained(path, local_files_only=True)
        except (OSError, ValueError) as err:
            raise ConfigError(f"tokenizer.path: cannot load {path!r} with AutoTokenizer ({err})") from None
        if not getattr(hf, "is_fast", False):
            raise ConfigError(f"tokenizer.path: {path!r} has no fast (tokenizers) backend")
        self.path = path
        self.vocab_size = len(hf)
        ids = {token: hf.convert_tokens_to_ids(token) for token in CONTROL_TOKENS}
        unk = hf.unk_token_id
        self.control_ids: dict[str, int] = {t: i for t, i in ids.items() if i is not None and i != unk}
        # template mode: the chat markup comes from the tokenizer's own chat_template
        self.hf: Any = hf
        self.special_ids: dict[str, int] = {t.content: i for i, t in hf.added_tokens_decoder.items() if t.special}
        if chat_format == "template":
            if not hf.chat_template:
                raise ConfigError(f"tokenizer.chat_format: template, but {path!r} has no chat_template")
            try:
                hf.get_chat_template()
            except ValueError as err:  # e.g. several named templates and no "default"
                raise ConfigError(f"tokenizer.chat_format: template, but {path!r}: {err}") from None
        required = REQUIRED_TOKENS if chat_format == "chatml" else ()
        missing = [t for t in required if t not in self.control_ids]
        if missing:
            raise ConfigError(f"tokenizer.path: {path!r} lacks the chat token(s) {', '.join(missing)}")
        if hf.pad_token_id is None:
            raise ConfigError(f"tokenizer.path: {path!r} defines no pad_token")
        self.pad_id = int(hf.pad_token_id)
        backend = Tokenizer.from_str(hf.backend_tokenizer.to_str())
        backend.no_truncation()
        backend.no_padding()
        backend.encode_special_tokens = True
        self._backend = backend
        self._cache: dict[str, list[int]] = {}
        self._probe_injection()

    def _probe_injection(self) -> None:
        control = set(self.control_ids.values())
        for token in self.control_ids:
            if control & set(self._encode_raw([token])[0]):
                raise ConfigError(
                    f"tokenizer.path: {token!r} is an added token that is not special, so data text could "
                    f"forge it; mark it special in tokenizer.json"
                )

    def _encode_raw(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self._backend.encode_batch_fast(texts, add_special_tokens=False)]

    def encode_texts(self, texts: list[str]) -> list[list[int]]:
        """Data text -> ids, never producing a control token."""
        return self._encode_raw(texts) if texts else []

    def encode_cached(self, text: str) -> list[int]:
        """For the few fixed strings of the chat format (``'user\\n'``, ``'\\n'``)."""
        ids = self._cache.get(text)
        if ids is None:
            ids = self._cache[text] = self._encode_raw([text])[0]
        return ids

    def decode(self, ids: list[int]) -> str:
        return self._backend.decode(ids, skip_special_tokens=False)
