"""Pieces of a batch of conversations -> (int32 ids, uint8 mask) per conversation, with NumPy.

Adjacent ``Text`` pieces join into one **run** that is encoded as ONE string, exactly as Hugging Face
encodes the text between two control tokens; target pieces inside a run become character spans that
``boundaries.span_mask`` maps to tokens. ``Control`` and ``Repeat`` pieces become ids directly. All
runs of a batch go through one ``encode_texts`` call (short ones through the tokenizer's cache)::

    Control(<|im_start|>) Text("user\\n") Text("  x") Control(<|im_end|>)
    -> [1] encode("user\\n  x") [2]          (not encode("user\\n") + encode("  x"))
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from cook.errors import Rejected, RejectReason
from cook.format import AUDIO_END, IMG_END
from cook.tokenize.boundaries import run_mask
from cook.tokenize.chat_format import Control, Piece, Text
from cook.tokenize.tokenizer import REQUIRED_TOKENS, ChatTokenizer

MEDIA_END_TOKENS = (IMG_END, AUDIO_END)
CACHED_MAX_CHARS = 16  # role headers and newlines: encoded once per worker


# What Rust's ``char::is_whitespace`` calls whitespace (Unicode White_Space): the characters Hugging
# Face's added-token matching swallows beside an ``lstrip``/``rstrip`` token. Python's str.strip()
# differs (it strips U+001C-U+001F, and keeps nothing else), so the set is spelled out.
_WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)


@dataclass(frozen=True, slots=True)
class TextRun:
    text: str
    spans: tuple[tuple[int, int], ...]  # target characters [start, stop), sorted, disjoint
    markup_only: bool = False  # no data text in it: the same string recurs, its ids are cached


@dataclass(frozen=True, slots=True, eq=False)
class FixedIds:
    ids: list[int]
    target: bool
    media_end: bool = False  # the last id closes a media placeholder


Layout = list[TextRun | FixedIds]


def _token_id(ids: Mapping[str, int], name: str) -> int:
    token_id = ids.get(name)
    if token_id is None:
        if name in REQUIRED_TOKENS:  # preformatted ChatML text, cooked with a tokenizer of another format
            raise Rejected(RejectReason.BAD_MARKUP, f"the tokenizer has no {name} token for this ChatML markup")
        raise Rejected(RejectReason.MEDIA_UNSUPPORTED, f"the tokenizer has no {name} token")
    return token_id


class LayoutBuilder:
    """One conversation's layout, built piece by piece: adjacent text joins into one ``TextRun``
    (target text becomes character spans), adjacent control tokens of one target flag into one
    ``FixedIds``."""

    __slots__ = (
        "_controls",
        "_lstrip",
        "_markup_only",
        "_media_end",
        "_out",
        "_rstrip",
        "_size",
        "_spans",
        "_swallow",
        "_target",
        "_text",
    )

    def __init__(self, lstrip: frozenset[int] = frozenset(), rstrip: frozenset[int] = frozenset()) -> None:
        self._out: Layout = []
        self._text: list[str] = []
        self._spans: list[tuple[int, int]] = []
        self._size = 0
        self._controls: list[int] = []
        self._target = self._media_end = False
        self._markup_only = True
        self._lstrip, self._rstrip = lstrip, rstrip  # tokens that swallow the whitespace before / after them
        self._swallow = False  # the last token swallows the whitespace that follows it

    def _strip_pending(self) -> None:
        """Drop the pending text's trailing whitespace (an ``lstrip`` token follows); spans shrink."""
        text = "".join(self._text)
        kept = text.rstrip(_WHITESPACE)
        if len(kept) == len(text):
            return
        size = len(kept)
        self._spans = [(a, min(b, size)) for a, b in self._spans if a < size]
        self._text, self._size = ([kept] if kept else []), size

    def _token(self, token_id: int) -> None:
        """Before a token is appended: the whitespace it swallows before it goes (and the pending text
        with it when that was all), the pending text is flushed; it swallows what follows when it is an
        ``rstrip`` token."""
        if self._size and token_id in self._lstrip:
            self._strip_pending()
        self._swallow = token_id in self._rstrip
        if self._size:
            self._flush_text()

    def _flush_controls(self) -> None:
        self._out.append(FixedIds(self._controls, self._target, self._media_end))
        self._controls = []

    def _flush_text(self) -> None:
        self._out.append(TextRun("".join(self._text), tuple(self._spans), self._markup_only))
        self._text, self._spans, self._size, self._markup_only = [], [], 0, True

    def text(self, text: str, target: bool, markup: bool = False) -> None:
        """Append ``text`` to the current run; ``markup``: it comes from the chat format, not the data."""
        if self._swallow:
            text = text.lstrip(_WHITESPACE)
            self._swallow = not text
        if not text:
            return
        self._markup_only = self._markup_only and markup
        if self._controls:
            self._flush_controls()
        if target:
            size, spans = self._size, self._spans
            if spans and spans[-1][1] == size:
                spans[-1] = (spans[-1][0], size + len(text))
            else:
                spans.append((size, size + len(text)))
        self._text.append(text)
        self._size += len(text)

    def control(self, token_id: int, target: bool, media_end: bool = False) -> None:
        self._token(token_id)
        if self._controls and (self._target != target or self._media_end):
            self._flush_controls()
        self._controls.append(token_id)
        self._target, self._media_end = target, media_end

    def repeat(self, token_id: int, times: int, target: bool) -> None:
        self._token(token_id)
        if self._controls:
            self._flush_controls()
        self._out.append(FixedIds([token_id] * times, target))

    def piece(self, piece: Piece, ids: Mapping[str, int]) -> None:
        if isinstance(piece, Text):
            self.text(piece.text, piece.target)
        elif isinstance(piece, Control):
            self.control(_token_id(ids, piece.name), piece.target, piece.name in MEDIA_END_TOKENS)
        else:
            self.repeat(_token_id(ids, piece.name), piece.times, piece.target)

    def finish(self) -> Layout:
        if self._controls:
            self._flush_controls()
        if self._size:
            self._flush_text()
        return self._out


