"""A local Hugging Face tokenizer, loaded once per worker, with injection-proof text encoding.

``ChatTokenizer.encode_texts`` encodes DATA text with the backend's ``encode_special_tokens`` set, so
a user typing ``<|im_start|>`` or ``<image>`` gets those characters as ordinary text. Control tokens
are inserted by id, never by parsing text. Loading probes this: a control token that data text
could still produce (an added token that is not special) is a config error.
"""

from __future__ import annotations

import json
import os
from functools import cached_property
from typing import Any, Final

from cook.errors import ConfigError
from cook.format import CONTROL_TOKENS, IM_END, IM_START, THINK_END, THINK_START
from cook.tokenize.backends import BackendChoice, Encoder, FlatIds, HFEncoder, check_sample, choose_encoder
from cook.tokenize.tokenizer_files import read_tokenizer_dir

REQUIRED_TOKENS = (IM_START, IM_END, THINK_START, THINK_END)
SINGLE_THREADED: Final = {"TOKENIZERS_PARALLELISM": "false"}  # cook parallelises by process, never by thread


def special_added_tokens(tokenizer_json: str) -> dict[str, int]:
    """The special added tokens of a backend JSON: content -> id (those only markup may produce)."""
    added = json.loads(tokenizer_json).get("added_tokens") or []
    return {t["content"]: int(t["id"]) for t in added if t.get("special")}


class ChatTokenizer:
    """Holds the loaded tokenizer: control-token ids, pad id, vocab size and a safe batch encoder."""

    def __init__(self, path: str, backend: str = "hf", *, chat_format: str = "chatml") -> None:
        if not os.path.isdir(path):
            raise ConfigError(f"tokenizer.path: {path!r} is not a directory")
        for name, value in SINGLE_THREADED.items():
            os.environ.setdefault(name, value)
        from tokenizers import Tokenizer

        files = read_tokenizer_dir(path, CONTROL_TOKENS)  # torch-free unless the directory needs AutoTokenizer
        self.path = path
        self.vocab_size = files.vocab_size
        unk = files.unk_id
        self.control_ids: dict[str, int] = {t: i for t, i in files.token_ids.items() if i is not None and i != unk}
        # template mode: the chat markup comes from the tokenizer's own chat_template (self.hf, loaded lazily)
        self.special_ids: dict[str, int] = special_added_tokens(files.tokenizer_json)
        if chat_format == "template":
            hf = self.hf
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
        if files.pad_id is None:
            raise ConfigError(f"tokenizer.path: {path!r} defines no pad_token")
        self.pad_id = int(files.pad_id)
        reference = Tokenizer.from_str(files.tokenizer_json)
        reference.no_truncation()
        reference.no_padding()
        reference.encode_special_tokens = True
        self._backend = reference
        self._reference = HFEncoder(reference)
        self._encoder: Encoder = self._reference
        self._cache: dict[str, list[int]] = {}
        self._probe_injection()
        self.backend: BackendChoice
        self._encoder, self.backend = choose_encoder(backend, files.tokenizer_json, self._reference)

    def _probe_injection(self) -> None:
        control = set(self.control_ids.values())
        for token in self.control_ids:
            if control & set(self._encode_raw([token])[0]):
                raise ConfigError(
                    f"tokenizer.path: {token!r} is an added token that is not special, so data text could "
                    f"forge it; mark it special in tokenizer.json"
                )

    def _encode_raw(self, texts: list[str]) -> list[list[int]]:
        return self._encoder.encode_batch(texts)

    def encode_flat(self, texts: list[str]) -> FlatIds:
        """``encode_texts`` as one int32 id buffer plus int64 offsets (text i is ``ids[o[i]:o[i+1]]``),
        for NumPy assembly without a Python list per text."""
        return self._encoder.encode_flat(texts)

    def check_sample(self, texts: list[str]) -> None:
        """Self-check the chosen backend on a sample of the job's own text (``auto`` may fall back)."""
        self._encoder, self.backend = check_sample(self.backend, self._reference, self._encoder, texts)

    def reset_backend_cache(self, force: bool = False) -> None:
        """Bound the backend's memory: called by the worker after each unit (the backend decides
        whether enough text went through it to rebuild; ``force`` rebuilds now)."""
        self._encoder.reset(force)

    def encode_texts(self, texts: list[str]) -> list[list[int]]:
        """Data text -> ids, never producing a control token."""
        return self._encode_raw(texts) if texts else []

    def encode_cached(self, text: str) -> list[int]:
        """For the few fixed strings of the chat format (``'user\\n'``, ``'\\n'``)."""
        ids = self._cache.get(text)
        if ids is None:
            ids = self._cache[text] = self._encode_raw([text])[0]
        return ids

    @cached_property
    def hf(self) -> Any:
        """The ``transformers`` tokenizer, for template mode only (importing transformers imports torch)."""
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(self.path, local_files_only=True)

    @property
    def backend_tokenizer(self) -> Any:
        """The ``tokenizers`` backend that defines the ids (its vocabulary and added tokens)."""
        return self._backend

    def decode(self, ids: list[int]) -> str:
        return self._backend.decode(ids, skip_special_tokens=False)
