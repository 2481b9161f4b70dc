"""A sequence's tokens -> pieces: exact pieces on a small case, target runs against a naive count."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from cook import format as fmt
from cook.view.pieces import Piece, frame_labels, split_pieces
from cook.view.tokens import TokenView, from_ids
from tests.unit.validate.packs_data import IDS

WORDS = {100: "Hi", 101: " there", 102: "user\n", 103: "assistant\n", 104: "Frame 1 sampled at 0.50 seconds: "}


def _view() -> TokenView:
    base = from_ids(IDS, pad_id=0)
    return TokenView(decode=lambda ids: "".join(WORDS[i] for i in ids), controls=base.controls, pad_id=0)


def test_pieces_split_at_targets_and_controls_and_collapse_placeholders() -> None:
    ids = [1, 102, 100, 6, 5, 5, 5, 7, 2, 1, 103, 100, 101, 2, 0, 0]
    mask = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0]
    pieces = split_pieces(np.array(ids, np.int32), np.array(mask, np.uint8), _view())
    assert pieces == [
        Piece(0, 1, False, fmt.IM_START),
        Piece(1, 3, False, None, "user\nHi"),
        Piece(3, 4, False, fmt.IMG_START),
        Piece(4, 7, False, fmt.IMAGE_TOKEN),
        Piece(7, 8, False, fmt.IMG_END),
        Piece(8, 9, False, fmt.IM_END),
        Piece(9, 10, False, fmt.IM_START),
        Piece(10, 11, False, None, "assistant\n"),
        Piece(11, 13, True, None, "Hi there"),
        Piece(13, 14, True, fmt.IM_END),
        Piece(14, 16, False, fmt.PAD_TOKEN),
    ]


def test_control_tokens_that_do_not_collapse_stay_one_piece_each() -> None:
    pieces = split_pieces(np.array([2, 2, 2], np.int32), np.zeros(3, np.uint8), _view())
    assert [(p.lo, p.hi, p.control) for p in pieces] == [(0, 1, fmt.IM_END), (1, 2, fmt.IM_END), (2, 3, fmt.IM_END)]


def test_frame_labels_come_from_the_text_before_each_img() -> None:
    ids = [104, 6, 5, 5, 7, 100, 6, 5, 7]
    pieces = split_pieces(np.array(ids, np.int32), np.zeros(len(ids), np.uint8), _view())
    assert frame_labels(pieces) == {2: "Frame 1 sampled at 0.50 seconds"}  # the second <image> run has no label


@given(st.lists(st.tuples(st.sampled_from([100, 101, 1, 2, 5, 9, 0]), st.integers(0, 1)), min_size=1, max_size=40))
def test_pieces_tile_the_sequence_and_never_straddle_a_target_edge(tokens: list[tuple[int, int]]) -> None:
    ids = np.array([t for t, _ in tokens], np.int32)
    mask = np.array([m for _, m in tokens], np.uint8)
    pieces = split_pieces(ids, mask, _view())
    assert pieces[0].lo == 0 and pieces[-1].hi == len(tokens)
    for a, b in itertools.pairwise(pieces):
        assert a.hi == b.lo
    for piece in pieces:
        assert set(mask[piece.lo : piece.hi].tolist()) == {int(piece.target)}
        if piece.control is not None:
            assert len(set(ids[piece.lo : piece.hi].tolist())) == 1
