"""The tar walk (``packfiles.ShardWalk``) and its codes in ``cook validate``: packs grouped by key with exact offsets, every way a tar can be incomplete or
corrupt, the .tar.idx comparison, and Energon's collapsed split names."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cook import format as fmt
from cook.contract import frame_storage
from cook.manifest import ShardInfo
from cook.packfiles import ONLY_META, ShardWalk, _checksums, _octal, _parse_header, find_pack
from cook.validate.nv_meta import expand_braces, parse_split
from cook.validate.scan import FAULT_CODES, check_index
from cook.validate.stats import READ_ONLY
from cook.writer.members import pack_members
from tests.unit.test_manifest import MANIFEST
from tests.unit.validate.packs_data import build, members, multimodal, multimodal_members, sequence, write_tar


def _shard(tmp_path: Path, n: int = 3) -> tuple[Path, list[int]]:
    packs = [(fmt.pack_key(i), members(build([sequence([20 + i], 3 + i)]))) for i in range(n - 1)]
    packs.append((fmt.pack_key(n - 1), multimodal_members()))
    path = tmp_path / fmt.shard_name(0)
    return path, write_tar(path, packs)


def _walk(path: Path) -> tuple[ShardWalk, list[str]]:
    walk = ShardWalk(str(path))
    keys = [raw.key for raw in walk.packs()]
    return walk, keys


def _codes(walk: ShardWalk, path: Path) -> set[str]:
    return _fault_codes(walk) | {code.value for code, _ in check_index(str(path), walk.offsets, walk.complete)}


def _fault_codes(walk: ShardWalk) -> set[str]:
    return {FAULT_CODES[fault].value for fault, _ in walk.faults}


def test_walk_groups_members_and_matches_the_index(tmp_path: Path) -> None:
    path, offsets = _shard(tmp_path)
    walk = ShardWalk(str(path))
    packs = list(walk.packs())
    assert [p.key for p in packs] == [fmt.pack_key(i) for i in range(3)]
    assert [p.offset for p in packs] == offsets[:-1] and walk.offsets == offsets
    assert set(packs[2].members) == set(multimodal_members())
    assert walk.complete and _codes(walk, path) == set()
    assert walk.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert walk.bytes_read == path.stat().st_size


def test_skipped_members_are_not_read(tmp_path: Path) -> None:
    path, _ = _shard(tmp_path)
    walk = ShardWalk(str(path), hash_bytes=False, skip=frozenset({fmt.PIXEL_PATCHES, fmt.INPUT_IDS}))
    last = list(walk.packs())[-1]
    assert fmt.PIXEL_PATCHES not in last.members and fmt.MEDIA_SIZES in last.members
    named = multimodal_members()
    assert last.skipped == {fmt.INPUT_IDS: len(named[fmt.INPUT_IDS]), fmt.PIXEL_PATCHES: len(named[fmt.PIXEL_PATCHES])}


def test_frame_members_are_skipped_with_pixel_patches(tmp_path: Path) -> None:
    """``ONLY_META`` and ``cook stats``' ``READ_ONLY`` seek over stored frames as over pixel_patches.npy."""
    named = dict(pack_members(multimodal(), frame_storage("png"), frame_storage("jpeg")))
    path = tmp_path / fmt.shard_name(0)
    write_tar(path, [(fmt.pack_key(0), named)])
    frames = {name: len(data) for name, data in named.items() if fmt.parse_frame_member(name)}
    assert len(frames) == 5
    for skip in (ONLY_META, READ_ONLY):
        (raw,) = ShardWalk(str(path), hash_bytes=False, skip=skip).packs()
        assert not any(fmt.parse_frame_member(name) for name in raw.members)
        assert {name: size for name, size in raw.skipped.items() if name in frames} == frames
    (meta_only,) = ShardWalk(str(path), hash_bytes=False, skip=ONLY_META).packs()
    assert set(meta_only.members) == {fmt.META}


