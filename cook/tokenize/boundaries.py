"""Target character spans of one encoded text run -> a per-token mask, without backend offsets.

The encoder (``ChatTokenizer.encode_texts``) returns ids only, so the character position of each
token is rebuilt from a per-id byte-length table of the vocabulary (built once per tokenizer) and
cumulative byte offsets.

**The boundary rule** (the same one ``apply_chat_template(return_assistant_tokens_mask=True)`` uses):
a token is a target iff any of its characters lies in a target span. A token that straddles the start
of an assistant's content (``'\\n '`` = header newline + the content's leading space) is therefore a
target; a token wholly inside the role header never is. Worked example, target span ``[5, 8)``::

    text   "user\\n ab"      tokens 'user' | '\\n ' | 'ab'      bytes [0,4) [4,6) [6,8)
    mask                             0        1       1          ('\\n ' holds the target ' ')

Byte-level BPE vocabularies (GPT-2 style, one vocabulary character per byte) are exact. SentencePiece
style vocabularies count ``'▁'`` and ``<0xNN>`` as one byte; a prefix space such a normalizer adds at
the start of a run is treated as belonging to the run's first character.

A normalizer that rewrites text (NFC in Qwen2, NFKC, lowercasing, a precompiled charsmap) breaks the
byte count: ``"cafe\u0301"`` is 6 bytes of text but 5 of tokens. ``run_mask`` then places the
characters through the reference backend's alignments (offsets in the original text), which follow
every normalizer; for an NFC-only normalizer only the runs that are not already NFC take that road.
"""

from __future__ import annotations

import json
import re
import unicodedata
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from cook.errors import Rejected, RejectReason
from cook.tokenize.tokenizer import ChatTokenizer

_BYTE_TOKEN = re.compile(r"<0x[0-9A-Fa-f]{2}>")
_TABLES: weakref.WeakKeyDictionary[ChatTokenizer, np.ndarray] = weakref.WeakKeyDictionary()


def _is_byte_level(backend_json: dict[str, Any]) -> bool:
    return '"ByteLevel"' in json.dumps(backend_json.get("decoder")) or '"ByteLevel"' in json.dumps(
        backend_json.get("pre_tokenizer")
    )


def _piece_bytes(token: str) -> int:
    if _BYTE_TOKEN.fullmatch(token):
        return 1
    return len(token.replace("\u2581", " ").encode("utf-8"))


def token_byte_lengths(tokenizer: ChatTokenizer) -> np.ndarray:
    """int64 [V]: the number of UTF-8 bytes each id contributes to decoded text (built once per tokenizer)."""
    table = _TABLES.get(tokenizer)
    if table is None:
        backend = tokenizer.backend_tokenizer
        backend_json = json.loads(backend.to_str())
        vocab = backend.get_vocab(with_added_tokens=False)
        size = max([*vocab.values(), *(t["id"] for t in backend_json.get("added_tokens", []))], default=-1) + 1
        table = np.zeros(size, dtype=np.int64)
        byte_level = _is_byte_level(backend_json)
        for token, token_id in vocab.items():
            table[token_id] = len(token) if byte_level else _piece_bytes(token)
        for added in backend_json.get("added_tokens", []):
            table[added["id"]] = len(added["content"].encode("utf-8"))
        _TABLES[tokenizer] = table
    return table


def span_mask(ids: np.ndarray, table: np.ndarray, text: str, spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """uint8 [len(ids)]: 1 where a token overlaps one of ``spans`` (character ``[start, stop)``, sorted,
    disjoint) of ``text``, the string that ``ids`` encode."""
    lengths = table[ids]  # int64 [n]
    ends = np.cumsum(lengths)
    starts = ends - lengths
    phantom = int(ends[-1]) - len(text.encode("utf-8")) if len(ids) else 0
    if phantom < 0:
        raise Rejected(RejectReason.TEMPLATE_ERROR, "the tokenizer's ids do not cover the text: cannot place targets")
    if phantom:  # a prefix space added by the normalizer belongs to the first character
        starts = np.maximum(starts - phantom, 0)
        ends = np.maximum(ends - phantom, 0)
    mask = np.zeros(len(ids), dtype=np.uint8)
    for start_char, stop_char in spans:
        start_byte = len(text[:start_char].encode("utf-8"))
        stop_byte = start_byte + len(text[start_char:stop_char].encode("utf-8"))
        mask[(ends > start_byte) & (starts < stop_byte)] = 1
    return mask


def _offsets_mask(offsets: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """The boundary rule on character offsets; a zero-width token (a prefix ``▁``) belongs to the
    character it stands before."""
    mask = np.zeros(len(offsets), dtype=np.uint8)
    for k, (start, stop) in enumerate(offsets):
        stop = max(stop, start + 1)
        if any(stop > a and start < b for a, b in spans):
            mask[k] = 1
    return mask


def needs_offsets(tokenizer: ChatTokenizer, text: str) -> bool:
    """True when the tokenizer's normalizer changes ``text`` in a way the byte table cannot count."""
    kind = tokenizer.normalizer_kind
    if kind is None or (text.isascii() and kind != "other"):
        return False
    return kind == "other" or not unicodedata.is_normalized(kind, text)  # type: ignore[arg-type]


def run_mask(
    tokenizer: ChatTokenizer,
    ids: np.ndarray,
    table: np.ndarray,
    text: str,
    spans: Sequence[tuple[int, int]],
    first: bool = False,
) -> np.ndarray:
    """uint8 [len(ids)]: the targets of one run, from the byte table, or through offsets where the
    tokenizer's normalizer rewrites the run's text (``needs_offsets``). ``first``: the run sits at
    offset 0 of its sequence."""
    if not needs_offsets(tokenizer, text):
        return span_mask(ids, table, text, spans)
    reference, offsets = tokenizer.char_offsets(text, first)
    if reference != [int(i) for i in ids]:  # the encoders agree by the self-check; a bug if not
        raise AssertionError(f"the reference backend gives other ids for a run of {len(text)} characters")
    return _offsets_mask(offsets, spans)
