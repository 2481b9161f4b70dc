"""Token ids (SPEC §8, §9): every id is in ``[0, vocab_size)``, and every padding position holds the pad id.

``vocab_size`` and ``pad_id`` come from the manifest's ``tokenizer`` entry (``len(tokenizer)``, so the
added special tokens count); when one is unknown its check is skipped.
"""

from __future__ import annotations

import numpy as np

from cook import format as fmt
from cook.validate.batch import Findings, PackBatch, Spans, per_pack
from cook.validate.problems import Code, TokenInfo


def check_range(batch: PackBatch, tokens: TokenInfo, findings: Findings) -> None:
    """All of ``input_ids`` in ``[0, vocab_size)`` (needs no boundaries)."""
    ids, vocab = batch.ids, tokens.vocab_size
    assert ids.dtype == np.int32, ids.dtype
    if vocab is None or not ids.size or int(ids.view(np.uint32).max()) < vocab:  # a negative id reads >= 2**31
        return
    for k, t, count in per_pack(np.flatnonzero((ids < 0) | (ids >= vocab)), batch.base):
        findings[k].append(
            (
                Code.TOKEN_RANGE,
                f"{fmt.INPUT_IDS} has {count} ids outside [0, {vocab}) (token {t - batch.base[k]}: id {ids[t]})",
            )
        )


def check_padding(batch: PackBatch, tokens: TokenInfo, spans: Spans, findings: Findings) -> None:
    """Padding positions hold the pad id (the packs in ``spans`` only)."""
    if tokens.pad_id is None or not spans.padding.size:
        return
    wrong = spans.padding[batch.ids[spans.padding] != tokens.pad_id]
    for k, t, count in per_pack(wrong, batch.base):
        findings[k].append(
            (
                Code.PADDING_TOKEN,
                f"{fmt.INPUT_IDS} has {count} padding tokens that are not the pad id "
                f"{tokens.pad_id} (token {t - batch.base[k]}: id {batch.ids[t]})",
            )
        )
