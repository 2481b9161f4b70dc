"""Token ids (SPEC §8, §9): every id is in ``[0, vocab_size)``, and every padding position holds the pad id.

``vocab_size`` and ``pad_id`` come from the manifest's ``tokenizer`` entry (``len(tokenizer)``, so the
added special tokens count); when one is unknown its check is skipped.
"""

from __future__ import annotations

import numpy as np

from cook import format as fmt
from cook.types import Pack
from cook.validate.problems import Code, Finding, TokenInfo


def check_range(pack: Pack, tokens: TokenInfo) -> list[Finding]:
    """All of ``input_ids`` in ``[0, vocab_size)`` (needs no boundaries)."""
    if tokens.vocab_size is None or not pack.input_ids.size:
        return []
    ids = pack.input_ids
    if int(ids.min()) >= 0 and int(ids.max()) < tokens.vocab_size:
        return []
    bad = np.flatnonzero((ids < 0) | (ids >= tokens.vocab_size))
    t = int(bad[0])
    return [
        (
            Code.TOKEN_RANGE,
            f"{fmt.INPUT_IDS} has {bad.size} ids outside [0, {tokens.vocab_size}) (token {t}: id {ids[t]})",
        )
    ]


def check_padding(pack: Pack, tokens: TokenInfo, padding: np.ndarray) -> list[Finding]:
    """Padding positions (bool [T]) hold the pad id."""
    if tokens.pad_id is None:
        return []
    wrong = np.flatnonzero(padding & (pack.input_ids != tokens.pad_id))
    if not wrong.size:
        return []
    t = int(wrong[0])
    return [
        (
            Code.PADDING_TOKEN,
            f"{fmt.INPUT_IDS} has {wrong.size} padding tokens that are not the pad id "
            f"{tokens.pad_id} (token {t}: id {pack.input_ids[t]})",
        )
    ]
