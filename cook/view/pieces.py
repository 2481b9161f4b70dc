"""One sequence's tokens -> ``Piece`` runs: the unit the page draws (a text run, a control chip, a
collapsed run of placeholders or padding).

A new piece starts where the target-ness changes, where text meets a control token, and at every
control token, except that a run of the same collapsible token (``<image>``, ``<so_embedding>``, pad)
stays one piece. So every run of ``loss_mask == 1`` is a whole number of pieces.

    ids  <|im_start|> user\\n Hi <|im_end|> \\n <|im_start|> assistant\\n Hello <|im_end|>
    mask      0          0  0      0       0       0           0        1       1
    ->   [chip] [text "user\\nHi"] [chip] [text "\\n"] [chip] [text "assistant\\n"] [text "Hello" T] [chip T]
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Final

import numpy as np

from cook import format as fmt
from cook.view.tokens import TokenView

COLLAPSIBLE: Final = (fmt.IMAGE_TOKEN, fmt.AUDIO_TOKEN, fmt.PAD_TOKEN)
_FRAME_LABEL: Final = re.compile(r"(Frame \d+ sampled at \d+(?:\.\d+)? seconds):?\s*$")


@dataclass(frozen=True, slots=True)
class Piece:
    lo: int  # first token, relative to the sequence start
    hi: int  # one past the last token
    target: bool
    control: str | None  # the control token this piece repeats; None for text
    text: str = ""  # decoded text (text pieces only)

    @property
    def tokens(self) -> int:
        return self.hi - self.lo


def split_pieces(ids: np.ndarray, mask: np.ndarray, view: TokenView) -> list[Piece]:
    """int32 [L] ids and uint8 [L] mask of one sequence -> its pieces, in order."""
    if not ids.size:
        return []
    ids64 = ids.astype(np.int64)
    controls = np.fromiter(view.controls, dtype=np.int64, count=len(view.controls))
    is_control = np.isin(ids64, controls)
    collapsible = np.isin(ids64, [i for i, name in view.controls.items() if name in COLLAPSIBLE or i == view.pad_id])
    target = mask.astype(bool)
    cut = (
        (target[1:] != target[:-1])
        | (is_control[1:] != is_control[:-1])
        | (is_control[1:] & ((ids64[1:] != ids64[:-1]) | ~collapsible[1:]))
    )
    bounds = [0, *(np.flatnonzero(cut) + 1).tolist(), int(ids.size)]
    pieces = []
    for lo, hi in itertools.pairwise(bounds):
        if is_control[lo]:
            name = view.controls[int(ids64[lo])]
            pieces.append(Piece(lo, hi, bool(target[lo]), fmt.PAD_TOKEN if int(ids64[lo]) == view.pad_id else name))
        else:
            pieces.append(Piece(lo, hi, bool(target[lo]), None, view.decode(ids64[lo:hi].tolist())))
    return pieces


def frame_labels(pieces: list[Piece]) -> dict[int, str]:
    """Piece index of each ``<image>`` run -> the "Frame i sampled at X.XX seconds" text right before its
    ``<img>`` (video frame groups; absent for images and for videos cooked without timestamps)."""
    labels = {}
    for j, piece in enumerate(pieces):
        if piece.control != fmt.IMAGE_TOKEN or j < 2 or pieces[j - 1].control != fmt.IMG_START:
            continue
        found = _FRAME_LABEL.search(pieces[j - 2].text) if pieces[j - 2].control is None else None
        if found:
            labels[j] = found.group(1)
    return labels