@pytest.mark.parametrize("cut", [1, 512, 700, 1024 + 3])
def test_truncation_anywhere_is_found(tmp_path: Path, cut: int) -> None:
    path, offsets = _shard(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: offsets[-1] + 1024 - cut] if cut <= 1024 else data[: offsets[1] + cut])
    walk, keys = _walk(path)
    assert "tar_truncated" in _codes(walk, path) and not walk.complete
    assert len(keys) < 3  # the pack that may be cut is not handed out


def test_end_marker_missing_exactly_at_a_pack_boundary(tmp_path: Path) -> None:
    path, offsets = _shard(tmp_path)
    path.write_bytes(path.read_bytes()[: offsets[-1]])
    walk, keys = _walk(path)
    assert _codes(walk, path) == {"tar_truncated"} and len(keys) == 2


def test_corrupt_headers_and_trailing_bytes(tmp_path: Path) -> None:
    path, offsets = _shard(tmp_path)
    data = bytearray(path.read_bytes())
    data[offsets[1] + 3] ^= 0x20  # a name byte of pack 1's first header: the checksum no longer matches
    path.write_bytes(bytes(data))
    assert "tar_corrupt" in _codes(*(_walk(path)[0], path))
    path, offsets = _shard(tmp_path)
    path.write_bytes(path.read_bytes() + b"\x01" * 10)
    walk, keys = _walk(path)
    assert _codes(walk, path) == {"tar_corrupt"} and len(keys) == 3


def _rewrite_checksum(data: bytearray, at: int, field: bytes) -> None:
    data[at + 148 : at + 156] = field


@pytest.mark.parametrize("layout", ["%07o\0", " %06o\0", "%06o  "])
def test_checksum_fields_laid_out_otherwise_are_read_by_value(tmp_path: Path, layout: str) -> None:
    """Tar writers lay the checksum field out in several ways (tarfile: six digits, NUL, space): a field that
    holds the right value is accepted however it is laid out, and a wrong value is caught in any layout."""
    path, offsets = _shard(tmp_path)
    data = bytearray(path.read_bytes())
    header = bytes(data[offsets[1] : offsets[1] + 512])
    actual = sum(header[:148]) + sum(header[156:]) + 8 * ord(" ")
    _rewrite_checksum(data, offsets[1], (layout % actual).encode())
    path.write_bytes(bytes(data))
    walk, keys = _walk(path)
    assert walk.faults == [] and len(keys) == 3
    _rewrite_checksum(data, offsets[1], (layout % (actual + 1)).encode())
    path.write_bytes(bytes(data))
    walk, keys = _walk(path)
    assert _fault_codes(walk) == {"tar_corrupt"} and f"checksum {actual + 1} != {actual}" in walk.faults[0][1]
    assert keys == [fmt.pack_key(0)]


def test_non_regular_members_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "pax.tar"
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("pack-000000000." + "x" * 120)
        data = b"1"
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    walk, _ = _walk(path)
    assert _fault_codes(walk) == {"tar_corrupt"}
    assert "pax header" in walk.faults[0][1]


