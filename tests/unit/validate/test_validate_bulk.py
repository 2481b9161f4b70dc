"""The bulk fast path (``bulk.bulk_scan``) against the streaming reference (``scan.stream_shard``): on a clean
shard both return the same ``ShardScan``; on any damaged shard the fast path either steps aside (None)
or the reference finds nothing either. So the fast path can never hide a problem, whatever it is."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cook import format as fmt
from cook.types import Pack
from cook.validate import digests
from cook.validate.bulk import bulk_scan
from cook.validate.digests import source_digests, span_digests
from cook.validate.meta_columns import canonical_columns, json_columns
from cook.validate.scan import ShardScan, scan_shard, stream_shard
from cook.writer.shards import write_shard
from tests.unit.validate.packs_data import RULES, build, image_block, members, multimodal, sequence, write_tar

FIELDS = ("complete", "packs", "unparsed", "sources", "tokens", "targets", "padded", "bytes", "sha256", "offsets")


def _text_packs(n: int) -> list[Pack]:
    return [build([sequence([20 + i, 21], 3 + i % 5), sequence([22] * (1 + i % 3), 9)]) for i in range(n)]


def _same(fast: ShardScan, reference: ShardScan) -> None:
    assert {f: getattr(fast, f) for f in FIELDS} == {f: getattr(reference, f) for f in FIELDS}
    assert fast.problems == reference.problems
    pairs = sorted(zip(fast.source_digests.tolist(), fast.source_packs.tolist(), strict=True))
    assert pairs == sorted(zip(reference.source_digests.tolist(), reference.source_packs.tolist(), strict=True))


@pytest.mark.parametrize("kinds", ["text", "mixed", "media"])
def test_clean_shards_give_the_reference_scan(tmp_path: Path, kinds: str) -> None:
    packs = {"text": _text_packs(7), "mixed": [*_text_packs(3), multimodal(), *_text_packs(2)], "media": [multimodal()]}
    write_shard(str(tmp_path), 0, 5, packs[kinds])
    name = fmt.shard_name(0)
    fast = bulk_scan(str(tmp_path), name, 5, RULES, True)
    assert fast is not None
    reference = stream_shard(str(tmp_path), name, 5, RULES, True)
    assert reference.problems_total == 0 and reference.complete
    _same(fast, reference)
    _same(scan_shard(str(tmp_path), name, 5, RULES, False), stream_shard(str(tmp_path), name, 5, RULES, False))


def test_a_media_heavy_shard_is_hashed_by_reading(tmp_path: Path) -> None:
    """A first pack with >= 1 MiB of patches: the shard is not mapped up front and is hashed by a plain read."""
    from cook.validate.tar_layout import map_shard

    big = build([sequence([20, *image_block(400)], 3)], media=[("image",)], sizes=[[1, 640, 640]])
    rules = dataclasses.replace(RULES, seq_len=2048)
    write_shard(str(tmp_path), 0, 0, [big, *_text_packs(2)])
    mapped = map_shard(str(tmp_path / fmt.shard_name(0)))
    assert mapped is not None and mapped[1]  # media-heavy
    mapped[0].close()
    fast = bulk_scan(str(tmp_path), fmt.shard_name(0), 0, rules, True)
    assert fast is not None
    _same(fast, stream_shard(str(tmp_path), fmt.shard_name(0), 0, rules, True))


def test_a_tarfile_written_shard_is_fast_too(tmp_path: Path) -> None:
    path = tmp_path / fmt.shard_name(0)
    write_tar(path, [(fmt.pack_key(i), members(pack)) for i, pack in enumerate(_text_packs(4))])
    fast = bulk_scan(str(tmp_path), path.name, 0, RULES, True)
    assert fast is not None
    _same(fast, stream_shard(str(tmp_path), path.name, 0, RULES, True))


@given(st.lists(st.binary(min_size=512, max_size=512), min_size=1, max_size=6), st.booleans())
def test_header_byte_sums_are_exact(rows: list[bytes], saturated: bool) -> None:
    """The tar checksum's byte sums, eight bytes at a time, equal the plain sums (all-0xFF rows included)."""
    from cook.validate.tar_layout import _byte_sums

    table = np.frombuffer(b"".join(rows), np.uint8).reshape(len(rows), 512).copy()
    if saturated:
        table[0] = 255
    assert _byte_sums(table).tolist() == table.sum(axis=1, dtype=np.int64).tolist()


