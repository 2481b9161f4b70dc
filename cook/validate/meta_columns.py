"""The meta.json members of a batch of text packs -> per-sequence columns: true lengths, targets and source
digests, or ``Irregular`` when a member is not what ``members.parse_meta`` accepts (with no media).

The writer's meta.json is canonical JSON (sorted keys, no spaces), e.g.::

    {"schema_version":1,"sequences":[{"length":151,"media":[],"source":"a.jsonl#1","targets":130},...]}

``canonical_columns`` accepts exactly that form (a source with no escape, quote or control character;
numbers without leading zeros; ``"truncated":true`` allowed) and reads the columns with NumPy from the
quotes' positions: in each entry, quote 0 follows its "{", quote 2 ends the length digits, quotes 6 and 7
bracket the source, and the targets digits follow quote 9. A batch with no truncated entry is checked
at fixed offsets from those quotes, all entries at once (``byte_words``): the opening up to a member's
first length digits, ``{"length":`` at each entry, ``,"media":[],"source":"`` ending at quote 6,
``","targets":`` from quote 7, ``},`` between entries and ``}]}`` at a member's end; between them lie digits or a
source (no backslash, no control byte anywhere). A batch with one is checked by one regular-expression
match. Anything else (another writer's spacing, an escaped source) goes through ``json_columns``, one
``json.loads`` per member.
"""

from __future__ import annotations

import json
import operator
import re
from itertools import chain
from typing import Any, Final

import numpy as np

from cook import format as fmt
from cook.validate.byte_words import decimals, literal_at, literals_at, words
from cook.validate.digests import source_digests, span_digests

_ENTRY: Final = (
    rb'\{"length":[1-9][0-9]*+,"media":\[\],"source":"[^"\\\x00-\x1f]++","targets":[1-9][0-9]*+'
    rb'(?:,"truncated":true)?+\}'
)
_BODY: Final = rb'\{"schema_version":1,"sequences":\[' + _ENTRY + rb"(?:," + _ENTRY + rb")*+\]\}"
_BODIES: Final = re.compile(_BODY + rb"(?:\n" + _BODY + rb")*+")  # members joined by "\n" (never inside one)
_TRUNCATED: Final = b',"truncated":true}'
_TRUNCATED_KEY: Final = b'"truncated"'
_OPEN: Final = b'{"schema_version":1,"sequences":[{"length":'  # a member, up to its first length digits
_LENGTH: Final = b'{"length":'  # an entry, up to its length digits (quotes 0 and 1)
_NEXT: Final = b"},"  # an entry's "}", then the comma before the next one
_SOURCE: Final = b',"media":[],"source":"'  # after the length digits, up to the source (quotes 2 to 6)
_TARGETS: Final = b'","targets":'  # after the source, up to the targets digits (quotes 7 to 9)
_CLOSE: Final = b"}]}"  # a member's last "}", then its end
_SLACK: Final = b" " * 64  # after the text: every fixed-offset read stays in the buffer
_WIDE: Final = 8  # digits a fixed-offset read takes; a longer number goes to the regular expression
_HEADER_QUOTES: Final = 4  # "schema_version" and "sequences"
_ENTRY_QUOTES: Final = 10  # length, media, source and its value, targets
_MAX_DIGITS: Final = 18
_EXACT_FLOAT_DIGITS: Final = 15  # 10^15 < 2^53
_FLOAT_POWERS: Final = 10.0 ** np.arange(_EXACT_FLOAT_DIGITS - 1, -1, -1)
_SEQUENCE_FIELDS: Final = operator.itemgetter("source", "length", "targets", "media")
_META_KEYS: Final = frozenset({"schema_version", "sequences"})
_REQUIRED_KEYS: Final = 4  # source, length, targets, media (+ truncated: true)

Columns = tuple[np.ndarray, np.ndarray, np.ndarray]  # int64 [S] lengths, int64 [S] targets, uint64 [S] digests


class Irregular(Exception):
    """The fast path does not vouch for this shard; ``scan.stream_shard`` checks it and names the problem."""


