"""What crosses to the driver is JSON: every field of a unit's counts, a window's and a shard's entry comes back."""

import json

import numpy as np
import pytest

from cook.errors import RejectReason
from cook.format import Counts
from cook.manifest import ShardInfo
from cook.packing.metrics import stats_for_flat
from cook.runner.units import (
    IndexDone,
    Rejects,
    ShardDone,
    UnitDone,
    UnitSummary,
    WindowDone,
    WriteDone,
    decode_result,
    encode_result,
    encode_staged,
    staged_lengths,
)
from cook.types import RejectRecord
from cook.writer.rejects import reject_line


def test_unit_done_round_trips_and_carries_no_per_sample_column() -> None:
    records = (
        RejectRecord("a.jsonl#2", RejectReason.BAD_JSON, 'ключ "x"\n'),
        RejectRecord("a.jsonl#5", RejectReason.TOO_LONG, "long"),
        RejectRecord("a.jsonl#7", RejectReason.BAD_JSON, ""),
    )
    summary = UnitSummary(4, 9, records, np.array([5, 70000, 1], np.int32), np.array([0, 4096, 0], np.int32), True)
    payload = encode_result(summary.done())
    assert set(json.loads(payload)) == {"unit", "records_in", "reject_lines", "rejects_by_reason", "samples", "tokens"}
    rejects = Rejects("".join(map(reject_line, records)), (("bad_json", 2), ("too_long", 1)))  # first-seen order
    assert decode_result(payload) == UnitDone(4, 9, rejects, 3, 70006)
    assert len(rejects) == 3
    empty = UnitSummary(0, 0, (), np.zeros(0, np.int32), np.zeros(0, np.int32), False).done()
    assert decode_result(encode_result(empty)) == UnitDone(0, 0, Rejects(), 0, 0)


def test_a_reason_no_cook_knows_is_refused() -> None:
    payload = b'{"unit":1,"records_in":1,"reject_lines":"","rejects_by_reason":[["made_up",1]],"samples":0,"tokens":0}'
    with pytest.raises(ValueError, match="made_up"):
        decode_result(payload)


@pytest.mark.parametrize("heavy", [False, True])
def test_the_staged_sidecar_holds_the_counts_the_lengths_and_the_heavy_flag(heavy: bool) -> None:
    summary = UnitSummary(4, 3, (), np.array([5, 70000, 1], np.int32), np.array([0, 4096, 0], np.int32), heavy)
    payload = encode_staged(summary)
    assert decode_result(payload) == UnitDone(4, 3, Rejects(), 3, 70006)
    lengths, n_patches, staged_heavy = staged_lengths(payload)
    assert lengths.dtype == np.int32 and lengths.tolist() == [5, 70000, 1] and n_patches.tolist() == [0, 4096, 0]
    assert staged_heavy is heavy
    body = json.loads(payload)
    del body["heavy"]  # a unit staged by the cook before the flag, met by a resume
    assert staged_lengths(json.dumps(body).encode())[2] is True  # taken as heavy: a shard per job, same bytes


def test_window_done_round_trips() -> None:
    stats = stats_for_flat(np.array([5, 9, 30]), np.array([2, 0, 1]), np.array([0, 1, 3]), 32, 4)
    for heavy in (False, True):
        done = WindowDone(7, 2, stats, True, heavy)
        assert decode_result(encode_result(done)) == done


def test_write_done_round_trips_its_shards_in_order_and_is_not_pickle() -> None:
    shards = tuple(
        ShardDone(
            k, ShardInfo(f"shard-00000{k}.tar", 1, 3 + k, 10240, f"{k:02x}" * 32), Counts(packs=1, tokens=7 + k), "node"
        )
        for k in (2, 3, 4)
    )
    one = encode_result(WriteDone(shards[:1]))
    assert one.startswith(b"{")  # JSON, never a pickle stream
    assert len(one) < 450  # no per-pack rows: those stay with the shard (cook.writer.index_rows)
    done = WriteDone(shards)
    assert decode_result(encode_result(done)) == done


def test_index_done_round_trips() -> None:
    assert decode_result(encode_result(IndexDone(12))) == IndexDone(12)
