"""Checking packs as one batch is checking each on its own: the same findings, detail for detail, whatever
pack of the batch is damaged and wherever it sits; a damaged shard is reported, never raised; the source
digests; and parallel shard scans."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from cook import format as fmt
from cook.types import Pack
from cook.validate import digests
from cook.validate.batch import Workspace
from cook.validate.digests import source_digests, span_digests
from cook.validate.scan import ShardScan, check_pack, check_packs, scan_shard
from cook.writer.shards import write_shard
from tests.unit.validate.packs_data import RULES, build, multimodal, sequence

FIELDS = ("complete", "packs", "unparsed", "sources", "tokens", "targets", "padded", "bytes", "sha256", "offsets")
DEEP = dataclasses.replace(RULES, deep=True)


def _text_packs(n: int) -> list[Pack]:
    return [build([sequence([20 + i, 21], 3 + i % 5), sequence([22] * (1 + i % 3), 9)]) for i in range(n)]


def _mutations(pack: Pack, choice: int, value: int) -> Pack:
    """One semantic change to a pack (arrays and meta.json stay well-formed .npy / JSON)."""
    ids, mask = pack.input_ids.copy(), pack.loss_mask.copy()
    cu, padded = pack.cu_seqlens.copy(), pack.cu_seqlens_padded.copy()
    seqs = list(pack.sequences)
    at = value % ids.shape[0]
    if choice == 0:
        ids[at] = value - 5
    elif choice == 1:
        mask[at] = value % 3
    elif choice == 2:
        cu[value % cu.shape[0]] += value % 7 - 3
    elif choice == 3:
        padded[value % padded.shape[0]] += value % 9 - 4
    elif choice == 4:
        seqs[0] = dataclasses.replace(seqs[0], length=seqs[0].length + value % 3 + 1)
    elif choice == 5:
        seqs[-1] = dataclasses.replace(seqs[-1], targets=max(1, seqs[-1].targets + value % 3 - 1))
    elif choice == 6:
        ids[at] = 5 + value % 5  # a control id: a placeholder in a text pack, or not
    return dataclasses.replace(
        pack, input_ids=ids, loss_mask=mask, cu_seqlens=cu, cu_seqlens_padded=padded, sequences=tuple(seqs)
    )


@settings(max_examples=300, deadline=None)
@given(
    damage=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 6), st.integers(0, 10_000)), max_size=3),
    media_at=st.integers(0, 5),
    deep=st.booleans(),
)
def test_a_batch_finds_what_each_pack_alone_finds(
    damage: list[tuple[int, int, int]], media_at: int, deep: bool
) -> None:
    packs = _text_packs(4)
    packs.insert(min(media_at, 4), multimodal())
    for which, choice, value in damage:
        packs[which] = _mutations(packs[which], choice, value)
    assume(all(s.length >= 1 for p in packs for s in p.sequences))
    rules = DEEP if deep else RULES
    assert check_packs(packs, rules) == [check_pack(pack, rules) for pack in packs]


@settings(max_examples=100, deadline=None)
@given(
    batches=st.lists(
        st.tuples(
            st.integers(1, 6),
            st.lists(st.tuples(st.integers(0, 5), st.integers(0, 6), st.integers(0, 10_000)), max_size=3),
        ),
        min_size=2,
        max_size=5,
    )
)
def test_batches_laid_out_in_one_workspace_find_what_new_arrays_find(
    batches: list[tuple[int, list[tuple[int, int, int]]]],
) -> None:
    """Batches of any size, one after another in one reused workspace (a smaller one after a larger one
    leaves stale tokens past its end): the findings of batches in new arrays."""
    space = Workspace()
    for size, damage in batches:
        packs = _text_packs(size)
        for which, choice, value in damage:
            packs[which % size] = _mutations(packs[which % size], choice, value)
        assume(all(s.length >= 1 for p in packs for s in p.sequences))
        assert check_packs(packs, RULES, space) == check_packs(packs, RULES)


def test_a_smaller_batch_in_a_workspace_sees_only_its_own_tokens() -> None:
    space = Workspace()
    large = [dataclasses.replace(p, loss_mask=np.ones_like(p.loss_mask)) for p in _text_packs(6)]
    small = _text_packs(2)
    check_packs(large, RULES, space)  # fills the buffers with ones
    ids, mask = space.take(sum(p.input_ids.shape[0] for p in small))
    assert ids.base is space.ids and mask.base is space.mask  # reused, not new
    assert check_packs(small, RULES, space) == check_packs(small, RULES) == [[], []]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damage=st.lists(st.tuples(st.integers(0, 10**9), st.integers(1, 255)), min_size=1, max_size=3))
@example(damage=[(124, 128)])  # the first size field's top digit: a member of ~2**33 bytes, past the file's end
def test_a_flipped_byte_is_reported_never_raised(tmp_path: Path, damage: list[tuple[int, int]]) -> None:
    """Any damage: the scan returns (no exception) with a problem, or with another sha256 (which the
    manifest check then reports)."""
    write_shard(str(tmp_path), 0, 0, [*_text_packs(2), multimodal(), *_text_packs(1)])
    path = tmp_path / fmt.shard_name(0)
    clean = scan_shard(str(tmp_path), path.name, 0, RULES)
    assert clean.problems_total == 0 and clean.complete
    data = bytearray(path.read_bytes())
    for where, xor in damage:
        data[where % len(data)] ^= xor
    assume(bytes(data) != path.read_bytes())  # two flips of one byte may cancel
    path.write_bytes(bytes(data))
    damaged = scan_shard(str(tmp_path), path.name, 0, RULES)
    assert damaged.problems_total > 0 or damaged.sha256 != clean.sha256


def test_clean_packs_in_a_batch_have_no_findings() -> None:
    assert check_packs([*_text_packs(3), multimodal(), *_text_packs(2)], DEEP) == [[]] * 6


@given(st.lists(st.text(min_size=0, max_size=300), min_size=1, max_size=40))
def test_source_digests_depend_only_on_the_source(sources: list[str]) -> None:
    together = source_digests(sources).tolist()
    alone = [int(source_digests([s])[0]) for s in sources]
    assert together == alone
    assert len(set(zip(sources, together, strict=True))) == len(set(sources)) == len(set(together))
    blob = io.BytesIO()
    for s in sources:
        blob.write(s.encode("utf-8", "surrogatepass"))
    lengths = np.array([len(s.encode("utf-8", "surrogatepass")) for s in sources])
    spans = span_digests(np.frombuffer(blob.getvalue(), np.uint8), np.cumsum(lengths) - lengths, lengths)
    assert spans.tolist() == together


def _reference_digest(data: bytes) -> int:
    """The module doc's formula, one word at a time in Python integers."""
    mask = (1 << 64) - 1
    h = int(digests.SEED) ^ ((len(data) * 0xC2B2AE3D27D4EB4F) & mask)
    for at in range(0, len(data), 8):
        h = ((h ^ int.from_bytes(data[at : at + 8], "little")) * 0x9FB21C651E98DF25) & mask
    for multiplier in (0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53):
        h = ((h ^ (h >> 33)) * multiplier) & mask
    return h ^ (h >> 33)


