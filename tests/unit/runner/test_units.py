"""UnitResult crosses Ray pickled columnar; the round trip must give back every field."""

import pickle

import numpy as np

from cook.errors import RejectReason
from cook.runner.units import UnitResult
from cook.types import MediaItem, PlaceholderBlock, RejectRecord, TokenizedSample


def test_unit_result_round_trips_through_pickle() -> None:
    image = MediaItem(
        "image",
        (PlaceholderBlock("<img>", "<image>", 1, "</img>"),),
        patches=np.full((4, 768), 7, np.uint8),
        size=(1, 32, 32),
        visual_kind="image",
    )
    samples = (
        TokenizedSample("a.jsonl#1", np.arange(5, dtype=np.int32), np.array([0, 0, 1, 1, 0], np.uint8)),
        TokenizedSample("b.tar#k", np.arange(3, dtype=np.int32), np.array([0, 1, 1], np.uint8), (image,), 2, True),
    )
    result = UnitResult(4, samples, (RejectRecord("a.jsonl#2", RejectReason.BAD_JSON, "x"),), 3)
    back = pickle.loads(pickle.dumps(result, protocol=5))
    assert (back.unit, back.records_in, back.rejects) == (4, 3, result.rejects)
    for got, want in zip(back.samples, samples, strict=True):
        assert (got.source, got.media_end, got.truncated) == (want.source, want.media_end, want.truncated)
        assert got.input_ids.tolist() == want.input_ids.tolist() and got.loss_mask.tolist() == want.loss_mask.tolist()
        assert got.input_ids.dtype == np.int32 and got.loss_mask.dtype == np.uint8
        assert len(got.media) == len(want.media)
    assert (back.samples[1].media[0].patches == 7).all()
    empty = pickle.loads(pickle.dumps(UnitResult(0, (), (), 0)))
    assert empty.samples == () and empty.records_in == 0