def _digits(text: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """int64 [S]: the decimal numbers ``text[starts:ends]`` (digits only, checked by the caller)."""
    widths = ends - starts
    width = int(widths.max())
    if width > _MAX_DIGITS or int(widths.min()) < 1:
        raise Irregular
    places = ends[:, None] - width + np.arange(width)  # int64 [S, width], right-aligned
    values = np.where(places >= starts[:, None], text[np.maximum(places, 0)] - np.uint8(ord("0")), np.uint8(0))
    if width <= _EXACT_FLOAT_DIGITS:  # a float64 product is exact below 2^53 (and far faster than int64's)
        return (values.astype(np.float64) @ _FLOAT_POWERS[-width:]).astype(np.int64)
    return values.astype(np.int64) @ (10 ** np.arange(width - 1, -1, -1, dtype=np.int64))


def canonical_columns(metas: list[bytes], counts: np.ndarray) -> Columns | None:
    """Columns of canonical members with ``counts`` [K] sequences each; None when one is not canonical."""
    slack = b"\n".join([*metas, _SLACK])  # the members, then "\n" and the slack
    if _TRUNCATED_KEY not in slack:
        return _literal_columns(slack, metas, counts)
    return _matched_columns(slack[: -len(_SLACK) - 1], metas, counts)


def _matched_columns(joined: bytes, metas: list[bytes], counts: np.ndarray) -> Columns | None:
    """``canonical_columns`` by one regular-expression match of the batch (``joined``: the members, "\n" between)."""
    if joined.count(b"\n") != len(metas) - 1 or _BODIES.fullmatch(joined) is None:
        return None
    try:
        joined.decode("utf-8")
    except UnicodeDecodeError:
        return None
    plain = joined.replace(_TRUNCATED, b"}")  # the flag only ever ends an entry
    text = np.frombuffer(plain, np.uint8)
    quotes = np.flatnonzero(text == ord('"'))
    ends = np.array([len(meta) for meta in metas] if plain is joined else [len(m) for m in plain.split(b"\n")])
    ends = np.cumsum(ends + 1) - 1  # int64 [K]: each member's end (its "\n", or the end of the text)
    per_member = np.diff(np.searchsorted(quotes, ends), prepend=0)
    if (per_member != _HEADER_QUOTES + _ENTRY_QUOTES * counts).any():
        raise Irregular  # meta.json and cu_seqlens disagree on the sequences: stream_shard names it
    keep = np.ones(quotes.shape[0], dtype=bool)
    keep[((np.cumsum(per_member) - per_member)[:, None] + np.arange(_HEADER_QUOTES)).ravel()] = False
    entry = quotes[keep].reshape(-1, _ENTRY_QUOTES)  # int64 [S, 10]
    closes = np.empty(entry.shape[0], dtype=np.int64)  # each entry's "}"
    closes[:-1] = entry[1:, 0] - 3  # ...},{"length"
    closes[np.cumsum(counts) - 1] = ends - 3  # ...}]}
    numbers = _digits(
        text, np.concatenate([entry[:, 1] + 2, entry[:, 9] + 2]), np.concatenate([entry[:, 2] - 1, closes])
    )
    lengths, targets = numbers[: entry.shape[0]], numbers[entry.shape[0] :]
    digests = span_digests(text, entry[:, 6] + 1, entry[:, 7] - entry[:, 6] - 1)
    return lengths, targets, digests


def _literal_columns(slack: bytes, metas: list[bytes], counts: np.ndarray) -> Columns | None:
    """``canonical_columns`` of members with no truncated entry, by the literals at fixed offsets from the quotes
    (``slack``: the members joined by "\n", then "\n" and ``_SLACK``, so that every fixed-offset read stays in it)."""
    sizes = np.array([len(meta) for meta in metas], dtype=np.int64)  # int64 [K]
    if int(sizes.min()) < len(_OPEN) + len(_CLOSE) or b"\\" in slack or not _utf8(slack):
        return None
    text = np.frombuffer(slack, np.uint8)  # uint8 [B]
    if np.count_nonzero(text < ord(" ")) != len(metas):
        return None  # a control byte in a member (each member's closing newline is the only one)
    quotes = np.flatnonzero(text == ord('"'))
    ends = np.cumsum(sizes + 1) - 1  # int64 [K]: each member's end (its "\n", or the slack)
    per_member = np.diff(np.searchsorted(quotes, ends), prepend=0)
    if (per_member != _HEADER_QUOTES + _ENTRY_QUOTES * counts).any():
        raise Irregular  # meta.json and cu_seqlens disagree on the sequences: stream_shard names it
    sequences = int(counts.sum())
    member = np.repeat(np.arange(counts.shape[0]), counts)  # int64 [S]: each entry's member
    first_quote = _ENTRY_QUOTES * np.arange(sequences) + _HEADER_QUOTES * (member + 1)  # int64 [S]: its quote 0
    entry_at, length_end, source_end = quotes[first_quote] - 1, quotes[first_quote + 2] - 1, quotes[first_quote + 7]
    firsts = np.cumsum(counts) - counts  # int64 [K]: each member's first entry
    later = np.ones(sequences, dtype=bool)
    later[firsts] = False
    closes = np.empty(sequences, dtype=np.int64)  # int64 [S]: each entry's "}"
    closes[:-1] = entry_at[1:] - len(_NEXT)
    closes[firsts + counts - 1] = ends - len(_CLOSE)
    every = words(text)
    if not (
        literals_at(every, [(entry_at, _LENGTH), (length_end, _SOURCE), (source_end, _TARGETS)])
        and literal_at(every, entry_at[later] - len(_NEXT), _NEXT)
        and literal_at(every, ends - sizes, _OPEN)
        and literal_at(every, ends - len(_CLOSE), _CLOSE)
    ):
        return None
    source_at = length_end + len(_SOURCE)
    starts = np.concatenate([entry_at + len(_LENGTH), source_end + len(_TARGETS)])
    stops = np.concatenate([length_end, closes])
    if int((source_end - source_at).min()) < 1 or int((stops - starts).min()) < 1:
        return None  # an empty source or number
    if int((stops - starts).max()) > _WIDE:
        return _matched_columns(slack[: -len(_SLACK) - 1], metas, counts)
    numbers = decimals(every, starts, stops)
    if numbers is None:
        return None
    return numbers[:sequences], numbers[sequences:], span_digests(text, source_at, source_end - source_at)


def _utf8(joined: bytes) -> bool:
    if joined.isascii():
        return True
    try:
        joined.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def json_columns(metas: list[bytes], counts: np.ndarray) -> Columns:
    """Columns of any members that ``members.parse_meta`` accepts with no media, one ``json.loads`` each."""
    sequences = [_sequences(meta) for meta in metas]
    if [len(seqs) for seqs in sequences] != counts.tolist():
        raise Irregular
    entries = list(chain.from_iterable(sequences))
    if set(map(type, entries)) != {dict}:
        raise Irregular
    sizes = set(map(len, entries))
    if sizes != {_REQUIRED_KEYS} and (
        not sizes <= {_REQUIRED_KEYS, _REQUIRED_KEYS + 1}
        or not all(entry.get("truncated") is True for entry in entries if len(entry) > _REQUIRED_KEYS)
    ):
        raise Irregular
    try:
        sources, lengths, targets, media = zip(*map(_SEQUENCE_FIELDS, entries), strict=True)
        length_array = np.array(lengths, dtype=np.int64)
        target_array = np.array(targets, dtype=np.int64)
    except (KeyError, OverflowError, TypeError, ValueError) as err:
        raise Irregular from err
    plain = set(map(type, sources)) == {str} and set(map(type, lengths)) == {int} and set(map(type, targets)) == {int}
    if not plain or set(map(type, media)) != {list} or next(chain.from_iterable(media), None) is not None:
        raise Irregular
    if "" in sources or length_array.min() < 1 or target_array.min() < 1:
        raise Irregular
    return length_array, target_array, source_digests(sources)


def _sequences(meta: bytes) -> list[Any]:
    """meta.json's ``sequences`` when the body is exactly ``{"schema_version": 1, "sequences": [...]}``."""
    try:
        body = json.loads(meta.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise Irregular from err
    if type(body) is not dict or body.keys() != _META_KEYS:
        raise Irregular
    version, sequences = body["schema_version"], body["sequences"]
    if type(version) is not int or version != fmt.SCHEMA_VERSION or type(sequences) is not list or not sequences:
        raise Irregular
    return sequences


def meta_columns(metas: list[bytes], counts: np.ndarray) -> Columns:
    """Columns of the batch's meta.json members (``counts``: sequences per member, from cu_seqlens)."""
    found = canonical_columns(metas, counts)
    return found if found is not None else json_columns(metas, counts)