@pytest.mark.parametrize("case", ["reordered", "adjacent", "apart"])
def test_member_order_and_duplicates_in_the_layout(tmp_path: Path, case: str) -> None:
    """Members in another order than ``format.MEMBERS`` are still one pack; a member twice never is."""
    import mmap

    from cook.validate.tar_layout import read_layout

    named = list(members(_text_packs(1)[0]).items())
    order = {"reordered": named[::-1], "adjacent": [named[0], *named], "apart": [*named, named[0]]}[case]
    path = tmp_path / fmt.shard_name(0)
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in order:
            info = tarfile.TarInfo(f"{fmt.pack_key(0)}.{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, prot=mmap.PROT_READ) as data:
        layout = read_layout(data)
        assert (layout is not None) == (case == "reordered")
        if layout is not None:
            assert layout.keys == [fmt.pack_key(0)] and int((layout.at >= 0).sum()) == len(named)
            del layout  # its arrays are copies; the mapping closes with the block


def test_the_fast_path_steps_aside_for_a_problem(tmp_path: Path) -> None:
    write_shard(str(tmp_path), 0, 0, _text_packs(3))
    name = fmt.shard_name(0)
    assert bulk_scan(str(tmp_path), name, 1, RULES, True) is None  # keys out of sequence
    scan = scan_shard(str(tmp_path), name, 1, RULES, True)
    assert {p.code for p in scan.problems} == {"pack_key"}


@st.composite
def _damage(draw: st.DrawFn) -> tuple[int, int]:
    return draw(st.integers(0, 10**9)), draw(st.integers(1, 255))


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(damage=st.lists(_damage(), min_size=1, max_size=3), mixed=st.booleans())
def test_a_flipped_byte_is_never_vouched_for_wrongly(
    tmp_path: Path, damage: list[tuple[int, int]], mixed: bool
) -> None:
    packs = [*_text_packs(2), multimodal(), *_text_packs(1)] if mixed else _text_packs(4)
    write_shard(str(tmp_path), 0, 0, packs)
    path = tmp_path / fmt.shard_name(0)
    data = bytearray(path.read_bytes())
    for where, xor in damage:
        data[where % len(data)] ^= xor
    path.write_bytes(bytes(data))
    fast = bulk_scan(str(tmp_path), path.name, 0, RULES, True)
    reference = stream_shard(str(tmp_path), path.name, 0, RULES, True)
    if fast is not None:
        assert reference.problems_total == 0, reference.problems
        _same(fast, reference)


@pytest.mark.parametrize("member", [fmt.LOSS_MASK, fmt.CU_SEQLENS_PADDED, fmt.INPUT_IDS, fmt.CU_SEQLENS])
def test_every_changed_header_byte_is_never_vouched_for_wrongly(tmp_path: Path, member: str) -> None:
    """Each byte of one pack's ``.npy`` header flipped (loss_mask and cu_seqlens_padded are checked at once
    against their companions' headers): the fast path steps aside, or the reference finds nothing either."""
    from cook.validate.tar_layout import map_shard, read_layout

    write_shard(str(tmp_path), 0, 0, _text_packs(3))
    path = tmp_path / fmt.shard_name(0)
    clean = path.read_bytes()
    mapped = map_shard(str(path))
    assert mapped is not None
    layout = read_layout(mapped[0])
    mapped[0].close()
    assert layout is not None
    at = int(layout.at[1, fmt.MEMBERS.index(member)])
    for where in range(at, at + 128):
        for xor in (0x01, 0x20):
            data = bytearray(clean)
            data[where] ^= xor
            path.write_bytes(bytes(data))
            fast = bulk_scan(str(tmp_path), path.name, 0, RULES, True)
            if fast is not None:
                reference = stream_shard(str(tmp_path), path.name, 0, RULES, True)
                assert reference.problems_total == 0, (where, xor, reference.problems)
                _same(fast, reference)


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
        seqs[0] = dataclasses.replace(seqs[0], length=seqs[0].length + value % 3 - 1)
    elif choice == 5:
        seqs[-1] = dataclasses.replace(seqs[-1], targets=max(1, seqs[-1].targets + value % 3 - 1))
    elif choice == 6:
        seqs[0] = dataclasses.replace(seqs[0], source=seqs[-1].source)
    elif choice == 7:
        ids[at] = 5 + value % 5  # a control id: a placeholder in a text pack, or not
    return dataclasses.replace(
        pack, input_ids=ids, loss_mask=mask, cu_seqlens=cu, cu_seqlens_padded=padded, sequences=tuple(seqs)
    )


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.integers(0, 3), choice=st.integers(0, 7), value=st.integers(0, 10_000))
def test_a_changed_pack_is_never_vouched_for_wrongly(tmp_path: Path, which: int, choice: int, value: int) -> None:
    packs = _text_packs(4)
    packs[which] = _mutations(packs[which], choice, value)
    try:
        write_shard(str(tmp_path), 0, 0, packs)
    except ValueError:
        return  # the writer refuses it (e.g. a negative length); nothing to validate
    name = fmt.shard_name(0)
    fast = bulk_scan(str(tmp_path), name, 0, RULES, True)
    reference = stream_shard(str(tmp_path), name, 0, RULES, True)
    if fast is not None:
        assert reference.problems_total == 0, reference.problems
        _same(fast, reference)


