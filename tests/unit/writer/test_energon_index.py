"""The Energon index cook publishes from its shards' rows holds exactly what ``energon prepare`` writes for
the same shards, and its bytes depend on the shards alone."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np

from cook import format as fmt
from cook.manifest import ShardInfo
from cook.packing.packer import build_pack
from cook.types import TokenizedSample
from cook.writer.energon_index import publish_index
from cook.writer.index_rows import ROWS_DIR, remove_rows_from, rows_missing, write_rows
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


def _write(out: Path, shard_sizes: list[int], first_shard: int = 0) -> list[ShardInfo]:
    """Shards of ``shard_sizes`` packs from ``first_shard`` on, each with its rows file, as a worker writes them."""
    shards, first_pack = [], 0
    for i, size in enumerate(shard_sizes):
        if i >= first_shard:
            info, layout = write_shard(str(out), i, first_pack, _packs(i, size))
            write_rows(str(out), i, info, layout)
            shards.append(info)
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
    shards = _write(ours, SIZES)
    publish_index(str(ours), len(shards))
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


def test_the_same_shards_publish_the_same_bytes(tmp_path: Path) -> None:
    published = []
    for run in ("a", "b"):
        out = tmp_path / run
        out.mkdir()
        publish_index(str(out), len(_write(out, SIZES)))
        meta = out / fmt.NV_META_DIR
        published.append({p.name: p.read_bytes() for p in sorted(meta.iterdir())})
    assert published[0] == published[1]
    assert len(published[0][fmt.INDEX_UUID]) == 36


def test_publish_takes_the_rows_of_the_first_shards_only(tmp_path: Path) -> None:
    """A resumed run keeps the rows files of its kept shards, removes the rest and writes them again;
    rows files past the shard count (a killed run's) are never read."""
    out = tmp_path / "resumed"
    out.mkdir()
    kept = 2
    _write(out, SIZES)
    (out / fmt.PROGRESS_DIR / ROWS_DIR / "shard-000009.tar.json").write_text("not rows")
    remove_rows_from(str(out), kept)
    assert rows_missing(str(out), len(SIZES)) == [fmt.shard_name(i) + ".json" for i in range(kept, len(SIZES))]
    _write(out, SIZES, first_shard=kept)
    (out / fmt.PROGRESS_DIR / ROWS_DIR / "shard-000009.tar.json").write_text("not rows")
    publish_index(str(out), len(SIZES))

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    publish_index(str(fresh), len(_write(fresh, SIZES)))
    for name in (fmt.INDEX_SQLITE, fmt.INFO_JSON, fmt.SPLIT_YAML, fmt.INDEX_UUID):
        assert (out / fmt.NV_META_DIR / name).read_bytes() == (fresh / fmt.NV_META_DIR / name).read_bytes(), name


def test_no_shards_writes_only_dataset_yaml(tmp_path: Path) -> None:
    publish_index(str(tmp_path), 0)
    assert sorted(p.name for p in (tmp_path / fmt.NV_META_DIR).iterdir()) == [fmt.DATASET_YAML]
