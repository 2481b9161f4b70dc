"""cook's in-run Energon index holds exactly what ``energon prepare`` writes for the same shards."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from cook import format as fmt
from cook.manifest import ShardInfo
from cook.packing.packer import build_pack
from cook.types import TokenizedSample
from cook.writer.energon_index import EnergonIndex
from cook.writer.shards import write_shard
from tests.energon_prepare import energon_prepare


def _packs(seed: int, count: int) -> list:
    rng = np.random.default_rng(seed)
    packs = []
    for p in range(count):
        lengths = rng.integers(1, 40, size=rng.integers(1, 4))
        samples = [
            TokenizedSample(f"s#{p}.{i}", rng.integers(0, 100, n).astype(np.int32), np.ones(n, np.uint8))
            for i, n in enumerate(lengths)
        ]
        packs.append(build_pack(samples, 0, 8))
    return packs


def _write(out: Path, index: EnergonIndex, shard_sizes: list[int], first_shard: int = 0) -> list[ShardInfo]:
    shards, first_pack = [], 0
    for i, size in enumerate(shard_sizes):
        if i >= first_shard:
            info, layout = write_shard(str(out), i, first_pack, _packs(i, size))
            index.add_shards([(i, layout)])
            shards.append(info)
        else:
            shards.append(ShardInfo(fmt.shard_name(i), size, first_pack, 0, ""))
        first_pack += size
    return shards


def _rows(db: Path) -> dict[str, list[tuple]]:
    with sqlite3.connect(db) as conn:
        return {
            "schema": sorted(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master")),
            "samples": sorted(conn.execute("SELECT * FROM samples")),
            "parts": sorted(conn.execute("SELECT * FROM sample_parts")),
        }


SIZES = [3, 1, 4, 2]


def test_index_equals_energon_prepare(tmp_path: Path) -> None:
    ours = tmp_path / "ours"
    ours.mkdir()
    index = EnergonIndex(str(ours), 0)
    shards = _write(ours, index, SIZES)
    index.commit()
    index.finish(shards)
    theirs = tmp_path / "theirs"
    shutil.copytree(ours, theirs, ignore=shutil.ignore_patterns(".nv-meta", "*.idx", ".cook-progress"))
    energon_prepare(theirs, [s.name for s in shards])

    meta, ref = ours / fmt.NV_META_DIR, theirs / fmt.NV_META_DIR
    assert _rows(meta / fmt.INDEX_SQLITE) == _rows(ref / fmt.INDEX_SQLITE)
    assert len(_rows(meta / fmt.INDEX_SQLITE)["samples"]) == sum(SIZES)
    assert json.loads((meta / fmt.INFO_JSON).read_text()) == json.loads((ref / fmt.INFO_JSON).read_text())
    assert (meta / fmt.SPLIT_YAML).read_bytes() == (ref / fmt.SPLIT_YAML).read_bytes()
    for shard in shards:
        idx = shard.name + fmt.INDEX_SUFFIX
        assert (ours / idx).read_bytes() == (theirs / idx).read_bytes()
    assert (meta / fmt.DATASET_YAML).read_text() == fmt.dataset_yaml()


def test_names_are_energons() -> None:
    from megatron.energon.flavors.webdataset import config

    assert (config.MAIN_FOLDER_NAME, config.INDEX_SQLITE_FILENAME) == (fmt.NV_META_DIR, fmt.INDEX_SQLITE)
    assert (config.INDEX_UUID_FILENAME, config.INFO_JSON_FILENAME) == (fmt.INDEX_UUID, fmt.INFO_JSON)


def test_uuid_follows_the_shards(tmp_path: Path) -> None:
    uuids = []
    for run in ("a", "b"):
        out = tmp_path / run
        out.mkdir()
        index = EnergonIndex(str(out), 0)
        index.finish(_write(out, index, SIZES))
        uuids.append((out / fmt.NV_META_DIR / fmt.INDEX_UUID).read_text())
    assert uuids[0] == uuids[1]
    assert len(uuids[0]) == 36


@pytest.mark.parametrize("kept", [0, 2])
def test_resume_keeps_committed_rows_of_kept_shards_only(tmp_path: Path, kept: int) -> None:
    """Rows of shards after the checkpoint (committed or not) are gone after a resume."""
    out = tmp_path / "resumed"
    out.mkdir()
    first = EnergonIndex(str(out), 0)
    _write(out, first, SIZES[:kept])
    first.commit()
    _write(out, first, SIZES[: kept + 1], first_shard=kept)  # a shard of the next window: committed
    first.commit()
    _write(out, first, SIZES, first_shard=kept + 1)  # and more, never committed (the kill)
    first.writer.db.close()

    second = EnergonIndex(str(out), kept)
    shards = _write(out, second, SIZES, first_shard=kept)
    second.finish(shards)

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    index = EnergonIndex(str(fresh), 0)
    index.finish(_write(fresh, index, SIZES))
    assert _rows(out / fmt.NV_META_DIR / fmt.INDEX_SQLITE) == _rows(fresh / fmt.NV_META_DIR / fmt.INDEX_SQLITE)


def test_no_shards_writes_only_dataset_yaml(tmp_path: Path) -> None:
    EnergonIndex(str(tmp_path), 0).finish([])
    assert sorted(p.name for p in (tmp_path / fmt.NV_META_DIR).iterdir()) == [fmt.DATASET_YAML]