def test_meta_columns_canonical_and_json_agree() -> None:
    packs = _text_packs(5)
    truncated = dataclasses.replace(packs[1].sequences[0], truncated=True)
    packs[1] = dataclasses.replace(packs[1], sequences=(truncated, *packs[1].sequences[1:]))
    metas = [members(pack)[fmt.META] for pack in packs]
    counts = np.array([len(pack.sequences) for pack in packs])
    canonical = canonical_columns(metas, counts)
    assert canonical is not None
    for got, want in zip(canonical, json_columns(metas, counts), strict=True):
        assert got.tolist() == want.tolist()
    assert canonical[0].tolist() == [s.length for p in packs for s in p.sequences]
    assert canonical[2].tolist() == source_digests([s.source for p in packs for s in p.sequences]).tolist()
    spaced = [json.dumps(json.loads(meta)).encode() for meta in metas]  # valid, not canonical
    assert canonical_columns(spaced, counts) is None
    assert [a.tolist() for a in json_columns(spaced, counts)] == [a.tolist() for a in canonical]


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


_SOURCE_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)


@st.composite
def _edited_metas(draw: st.DrawFn) -> tuple[list[bytes], np.ndarray]:
    """Canonical meta.json members (as the writer writes them), then a few random byte edits."""
    metas, counts = [], []
    for _ in range(draw(st.integers(1, 3))):
        n = draw(st.integers(1, 3))
        sequences = [
            {
                "length": draw(st.integers(1, 10**6) | st.integers(1, 10**12)),  # > 8 digits: the regex path
                "media": [],
                "source": draw(_SOURCE_TEXT),
                "targets": draw(st.integers(1, 999)),
                **({"truncated": True} if draw(st.integers(0, 9)) == 0 else {}),  # the regex path too
            }
            for _ in range(n)
        ]
        metas.append(
            json.dumps(
                {"schema_version": 1, "sequences": sequences}, sort_keys=True, ensure_ascii=False, separators=(",", ":")
            ).encode()
        )
        counts.append(n)
    for _ in range(draw(st.integers(0, 2))):
        i = draw(st.integers(0, len(metas) - 1))
        data = bytearray(metas[i])
        at = draw(st.integers(0, len(data)))
        byte = draw(st.sampled_from([*b'{}[],:"0123456789ax\\ \n\t', 0, 0xC3, 0x80]))
        edit = draw(st.sampled_from(["insert", "replace", "delete"]))
        if edit == "insert":
            data.insert(at, byte)
        elif at < len(data):
            data[at : at + 1] = b"" if edit == "delete" else bytes([byte])
        metas[i] = bytes(data)
    return metas, np.array(counts)


def _canonical(meta: bytes) -> int | None:
    """The oracle: the number of sequences of a member that ``json.loads`` reads as schema v1 with no media and
    that is byte for byte what the writer writes for it, with no escape; None otherwise."""
    try:
        body = json.loads(meta.decode("utf-8"))
    except ValueError:
        return None
    again = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()
    if again != meta or b"\\" in meta or not isinstance(body, dict) or set(body) != {"schema_version", "sequences"}:
        return None
    entries = body["sequences"]
    if body["schema_version"] != 1 or type(body["schema_version"]) is not int or not isinstance(entries, list):
        return None
    plain = all(
        isinstance(e, dict)
        and set(e) - {"truncated"} == {"length", "media", "source", "targets"}
        and e.get("truncated", True) is True
        and type(e["length"]) is int
        and type(e["targets"]) is int
        and 1 <= e["length"] < 10**18
        and 1 <= e["targets"] < 10**18
        and e["media"] == []
        and isinstance(e["source"], str)
        and e["source"] != ""
        for e in entries
    )
    return len(entries) if plain and entries else None


@settings(max_examples=400, deadline=None)
@given(_edited_metas())
def test_canonical_columns_accept_exactly_canonical_members(case: tuple[list[bytes], np.ndarray]) -> None:
    from cook.validate.meta_columns import Irregular

    metas, counts = case
    expected = [_canonical(meta) for meta in metas] == counts.tolist()
    try:
        found = canonical_columns(metas, counts)
    except Irregular:
        found = None  # canonical, but another count of sequences than cu_seqlens: stream_shard names it
    assert (found is not None) == expected, metas
    if found is not None:
        for got, want in zip(found, json_columns(metas, counts), strict=True):
            assert got.tolist() == want.tolist()
    else:
        with contextlib.suppress(Irregular):
            json_columns(metas, counts)  # never a crash on any edit


