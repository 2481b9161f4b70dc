"""Tokenize: (Conversation, its MediaItems) -> TokenizedSample, a batch at a time (SPEC §5).

All data text of a batch goes through ONE ``encode_batch`` call; the fixed chat strings come from a
cache. Worked example with the demo tokenizer (ids of ``<|im_start|>``=1, ``<|im_end|>``=2,
``<think>``=3, ``</think>``=4)::

    user "Hi", assistant "Yo"
    ids : 1 [user\\n] [Hi] 2 [\\n] 1 [assistant\\n] 3 4 [Yo] 2 [\\n]
    mask: 0  0 ...   0..  0  0   0   0 ...        1 1  1..  1  0
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cook.config import TokenizerConfig
from cook.errors import Rejected, RejectReason
from cook.format import AUDIO_END, IMG_END
from cook.tokenize.chat_format import Control, MediaGroups, Text, render
from cook.tokenize.tokenizer import ChatTokenizer
from cook.types import Conversation, TokenizedSample

MEDIA_END_TOKENS = (IMG_END, AUDIO_END)
CACHED_MAX_CHARS = 16  # role headers and newlines: encoded once per worker


def _control_id(tokenizer: ChatTokenizer, name: str) -> int:
    token_id = tokenizer.control_ids.get(name)
    if token_id is None:
        raise Rejected(RejectReason.MEDIA_UNSUPPORTED, f"the tokenizer has no {name} token")
    return token_id


def _assemble(
    tokenizer: ChatTokenizer, conv: Conversation, media: MediaGroups, pieces: list, encoded: list
) -> TokenizedSample:
    """Concatenate the pieces' ids; target pieces become ``[start, stop)`` spans of the mask."""
    ids: list[int] = []
    spans: list[tuple[int, int]] = []
    media_end = 0
    control = tokenizer.control_ids
    for piece, piece_ids in zip(pieces, encoded, strict=True):
        start = len(ids)
        if piece_ids is not None:
            ids += piece_ids
        elif isinstance(piece, Control):
            ids.append(control[piece.name] if piece.name in control else _control_id(tokenizer, piece.name))
            if piece.name in MEDIA_END_TOKENS:
                media_end = len(ids)
        else:
            ids += [_control_id(tokenizer, piece.name)] * piece.times
        if piece.target:
            if spans and spans[-1][1] == start:
                spans[-1] = (spans[-1][0], len(ids))
            else:
                spans.append((start, len(ids)))
    input_ids = np.array(ids, dtype=np.int32)  # int32 [L]
    loss_mask = np.zeros(len(ids), dtype=np.uint8)  # uint8 [L]
    for start, stop in spans:
        loss_mask[start:stop] = 1
    if not loss_mask.any():
        raise Rejected(RejectReason.NO_TARGET, "no assistant target tokens")
    items = tuple(item for group in media for item in group)  # cookers number media in placeholder order
    return TokenizedSample(conv.source, input_ids, loss_mask, media=items, media_end=media_end)


def tokenize_batch(
    tokenizer: ChatTokenizer,
    conversations: Sequence[Conversation],
    media: Sequence[MediaGroups],
    config: TokenizerConfig,
) -> list[TokenizedSample | Rejected]:
    """Tokenize a batch; a conversation that cannot be tokenized becomes a ``Rejected`` in place.

    ``media[k][i]`` holds the processed items of ``conversations[k].media[i]``.
    """
    rendered = [
        render(c, m, config.train_on, config.normalize_thinking) for c, m in zip(conversations, media, strict=True)
    ]
    texts: list[str] = []
    for pieces in rendered:
        texts.extend(p.text for p in pieces if isinstance(p, Text) and len(p.text) > CACHED_MAX_CHARS)
    encoded_iter = iter(tokenizer.encode_texts(texts))
    out: list[TokenizedSample | Rejected] = []
    for conv, items, pieces in zip(conversations, media, rendered, strict=True):
        encoded = [
            (next(encoded_iter) if len(p.text) > CACHED_MAX_CHARS else tokenizer.encode_cached(p.text))
            if isinstance(p, Text)
            else None
            for p in pieces
        ]
        try:
            out.append(_assemble(tokenizer, conv, items, pieces, encoded))
        except Rejected as rejected:
            out.append(rejected)
    return out


__all__ = ["ChatTokenizer", "tokenize_batch"]
