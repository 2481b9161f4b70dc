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

import numpy as np

from cook.errors import ConfigError
from cook.format import CONTROL_TOKENS, IM_END, IM_START, THINK_END, THINK_START
from cook.tokenize.backends import Encoder, FlatIds, HFEncoder, check_sample, choose_encoder
from cook.tokenize.tokenizer_files import read_tokenizer_dir

REQUIRED_TOKENS = (IM_START, IM_END, THINK_START, THINK_END)
SINGLE_THREADED: Final = {"TOKENIZERS_PARALLELISM": "false"}  # cook parallelises by process, never by thread


def _stripping(added: list[dict[str, Any]], flag: str) -> frozenset[int]:
    """Ids of the special added tokens that swallow the whitespace on one side (``lstrip``/``rstrip``)."""
    return frozenset(int(t["id"]) for t in added if t.get("special") and t.get(flag))


def _without_first_prepend(node: Any) -> bool:
    """Turn every ``Metaspace(prepend_scheme="first")`` under ``node`` into ``"never"``, in place;
    True when one was found. Hugging Face adds that ``▁`` only to the text at offset 0 of the whole
    string, never to a run that follows a control token."""
    found = False
    if isinstance(node, dict):
        if node.get("type") == "Metaspace" and node.get("prepend_scheme") == "first":
            node["prepend_scheme"] = "never"
            found = True
        for value in node.values():
            found = _without_first_prepend(value) or found
    elif isinstance(node, list):
        for value in node:
            found = _without_first_prepend(value) or found
    return found


NORMAL_FORMS = {"NFC", "NFD", "NFKC", "NFKD"}


def _normalizer_kind(node: Any) -> str | None:
    """What the backend's normalizer does to data text, for placing target characters on tokens:
    None (nothing, or only ``Prepend``/``Replace(" ", "▁")``, which the byte table counts), one of
    ``NFC``/``NFD``/``NFKC``/``NFKD`` (only that form: text already in it is unchanged), or ``"other"``
    (lowercasing, a precompiled charsmap, ...: every run's targets are placed through offsets)."""
    if node is None:
        return None
    kind = node.get("type")
    if kind == "Sequence":
        kinds = {k for k in (_normalizer_kind(n) for n in node.get("normalizers") or []) if k is not None}
        return kinds.pop() if len(kinds) == 1 else ("other" if kinds else None)
    if kind == "Prepend" or (kind == "Replace" and node.get("pattern") == {"String": " "}):
        return None
    return str(kind) if kind in NORMAL_FORMS else "other"


def _backend_of(tokenizer_json: str, post_processor: bool = True) -> Any:
    """A ``tokenizers.Tokenizer`` for data text: special added tokens are never matched (they are spelled
    as text), no truncation, no padding; without its post-processor when only offsets are wanted."""
    from tokenizers import Tokenizer

    backend = Tokenizer.from_str(tokenizer_json)
    backend.no_truncation()
    backend.no_padding()
    backend.encode_special_tokens = True
    if not post_processor:
        backend.post_processor = None
    return backend


class ChatTokenizer:
    """Holds the loaded tokenizer: control-token ids, pad id, vocab size and a safe batch encoder."""

    def __init__(self, path: str, backend: str = "hf", *, chat_format: str = "chatml") -> None:
        if not os.path.isdir(path):
            raise ConfigError(f"tokenizer.path: {path!r} is not a directory")
        for name, value in SINGLE_THREADED.items():
            os.environ.setdefault(name, value)
        files = read_tokenizer_dir(path, CONTROL_TOKENS)  # torch-free unless the directory needs AutoTokenizer
        self.path = path
        self.vocab_size = files.vocab_size
        unk = files.unk_id
        self.control_ids: dict[str, int] = {t: i for t, i in files.token_ids.items() if i is not None and i != unk}
        data = json.loads(files.tokenizer_json)
        added = list(data.get("added_tokens") or [])
        # the special added tokens, content -> id: those only markup may produce
        self.special_ids: dict[str, int] = {t["content"]: int(t["id"]) for t in added if t.get("special")}
        # template mode: the chat markup comes from the tokenizer's own chat_template (self.hf, loaded lazily)
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
        self.lstrip_ids = _stripping(added, "lstrip")  # HF strips the whitespace before these tokens
        self.rstrip_ids = _stripping(added, "rstrip")  # ... and after these
        self.normalizer_kind = _normalizer_kind(data.get("normalizer"))
        # Runs are encoded one string each; a Metaspace that prepends "▁" only at offset 0 of the whole
        # text ("first") must not prepend it to a run that follows a control token: such runs use a copy
        # of the backend that never prepends, and only a run at offset 0 uses the backend itself.
        self.position_sensitive = _without_first_prepend(data)
        run_json = json.dumps(data, ensure_ascii=False) if self.position_sensitive else files.tokenizer_json
        whole = _backend_of(files.tokenizer_json)
        reference = _backend_of(run_json) if self.position_sensitive else whole
        self._backend = whole
        self._first = HFEncoder(whole)  # the run at offset 0 of a sequence (position_sensitive only)
        self._jsons = (run_json, files.tokenizer_json)  # (runs after a control token, the run at offset 0)
        self._offsets: dict[bool, Any] = {}  # built on first use
        self._reference = HFEncoder(reference)
        self._encoder: Encoder = self._reference
        self._cache: dict[str, np.ndarray] = {}
        self._probe_injection(chat_format)
        self._encoder, self.backend = choose_encoder(backend, run_json, self._reference)

    def _probe_injection(self, chat_format: str) -> None:
        """A control token cook inserts by id must not come out of data text. In template mode the chat
        markup is the template's (its special tokens): a non-special ``<think>`` there is plain text to
        Hugging Face and to cook alike, so only the media placeholders are probed."""
        probed = [t for t in self.control_ids if chat_format == "chatml" or t not in REQUIRED_TOKENS]
        control = {self.control_ids[t] for t in probed}
        for token in probed:
            if control & set(self._encoder.encode_batch([token])[0]):
                raise ConfigError(
                    f"tokenizer.path: {token!r} is an added token that is not special, so data text could "
                    f"forge it; mark it special in tokenizer.json"
                )

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
        return self._encoder.encode_batch(texts) if texts else []

    def encode_first(self, texts: list[str]) -> list[list[int]]:
        """``encode_texts`` for runs at offset 0 of their sequence (the only ones a ``prepend_scheme:
        first`` Metaspace prefixes with ``▁``); the same as ``encode_texts`` elsewhere."""
        if not self.position_sensitive:
            return self.encode_texts(texts)
        return self._first.encode_batch(texts) if texts else []

    def char_offsets(self, text: str, first: bool = False) -> tuple[list[int], list[tuple[int, int]]]:
        """(ids, each token's character range ``[start, stop)`` in ``text``) from the reference backend's
        alignments, which follow every normalizer; for placing targets where the byte table cannot."""
        first = first and self.position_sensitive
        backend = self._offsets.get(first)
        if backend is None:
            backend = self._offsets[first] = _backend_of(self._jsons[first], post_processor=False)
        encoding = backend.encode(text, add_special_tokens=False)
        return list(encoding.ids), list(encoding.offsets)

    def encode_cached(self, text: str) -> np.ndarray:
        """int32 ids of one of the few fixed strings of the chat format (``'user\\n'``, ``'\\n'``),
        encoded once per tokenizer."""
        ids = self._cache.get(text)
        if ids is None:
            ids = self._cache[text] = np.asarray(self._encoder.encode_batch([text])[0], dtype=np.int32)
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
        return str(self._backend.decode(ids, skip_special_tokens=False))