@pytest.mark.parametrize("truncated", [False, True])
def test_canonical_columns_refuse_every_changed_byte(truncated: bool) -> None:
    """Every byte of a canonical batch replaced by each of a few bytes, or deleted: accepted exactly when the
    oracle still reads it as canonical (the fixed-offset path without, the regular expression with a truncated
    entry), and then read as ``json_columns`` reads it."""
    from cook.validate.meta_columns import Irregular

    entries = [
        {"length": 151, "media": [], "source": "a.jsonl#1", "targets": 130},
        {"length": 20, "media": [], "source": "b", "targets": 9, **({"truncated": True} if truncated else {})},
    ]
    metas = [
        json.dumps({"schema_version": 1, "sequences": entries[:n]}, sort_keys=True, separators=(",", ":")).encode()
        for n in (2, 1)
    ]
    counts = np.array([2, 1])
    for member in range(2):
        for at in range(len(metas[member])):
            for byte in [*b'{}[],:"019ax\\ \n\t', 0, 0x80, None]:
                edited = bytearray(metas[member])
                edited[at : at + 1] = b"" if byte is None else bytes([byte])
                batch = [bytes(edited) if i == member else meta for i, meta in enumerate(metas)]
                expected = [_canonical(meta) for meta in batch] == counts.tolist()
                try:
                    found = canonical_columns(batch, counts)
                except Irregular:
                    found = None
                assert (found is not None) == expected, batch
                if found is not None:
                    for got, want in zip(found, json_columns(batch, counts), strict=True):
                        assert got.tolist() == want.tolist()


@given(st.lists(st.binary(min_size=0, max_size=10), min_size=1, max_size=20), st.binary(max_size=12))
def test_decimals_read_exactly_the_canonical_numbers(spans: list[bytes], junk: bytes) -> None:
    """``byte_words.decimals`` of spans anywhere in a buffer: the number where a span is 1 to 8 digits with no
    leading zero (and all are), else None; ``literal_at`` finds exactly the spans equal to a literal."""
    from cook.validate.byte_words import decimals, literal_at, words

    buffer = bytearray(b"        ")  # every span ends 8 or more bytes in
    starts = []
    for span in spans:
        buffer += junk[: len(buffer) % 3]
        starts.append(len(buffer))
        buffer += span
    buffer += bytes(16)
    text = np.frombuffer(bytes(buffer), np.uint8)
    at = np.array(starts, dtype=np.int64)
    ends = at + np.array([len(span) for span in spans], dtype=np.int64)
    canonical = all(1 <= len(v) <= 8 and v.isdigit() and v.isascii() and v[:1] != b"0" for v in spans)
    found = decimals(words(text), at, ends)
    assert (found is not None) == canonical
    if found is not None:
        assert found.tolist() == [int(v) for v in spans]
    for literal in (spans[0], b"0123456789ab"[: len(spans[0]) + 3]):
        if literal:
            expected = all(bytes(buffer[a : a + len(literal)]) == literal for a in starts)
            assert literal_at(words(text), at, literal) == expected


def test_parallel_scans_are_the_in_process_scans_in_order(tmp_path: Path) -> None:
    """``--jobs 3`` over 7 shards (chunks of one shard; one shard damaged): the same scans, in entry order."""
    from cook.validate.dataset import ValidateOptions, _scan_all
    from cook.validate.manifest import ShardEntry

    entries = []
    for shard in range(7):
        write_shard(str(tmp_path), shard, 3 * shard, _text_packs(3))
        entries.append(ShardEntry(fmt.shard_name(shard), first_pack=3 * shard))
    damaged = tmp_path / fmt.shard_name(4)
    data = bytearray(damaged.read_bytes())
    data[600] ^= 0xFF  # inside the first member's data: the fast path steps aside, the walk names it
    damaged.write_bytes(bytes(data))
    alone = _scan_all(str(tmp_path), entries, RULES, ValidateOptions(jobs=1))
    seen: list[tuple[int, int]] = []
    together = _scan_all(
        str(tmp_path), entries, RULES, ValidateOptions(jobs=3, on_shard=lambda d, t: seen.append((d, t)))
    )
    assert [s.name for s in together] == [e.name for e in entries]
    for fast, reference in zip(together, alone, strict=True):
        _same(fast, reference)
    assert alone[4].problems_total > 0 and not any(s.problems_total for i, s in enumerate(alone) if i != 4)
    assert seen == [(i + 1, 7) for i in range(7)]