def layout(
    pieces: Sequence[Piece],
    ids: Mapping[str, int],
    lstrip: frozenset[int] = frozenset(),
    rstrip: frozenset[int] = frozenset(),
) -> Layout:
    """Pieces -> layout; control and placeholder tokens resolved to ids (``lstrip``/``rstrip``: the ids
    that swallow the whitespace before / after them, as Hugging Face's added-token matching does)."""
    builder = LayoutBuilder(lstrip, rstrip)
    for piece in pieces:
        builder.piece(piece, ids)
    return builder.finish()


_MARKUP_RUNS: weakref.WeakKeyDictionary[ChatTokenizer, dict[str, np.ndarray]] = weakref.WeakKeyDictionary()
MARKUP_CACHE_ENTRIES = 4096  # markup that embeds per-record text (tools JSON) stops being cached there


def _encode_runs(tokenizer: ChatTokenizer, layouts: Sequence[Layout | Rejected]) -> list[np.ndarray]:
    """The int32 ids of every run of the batch, in order: data runs in one ``encode_flat`` call (one id
    buffer: no Python int per token, which would wake the garbage collector over the whole batch),
    short runs and markup-only runs (a template's default system header) from caches.

    Each run is mapped to its ids by an explicit index into the encoded list, never by the order of
    an iterator, so a markup string that recurs within one batch (and is not cached yet) is encoded
    once and every occurrence gets exactly its own text's ids. A run at offset 0 of its sequence is
    encoded on its own where the tokenizer's prefix rule depends on the position
    (``ChatTokenizer.position_sensitive``), never from a cache."""
    cache = _MARKUP_RUNS.setdefault(tokenizer, {})
    sensitive = tokenizer.position_sensitive
    fresh: list[str] = []
    firsts: list[str] = []
    slot: list[int] = []  # per run: >= 0 its index in ``fresh``; -1 the tokenizer's cache; -2 the markup
    # cache; <= -3 index -3 - k in ``firsts``
    queued: dict[str, int] = {}  # markup-only text -> its index in ``fresh`` (one encode per distinct string)
    runs: list[TextRun] = []
    for lay in layouts:
        if isinstance(lay, Rejected):
            continue
        for position, run in enumerate(lay):
            if not isinstance(run, TextRun):
                continue
            runs.append(run)
            text = run.text
            if sensitive and position == 0:
                slot.append(-3 - len(firsts))
                firsts.append(text)
            elif len(text) <= CACHED_MAX_CHARS:
                slot.append(-1)
            elif run.markup_only and text in cache:
                slot.append(-2)
            elif run.markup_only:
                index = queued.get(text)
                if index is None:
                    index = queued[text] = len(fresh)
                    fresh.append(text)
                slot.append(index)
            else:
                slot.append(len(fresh))
                fresh.append(text)
    ids, offsets = tokenizer.encode_flat(fresh)  # int32 [N], int64 [len(fresh) + 1]
    assert len(offsets) == len(fresh) + 1, "the encoder lost or added texts"
    bounds = offsets.tolist()
    encoded = [ids[bounds[i] : bounds[i + 1]] for i in range(len(fresh))]
    encoded_firsts = [np.asarray(run, dtype=np.int32) for run in tokenizer.encode_first(firsts)]
    for text, index in queued.items():
        if len(cache) < MARKUP_CACHE_ENTRIES:
            cache[text] = encoded[index].copy()  # not a view that keeps the batch's buffer alive
    out = []
    for run, index in zip(runs, slot, strict=True):
        if index >= 0:
            out.append(encoded[index])
        elif index == -1:
            out.append(tokenizer.encode_cached(run.text))
        elif index == -2:
            out.append(cache[run.text])
        else:
            out.append(encoded_firsts[-3 - index])
    return out


