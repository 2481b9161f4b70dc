"""Text-only ChatML conversations of a batch -> ids and masks as NumPy columns (the fast path).

The same rendering as ``chat_format.render`` + ``assemble.layout`` (SPEC §5), written for the common
case (no media parts) without a Python object per piece: one pass appends every segment of the
batch to flat columns (a source code and a target flag per segment; data runs go to one
``encode_flat`` call), then one NumPy gather builds the batch's ids and one ``repeat`` its mask::

    user "Hi", assistant "<think>p</think>Yo"   (normalize_thinking)
    segments: <|im_start|> "user\\nHi" <|im_end|> "\\n" <|im_start|> "assistant\\n"
              <think> "p" </think> "Yo" <|im_end|> "\\n"
    target:   0           0          0          0     0            0
              1       1   1        1    1          0

Control tokens and the fixed markup strings (``"\\n"``, ``"assistant\\n"``) come from a small pool
per tokenizer; everything holding data text is encoded with the batch. A run that is only partly a
target (a turn's header and content when thinking is not normalized) gets its mask from
``boundaries.run_mask``, as in ``assemble.py``. Every run follows a control token, so none sits at
offset 0 of its sequence.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence

import numpy as np

from cook.errors import Rejected
from cook.format import IM_END, IM_START, THINK_END, THINK_START
from cook.tokenize.boundaries import run_mask
from cook.tokenize.chat_format import chatml_turns, split_thinking_text
from cook.tokenize.targets import target_flags
from cook.tokenize.tokenizer import REQUIRED_TOKENS, ChatTokenizer
from cook.types import Conversation, TextPart

FRESH = 0  # segment code of the next text in ``fresh`` (pool entries are negative)
Assembled = tuple[np.ndarray, np.ndarray, int]  # int32 ids [L], uint8 mask [L], media end (always 0 here)


class _Pool:
    """Ids of the control tokens and markup strings, one flat buffer; entry ``e`` is segment code ``-e-1``."""

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.starts: list[int] = []
        self.lengths: list[int] = []
        self.codes: dict[str | int, int] = {}
        self._arrays: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def add(self, key: str | int, ids: Sequence[int] | np.ndarray) -> int:
        code = self.codes[key] = -len(self.starts) - 1
        self.starts.append(len(self.ids))
        self.lengths.append(len(ids))
        self.ids += [int(i) for i in ids]
        self._arrays = None
        return code

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(int32 ids, int64 starts, int64 lengths), rebuilt only after the pool grew."""
        if self._arrays is None:
            self._arrays = (
                np.asarray(self.ids, dtype=np.int32),
                np.asarray(self.starts, dtype=np.int64),
                np.asarray(self.lengths, dtype=np.int64),
            )
        return self._arrays


_POOLS: weakref.WeakKeyDictionary[ChatTokenizer, _Pool] = weakref.WeakKeyDictionary()


def fast_path_ready(ids: Mapping[str, int], stripping: frozenset[int] = frozenset()) -> bool:
    """The tokenizer has every ChatML control token (otherwise the general path rejects properly), and
    none of them swallows whitespace beside it (``stripping``: lstrip/rstrip ids; the general path
    handles those)."""
    return all(name in ids for name in REQUIRED_TOKENS) and not any(ids[name] in stripping for name in REQUIRED_TOKENS)


def text_only(conv: Conversation) -> bool:
    return not conv.media and all(type(part) is TextPart for turn in conv.turns for part in turn.content)


