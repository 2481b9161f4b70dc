"""``state.json``: read back, the typed ``RunState`` writes the same JSON again, its shards in the shard
log. (``OutputDir`` saves and loads the files, and refuses a state.json of cook 0.1.0:
tests/unit/runner/test_output_dir.py.)"""

import json
from dataclasses import asdict

from cook.format import Counts
from cook.manifest import ShardInfo
from cook.packing.metrics import PackingStats
from cook.runner.resume import RunState, read_shard_log, shard_line, state_from_json, state_json

UNMET = "windows_short_of_pack_count_multiple"

SHARD = {"name": "shard-000000.tar", "packs": 2, "first_pack": 0, "bytes": 10240, "sha256": "ab" * 32}
CHECKPOINTED = {
    "fingerprint": "f" * 64,
    "next_unit": 3,
    "skip": 4,
    "windows": 1,
    "window_shard": 1,
    "window_pack": 2,
    "rejects_bytes": 77,
    "shard_count": 1,
    "shard_log_bytes": 143,  # len(shard_line(SHARD))
    "counts": {
        "records_in": 12,
        "records_rejected": 1,
        "packs": 2,
        "sources_packed": 11,
        "tokens": 900,
        "target_tokens": 400,
        "padding_tokens": 124,
        "truncated_sequences": 1,
        "truncated_tokens": 30,
    },
    "rejects_by_reason": {"bad_json": 1},
    "packing": {
        "capacity": 512,
        "pad_multiple": 8,
        "packs": 2,
        "sequences": 11,
        "tokens": 900,
        "pad_multiple_padding": 20,
        "tail_padding": 104,
        "sequences_per_pack": [[5, 1], [6, 1]],
        "fill_histogram": [0, 0, 0, 0, 0, 0, 0, 0, 1, 1],
    },
    "windows_short_of_pack_count_multiple": 3,
}


def _round_trip(data: dict, shards: list[ShardInfo]) -> RunState:
    state = state_from_json(json.loads(json.dumps(data)), shards)
    assert json.loads(json.dumps(state_json(state, data["shard_log_bytes"]))) == data
    return state


def test_the_shard_log_holds_one_line_per_shard() -> None:
    line = shard_line(ShardInfo(**SHARD))
    assert line.endswith(b"\n") and json.loads(line) == asdict(ShardInfo(**SHARD)) and len(line) == 143
    assert read_shard_log(line * 3) == [ShardInfo(**SHARD)] * 3


def test_checkpointed_state_reads_typed_and_writes_the_same_json() -> None:
    state = _round_trip(CHECKPOINTED, [ShardInfo(**SHARD)])
    assert state.counts == Counts(12, 11, 1, 2, 900, 400, 124, 1, 30)
    assert state.windows_short_of_pack_count_multiple == 3
    assert isinstance(state.packing, PackingStats) and state.packing.sequences_per_pack == ((5, 1), (6, 1))
    assert state.packing.efficiency == 900 / (2 * 512)


def test_fresh_state_has_no_counts_and_no_stats() -> None:
    fresh = state_json(RunState("f" * 64), 0)
    assert fresh["counts"] == {} and fresh["packing"] == {} and fresh["shard_count"] == 0 and fresh[UNMET] == 0
    state = _round_trip(fresh, [])
    assert state.packing is None and state.counts == Counts() and state.windows_short_of_pack_count_multiple == 0
