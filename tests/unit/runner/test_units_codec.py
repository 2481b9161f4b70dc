"""What crosses to the driver is JSON: every field of a summary and a shard entry comes back."""

import numpy as np

from cook.errors import RejectReason
from cook.format import Counts
from cook.manifest import ShardInfo
from cook.runner.units import ShardDone, UnitSummary, decode_result, encode_result
from cook.types import RejectRecord
from cook.writer.shards import ShardLayout


def test_unit_summary_round_trips() -> None:
    rejects = (RejectRecord("a.jsonl#2", RejectReason.BAD_JSON, 'ключ "x"\n'),)
    summary = UnitSummary(4, 9, rejects, np.array([5, 70000, 1], np.int32), np.array([0, 4096, 0], np.int32))
    back = decode_result(encode_result(summary))
    assert isinstance(back, UnitSummary)
    assert (back.unit, back.records_in, back.rejects) == (4, 9, rejects)
    assert back.lengths.dtype == np.int32 and back.lengths.tolist() == [5, 70000, 1]
    assert back.n_patches.tolist() == [0, 4096, 0]
    empty = decode_result(encode_result(UnitSummary(0, 0, (), np.zeros(0, np.int32), np.zeros(0, np.int32))))
    assert isinstance(empty, UnitSummary) and empty.samples == 0


def test_shard_done_round_trips_and_is_not_pickle() -> None:
    layout = ShardLayout(("pack-000000003",), (0, 4096), ((0, "input_ids.npy", 512, 168), (0, "meta.json", 1536, 90)))
    done = ShardDone(
        2,
        ShardInfo("shard-000002.tar", 1, 3, 10240, "ab" * 32),
        layout,
        Counts(packs=1, tokens=7, truncated_tokens=2),
        "node",
    )
    payload = encode_result(done)
    assert payload.startswith(b"{")  # JSON, never a pickle stream
    assert decode_result(payload) == done