class _Columns:
    """The segments of one batch: ``codes`` (``FRESH``: the next text of ``fresh``, < 0: a pool entry),
    ``targets`` (0/1), the partial-target runs and the first segment of each conversation."""

    def __init__(self, tokenizer: ChatTokenizer, ids: Mapping[str, int]) -> None:
        self.tokenizer = tokenizer
        self.pool = pool = _POOLS.setdefault(tokenizer, _Pool())
        for name in REQUIRED_TOKENS:
            if ids[name] not in pool.codes:
                pool.add(ids[name], [ids[name]])
        self.im_start, self.im_end = pool.codes[ids[IM_START]], pool.codes[ids[IM_END]]
        self.think_start, self.think_end = pool.codes[ids[THINK_START]], pool.codes[ids[THINK_END]]
        self.newline = self.markup("\n")
        self.assistant_header = self.markup("assistant\n")
        self.codes: list[int] = []
        self.targets: list[int] = []
        self.fresh: list[str] = []
        self.partial: list[tuple[int, str, tuple[tuple[int, int], ...]]] = []  # (segment, run text, spans)
        self.firsts: list[int] = []

    def markup(self, text: str) -> int:
        code = self.pool.codes.get(text)
        if code is None:
            code = self.pool.add(text, self.tokenizer.encode_cached(text))
        return code

    def add(self, conv: Conversation, train_on: str, normalize: bool) -> None:
        codes, targets, fresh = self.codes, self.targets, self.fresh
        im_start, im_end, newline = self.im_start, self.im_end, self.newline
        self.firsts.append(len(codes))
        turns = chatml_turns(conv)
        for turn, target in zip(turns, target_flags(turns, train_on), strict=True):
            flag = int(target)
            content = turn.content
            text = content[0].text if len(content) == 1 else "".join([p.text for p in content])  # type: ignore[union-attr]
            if normalize and turn.role == "assistant":
                thought, answer = split_thinking_text(text, turn.reasoning)
                codes += (im_start, self.assistant_header, self.think_start)
                targets += (0, 0, flag)
                if thought:
                    codes.append(FRESH)
                    fresh.append(thought)
                    targets.append(flag)
                codes.append(self.think_end)
                targets.append(flag)
                if answer:
                    codes.append(FRESH)
                    fresh.append(answer)
                    targets.append(flag)
                codes += (im_end, newline)
                targets += (flag, 0)
            elif text:
                header = f"{turn.role}\n"
                run = header + text
                if target:
                    self.partial.append((len(codes) + 1, run, ((len(header), len(run)),)))
                codes += (im_start, FRESH, im_end, newline)
                fresh.append(run)
                targets += (0, 0, flag, 0)
            else:
                codes += (im_start, self.markup(f"{turn.role}\n"), im_end, newline)
                targets += (0, 0, flag, 0)

    def assemble(self, table: np.ndarray) -> list[Assembled | Rejected]:
        """One gather for the ids of the whole batch, one repeat for its mask; per conversation, views."""
        flat, offsets = self.tokenizer.encode_flat(self.fresh)  # int32 [N], int64 [F + 1]
        pool_ids, pool_starts, pool_lengths = self.pool.arrays()
        codes = np.asarray(self.codes, dtype=np.int64)  # int64 [S]
        is_fresh = codes >= 0
        run = np.maximum(np.cumsum(is_fresh) - 1, 0)  # the k-th fresh segment is fresh text k
        entry = np.where(is_fresh, 0, -codes - 1)
        bounds = np.append(offsets, offsets[-1])  # so that run + 1 is in range when no run is fresh
        lengths = np.where(is_fresh, bounds[run + 1] - bounds[run], pool_lengths[entry])  # int64 [S]
        sources = np.where(is_fresh, bounds[run], len(flat) + pool_starts[entry])
        ends = np.cumsum(lengths)
        starts = ends - lengths
        total = int(ends[-1]) if len(ends) else 0
        gather = np.repeat(sources - starts, lengths) + np.arange(total)
        input_ids = np.concatenate([flat, pool_ids])[gather]  # int32 [batch tokens]
        loss_mask = np.repeat(np.asarray(self.targets, dtype=np.uint8), lengths)  # uint8 [batch tokens]
        rejected: dict[int, Rejected] = {}
        firsts = np.asarray(self.firsts, dtype=np.int64)
        for segment, text, spans in self.partial:
            a, b = int(starts[segment]), int(ends[segment])
            try:
                loss_mask[a:b] = run_mask(self.tokenizer, input_ids[a:b], table, text, spans)
            except Rejected as err:
                rejected[int(np.searchsorted(firsts, segment, side="right")) - 1] = err
        token_starts = np.append(starts, total)[firsts].tolist()  # a conversation's first token
        token_ends = [*token_starts[1:], total]
        return [
            rejected[k] if k in rejected else (input_ids[a:b], loss_mask[a:b], 0)
            for k, (a, b) in enumerate(zip(token_starts, token_ends, strict=True))
        ]


def assemble_text_only(
    tokenizer: ChatTokenizer,
    conversations: Sequence[Conversation],
    ids: Mapping[str, int],
    train_on: str,
    normalize_thinking: bool,
    table: np.ndarray,
) -> list[Assembled | Rejected]:
    """ChatML ids, masks for text-only conversations (``text_only``), as ``assemble_batch`` would give."""
    columns = _Columns(tokenizer, ids)
    for conv in conversations:
        columns.add(conv, train_on, normalize_thinking and not conv.template_applied)
    return columns.assemble(table)
