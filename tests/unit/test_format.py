"""The manifest's count keys and the typed ``Counts`` behind them."""

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from cook import format as fmt


def test_counts_fields_are_the_manifest_count_keys_in_order() -> None:
    assert tuple(f.name for f in dataclasses.fields(fmt.Counts)) == fmt.MANIFEST_COUNT_KEYS
    assert fmt.MANIFEST_COUNT_KEYS[: len(fmt.COUNT_KEYS)] == fmt.COUNT_KEYS
    assert set(fmt.PACKED_COUNT_KEYS) | set(fmt.RECORD_COUNT_KEYS) == set(fmt.MANIFEST_COUNT_KEYS)
    assert "records_in" not in fmt.PACKED_COUNT_KEYS and "truncated_tokens" in fmt.PACKED_COUNT_KEYS


def test_a_manifest_without_truncation_counts_reads_as_zero_truncation() -> None:
    older = {key: i + 1 for i, key in enumerate(fmt.COUNT_KEYS)}
    counts = fmt.Counts.from_dict(older)
    assert (counts.records_in, counts.padding_tokens, counts.truncated_sequences, counts.truncated_tokens) == (
        1,
        7,
        0,
        0,
    )


values = st.lists(st.integers(0, 2**40), min_size=len(fmt.MANIFEST_COUNT_KEYS), max_size=len(fmt.MANIFEST_COUNT_KEYS))


@given(values, values)
def test_counts_add_per_key_and_round_trip(a: list[int], b: list[int]) -> None:
    left, right = fmt.Counts(*a), fmt.Counts(*b)
    assert fmt.Counts.from_dict(left.to_dict()) == left
    assert list((left + right).to_dict().values()) == [x + y for x, y in zip(a, b, strict=True)]
    assert list(left.to_dict(fmt.PACKED_COUNT_KEYS)) == list(fmt.PACKED_COUNT_KEYS)


def test_sequence_meta_fields_are_the_meta_json_keys() -> None:
    from dataclasses import fields

    from cook.types import SequenceMeta

    assert tuple(f.name for f in fields(SequenceMeta)) == (*fmt.SEQUENCE_KEYS, fmt.SEQUENCE_TRUNCATED_KEY)


def test_sequence_meta_round_trips_and_writes_truncated_only_when_true() -> None:
    from cook.types import SequenceMeta

    plain = SequenceMeta("a.jsonl#1", 12, 5, ("image",))
    cut = SequenceMeta("a.jsonl#2", 9, 3, (), truncated=True)
    assert plain.to_meta() == {"source": "a.jsonl#1", "length": 12, "targets": 5, "media": ["image"]}
    assert cut.to_meta()["truncated"] is True
    assert [SequenceMeta.from_meta(s.to_meta()) for s in (plain, cut)] == [plain, cut]