def assemble_batch(
    tokenizer: ChatTokenizer, layouts: Sequence[Layout | Rejected], table: np.ndarray
) -> list[tuple[np.ndarray, np.ndarray, int] | Rejected]:
    """Per layout: int32 ids [L], uint8 mask [L] and the index just past the last media placeholder
    (0: none); a ``Rejected`` layout stays in place. ``table`` is the per-id byte-length table.

    The ids of the whole batch are gathered into one int32 array and the targets set on one uint8
    mask, by ranges; each sample gets views of its own slice."""
    encoded = iter(_encode_runs(tokenizer, layouts))
    chunks: list[np.ndarray] = []  # int32 pieces of the batch's ids, in order
    size = 0
    whole: list[tuple[int, int]] = []  # target token ranges of the batch
    partial: list[tuple[int, int, TextRun, np.ndarray, bool]] = []  # (layout, first token, run, run ids, at 0)
    bounds: list[tuple[int, int, int] | Rejected] = []
    for number, lay in enumerate(layouts):
        if isinstance(lay, Rejected):
            bounds.append(lay)
            continue
        start = media_end = size
        for item in lay:
            position = size
            if isinstance(item, TextRun):
                run_ids = next(encoded)
                chunks.append(run_ids)
                size += len(run_ids)
                if item.spans == ((0, len(item.text)),):
                    whole.append((position, size))
                elif item.spans:
                    partial.append((number, position, item, run_ids, position == start))
            else:
                chunks.append(np.asarray(item.ids, dtype=np.int32))
                size += len(item.ids)
                if item.target:
                    whole.append((position, size))
                if item.media_end:
                    media_end = size
        bounds.append((start, size, media_end - start))
    input_ids = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int32)  # int32 [batch tokens]
    loss_mask = np.zeros(size, dtype=np.uint8)  # uint8 [batch tokens]
    for first, stop in whole:
        loss_mask[first:stop] = 1
    for number, first, run, run_ids, at_zero in partial:
        try:
            loss_mask[first : first + len(run_ids)] = run_mask(tokenizer, run_ids, table, run.text, run.spans, at_zero)
        except Rejected as rejected:
            bounds[number] = rejected
    return [
        bound
        if isinstance(bound, Rejected)
        else (input_ids[bound[0] : bound[1]], loss_mask[bound[0] : bound[1]], bound[2])
        for bound in bounds
    ]
