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


def test_every_job_crosses_to_an_actor_as_json_and_comes_back_equal() -> None:
    """The driver's calls carry ``encode_jobs``: JSON, so the actor unpickles nothing. Every job type
    and an attempt with a trace and crashed records come back equal; a repack unit's reads keep their
    arrays and dtypes; a path from an undecodable file name (a lone surrogate) survives."""
    from cook.runner.units import (
        Attempt,
        IndexTask,
        LineCountTask,
        SequenceReads,
        ShardTask,
        Unit,
        WindowTask,
        WriteTask,
        decode_jobs,
        encode_jobs,
    )

    window = WindowTask(7, ((3, 0, 120), (4, 0, 55)))
    reads = SequenceReads(
        ("/in/a/shard-000000.tar", "/in/b/shard-000001.tar"),
        np.array([0, 1, 1], np.int32),
        np.array([0, 2**40, 512], np.int64),
        np.array([2, 0, 5], np.int32),
    )
    jobs = [
        (Unit(0, "/data/caf\udce9.jsonl", "jsonl", (0, 4096), None, 4096), Attempt()),
        (Unit(1, "/data/b.parquet", "parquet", None, 1, 9), Attempt("/out/.trace-1", frozenset({5, 2}))),
        (Unit(2, "/in/a/cook_manifest.json", "cooked", (10, 13), 11, 300, reads=reads), Attempt()),
        (window, Attempt()),
        (
            WriteTask((ShardTask(12, 3000, window, 0, 256), ShardTask(13, 3256, window, 256, 300)), heavy=True),
            Attempt(),
        ),
        (IndexTask(14), Attempt()),
        (LineCountTask(3, "/data/big.jsonl", ((0, 100), (100, 250))), Attempt()),
    ]
    payload = encode_jobs(jobs)
    json.loads(payload)  # plain JSON: no pickle opcode in it
    back = decode_jobs(payload)
    assert back == jobs
    got = back[2][0]
    assert isinstance(got, Unit) and got.reads is not None
    for name in ("shard", "offset", "seq"):
        mine, theirs = getattr(reads, name), getattr(got.reads, name)
        assert theirs.dtype == mine.dtype and theirs.tolist() == mine.tolist()
    assert got.reads.shards == reads.shards
