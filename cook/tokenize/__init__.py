"""Tokenize: (Conversation, its MediaItems) -> TokenizedSample, a batch at a time (SPEC §5).

``tokenize_batch`` gives one ``Tokenized`` per conversation, in order; its ``sample()`` is the
``TokenizedSample`` or raises the conversation's ``Rejected``, so one record never fails the batch.

``chat_format: chatml`` renders ChatML pieces (``chat_format.py``), ``chat_format: template`` the
tokenizer's own Jinja ``chat_template`` (``template.py``). Either way the text between two control
tokens is ONE run, encoded as one string as Hugging Face does (``assemble.py``), all runs of a batch
in one ``encode_texts`` call. Worked example with the demo tokenizer (ids of ``<|im_start|>``=1,
``<|im_end|>``=2, ``<think>``=3, ``</think>``=4)::

    user "Hi", assistant "Yo"
    ids : 1 [user\\nHi] 2 [\\n] 1 [assistant\\n] 3 4 [Yo] 2 [\\n]
    mask: 0  0 ...     0  0   0   0 ...        1 1  1..  1  0
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cook.config import TokenizerConfig
from cook.errors import Rejected, RejectReason
from cook.tokenize.assemble import Layout, assemble_batch, layout
from cook.tokenize.boundaries import token_byte_lengths
from cook.tokenize.chat_format import TOOL_CALL_CLOSE, TOOL_CALL_OPEN, MediaGroups, render
from cook.tokenize.chatml_columns import Assembled, assemble_text_only, fast_path_ready, text_only
from cook.tokenize.tokenizer import ChatTokenizer
from cook.types import Conversation, MediaItem, TokenizedSample


@dataclass(frozen=True, slots=True, eq=False)
class Tokenized:
    """One conversation of a tokenized batch, in its place: ``sample()`` is its ``TokenizedSample``,
    or raises the ``Rejected`` it met (a layout, template or target-placement failure carried from
    the batch in ``failure``, or ``no_target``). One conversation's failure never fails the batch.
    """

    source: str
    assembled: Assembled | None  # int32 ids [L], uint8 mask [L], media end; None with a failure
    media: tuple[MediaItem, ...] = ()  # in placeholder order
    failure: Rejected | None = None

    def sample(self) -> TokenizedSample:
        if self.failure is not None:
            raise self.failure
        assert self.assembled is not None
        input_ids, loss_mask, media_end = self.assembled
        if not loss_mask.any():
            raise Rejected(RejectReason.NO_TARGET, "no assistant target tokens")
        return TokenizedSample(self.source, input_ids, loss_mask, media=self.media, media_end=media_end)


def tokenize_batch(
    tokenizer: ChatTokenizer,
    conversations: Sequence[Conversation],
    media: Sequence[MediaGroups],
    config: TokenizerConfig,
) -> list[Tokenized]:
    """Tokenize a batch: one ``Tokenized`` per conversation, in order; its ``sample()`` raises the
    conversation's reject, so a caller takes each sample under its own reject handler.

    ``media[k][i]`` holds the processed items of ``conversations[k].media[i]``.
    """
    ids = {**tokenizer.special_ids, **tokenizer.control_ids}
    table = token_byte_lengths(tokenizer)
    results: list[Assembled | Rejected | None] = [None] * len(conversations)
    general: list[int] = []
    fast: list[int] = []
    chatml = config.chat_format == "chatml"
    ready = fast_path_ready(ids, tokenizer.lstrip_ids | tokenizer.rstrip_ids)
    # ChatML tool-call wrappers are control tokens where the tokenizer has both as special tokens (the
    # general path renders them so)
    call_tokens = TOOL_CALL_OPEN in tokenizer.special_ids and TOOL_CALL_CLOSE in tokenizer.special_ids
    for k, conv in enumerate(conversations):
        calls = call_tokens and any(turn.tool_calls for turn in conv.turns)
        use_fast = ready and (chatml or conv.template_applied) and text_only(conv) and not calls
        (fast if use_fast else general).append(k)
    if fast:
        fast_convs = [conversations[k] for k in fast]
        assembled = assemble_text_only(tokenizer, fast_convs, ids, config.train_on, config.normalize_thinking, table)
        for k, fast_result in zip(fast, assembled, strict=True):
            results[k] = fast_result
    if general:
        layouts: list[Layout | Rejected] = []
        for k in general:
            conv = conversations[k]
            try:
                if config.chat_format == "template" and not conv.template_applied:
                    from cook.tokenize.template import render_template, template_context

                    layouts.append(render_template(conv, media[k], config.train_on, template_context(tokenizer)))
                else:
                    pieces = render(conv, media[k], config.train_on, config.normalize_thinking, call_tokens)
                    layouts.append(layout(pieces, ids, tokenizer.lstrip_ids, tokenizer.rstrip_ids))
            except Rejected as rejected:
                layouts.append(rejected)
        for k, general_result in zip(general, assemble_batch(tokenizer, layouts, table), strict=True):
            results[k] = general_result
    out: list[Tokenized] = []
    for conv, items, result in zip(conversations, media, results, strict=True):
        assert result is not None
        if isinstance(result, Rejected):
            out.append(Tokenized(conv.source, None, failure=result))
        else:
            flat = tuple(item for group in items for item in group)  # cookers number media in placeholder order
            out.append(Tokenized(conv.source, result, flat))
    return out


__all__ = ["ChatTokenizer", "Tokenized", "tokenize_batch"]