def test_interleaved_and_duplicate_members(tmp_path: Path) -> None:
    a, b = members(build([sequence([20], 3)])), members(build([sequence([21], 3)]))
    path = tmp_path / "x.tar"
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        for key, name, data in [
            ("pack-000000000", fmt.INPUT_IDS, a[fmt.INPUT_IDS]),
            ("pack-000000001", fmt.INPUT_IDS, b[fmt.INPUT_IDS]),
            ("pack-000000000", fmt.LOSS_MASK, a[fmt.LOSS_MASK]),
            ("pack-000000000", fmt.LOSS_MASK, a[fmt.LOSS_MASK]),
        ]:
            info = tarfile.TarInfo(f"{key}.{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    walk, _ = _walk(path)
    assert _fault_codes(walk) == {"pack_key", "member_duplicate"}


def test_index_missing_or_wrong(tmp_path: Path) -> None:
    path, _ = _shard(tmp_path)
    idx = Path(str(path) + fmt.INDEX_SUFFIX)
    idx.write_bytes(idx.read_bytes()[:-8])
    assert _codes(_walk(path)[0], path) == {"idx_mismatch"}
    idx.write_bytes(b"\0" * 7)
    assert _codes(_walk(path)[0], path) == {"idx_mismatch"}
    idx.unlink()
    assert _codes(_walk(path)[0], path) == {"idx_missing"}


def test_find_pack_seeks_through_the_index(tmp_path: Path) -> None:
    _shard(tmp_path)
    shard = ShardInfo(fmt.shard_name(0), packs=3, first_pack=0, bytes=0, sha256="0" * 64)
    (tmp_path / fmt.MANIFEST_NAME).write_text(json.dumps(replace(MANIFEST, shards=(shard,)).to_dict()))
    found = find_pack(str(tmp_path), 2)
    assert found is not None and found[1].key == fmt.pack_key(2)
    assert find_pack(str(tmp_path), 3) is None


def test_collapsed_split_names() -> None:
    assert expand_braces("shard-{000008..000010}.tar") == ["shard-000008.tar", "shard-000009.tar", "shard-000010.tar"]
    assert expand_braces("{a,b}-{1..2}.tar") == ["a-1.tar", "a-2.tar", "b-1.tar", "b-2.tar"]
    text = "split_parts:\n  train:\n  - shard-{000000..000001}.tar\n  - shard-000005.tar\nexclude: []\n"
    assert parse_split(text).parts == {"train": {"shard-000000.tar", "shard-000001.tar", "shard-000005.tar"}}


def test_split_parts_and_excludes() -> None:
    block = "split_parts:\n  train:\n  - shard-{000000..000001}.tar\n  val: []\nexclude:\n- shard-000001.tar\n"
    split = parse_split(block)
    assert split.parts == {"train": {"shard-000000.tar", "shard-000001.tar"}, "val": set()}
    assert split.exclude == {"shard-000001.tar"}
    flow = "split_parts:\n  'train': [shard-000000.tar, \"shard-000002.tar\"]\nexclude: [shard-000002.tar]\n"
    assert parse_split(flow).parts == {"train": {"shard-000000.tar", "shard-000002.tar"}}
    assert parse_split(flow).exclude == {"shard-000002.tar"}
    assert parse_split("split_parts:\n  val:\n  - a.tar\n").parts == {"val": {"a.tar"}}


_FIELD_BYTES = st.sampled_from([*b"01234567", *b"89 \0+-_x", 0x80, 0xFF])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.binary(min_size=8, max_size=8), st.lists(_FIELD_BYTES, min_size=8, max_size=8).map(bytes),
                          st.integers(0, 8**6 - 1).map(lambda v: b"%06o\0 " % v),
                          st.lists(st.sampled_from(b"0123456789 -"), min_size=6, max_size=6).map(lambda d: bytes(d) + b"\0 ")),
                 min_size=1, max_size=20))  # fmt: skip
def test_header_numbers_read_as_octal_reads_them(fields: list[bytes]) -> None:
    """The checksum fields read all at once (``_checksums``) and the size field's fast path agree with
    ``_octal``, which reads every form, on tar writers' own form and on anything else."""
    table = np.zeros((len(fields), 512), np.uint8)
    table[:, 148:156] = np.frombuffer(b"".join(fields), np.uint8).reshape(-1, 8)
    assert _checksums(table).tolist() == [-1 if (v := _octal(f)) is None else v for f in fields]
    for f in fields:
        header = bytes(124) + f + f[:4] + bytes(20) + b"0" + bytes(355)  # size field: 12 bytes at 124
        parsed = _parse_header(header, 0)
        size = _octal(header[124:136])
        assert parsed == (("", size) if size is not None else "header at byte 0: unreadable size field")