@given(st.binary(min_size=0, max_size=80), st.data())
def test_span_digests_match_the_formula_anywhere_in_the_buffer(blob: bytes, data: st.DataObject) -> None:
    spans = data.draw(st.lists(st.tuples(st.integers(0, len(blob)), st.integers(0, 40)), max_size=12))
    starts = np.array([start for start, _ in spans], dtype=np.int64)
    lengths = np.array([min(n, len(blob) - start) for start, n in spans], dtype=np.int64)  # spans may end at the end
    got = span_digests(np.frombuffer(blob, np.uint8), starts, lengths).tolist()
    assert got == [_reference_digest(blob[a : a + n]) for a, n in zip(starts.tolist(), lengths.tolist(), strict=True)]


def _same(one: ShardScan, other: ShardScan) -> None:
    assert {f: getattr(one, f) for f in FIELDS} == {f: getattr(other, f) for f in FIELDS}
    assert one.problems == other.problems
    assert one.source_digests.tolist() == other.source_digests.tolist()
    assert one.source_packs.tolist() == other.source_packs.tolist()


def test_parallel_scans_are_the_in_process_scans_in_order(tmp_path: Path) -> None:
    """``--jobs 3`` over 7 shards (chunks of one shard; one shard damaged): the same scans, in entry order."""
    from cook.validate.dataset import ValidateOptions, _scan_all
    from cook.validate.manifest import ShardEntry

    root = tmp_path
    entries = []
    for shard in range(7):
        write_shard(str(root), shard, 3 * shard, _text_packs(3))
        entries.append(ShardEntry(fmt.shard_name(shard), first_pack=3 * shard))
    damaged = root / fmt.shard_name(4)
    data = bytearray(damaged.read_bytes())
    data[600] ^= 0xFF  # inside the first member's data
    damaged.write_bytes(bytes(data))
    alone = _scan_all(str(root), entries, RULES, ValidateOptions(jobs=1))
    seen: list[tuple[int, int]] = []
    together = _scan_all(str(root), entries, RULES, ValidateOptions(jobs=3, on_shard=lambda d, t: seen.append((d, t))))
    assert [s.name for s in together] == [e.name for e in entries]
    for one, other in zip(together, alone, strict=True):
        _same(one, other)
    assert alone[4].problems_total > 0 and not any(s.problems_total for i, s in enumerate(alone) if i != 4)
    assert seen == [(i + 1, 7) for i in range(7)]
