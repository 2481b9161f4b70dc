"""``state.json``: read back, the typed ``RunState`` writes the same JSON again; a state.json of the
previous layout (the pack-count shortfall inside ``packing``) reads the same and is written in this one.
(``OutputDir`` saves and loads the file: tests/unit/runner/test_output_dir.py.)"""

import json

from cook.format import Counts
from cook.packing.metrics import PackingStats
from cook.runner.resume import RunState, state_from_json, state_json

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
    "shards": [SHARD],
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


def _round_trip(data: dict) -> RunState:
    state = state_from_json(json.loads(json.dumps(data)))
    assert json.loads(json.dumps(state_json(state))) == data
    return state


def test_checkpointed_state_reads_typed_and_writes_the_same_json() -> None:
    state = _round_trip(CHECKPOINTED)
    assert state.counts == Counts(12, 11, 1, 2, 900, 400, 124, 1, 30)
    assert state.windows_short_of_pack_count_multiple == 3
    assert isinstance(state.packing, PackingStats) and state.packing.sequences_per_pack == ((5, 1), (6, 1))
    assert state.packing.efficiency == 900 / (2 * 512)


def test_previous_layout_reads_the_same_and_is_written_in_this_one() -> None:
    previous = {k: v for k, v in CHECKPOINTED.items() if k != UNMET}
    previous["packing"] = {**CHECKPOINTED["packing"], UNMET: 3}
    state = state_from_json(json.loads(json.dumps(previous)))
    assert state.windows_short_of_pack_count_multiple == 3
    assert json.loads(json.dumps(state_json(state))) == CHECKPOINTED
    fresh = {**state_json(RunState("f" * 64)), "packing": {}}
    del fresh[UNMET]  # a fresh state of the previous layout: no shortfall anywhere
    assert state_from_json(fresh).windows_short_of_pack_count_multiple == 0


def test_fresh_state_has_no_counts_and_no_stats() -> None:
    fresh = state_json(RunState("f" * 64))
    assert fresh["counts"] == {} and fresh["packing"] == {} and fresh["shards"] == [] and fresh[UNMET] == 0
    state = _round_trip(fresh)
    assert state.packing is None and state.counts == Counts() and state.windows_short_of_pack_count_multiple == 0
