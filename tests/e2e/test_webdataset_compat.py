"""Cooked shards are plain WebDataset: ``webdataset.WebDataset`` reads the demo cook's shards, pack by
pack, with exactly the member bytes Energon hands to a cooker (and every pack of the manifest)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cook import format as fmt
from cook.cli.main import main
from tests.conftest import REPO
from tests.e2e.energon_load import load_all_packs


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "out"
    argv = ["run", str(REPO / "pipelines" / "demo.yaml"), "--output", str(out), "--workers", "0", "--quiet"]
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(REPO)  # the demo pipeline's paths are relative to the repository
        assert main(argv) == 0
    return out


def _webdataset_packs(root: Path, shards: list[str]) -> dict[str, dict[str, bytes]]:
    import webdataset as wds

    urls = [str(root / name) for name in shards]
    packs: dict[str, dict[str, bytes]] = {}
    for sample in wds.WebDataset(urls, shardshuffle=False, empty_check=False):  # no decoder: raw bytes
        key = sample["__key__"]
        assert key not in packs, key
        packs[key] = {name: data for name, data in sample.items() if not name.startswith("__")}
    return packs


def test_webdataset_reads_the_same_packs_and_bytes_as_energon(demo: Path) -> None:
    manifest = json.loads((demo / fmt.MANIFEST_NAME).read_text())
    shards = [s["name"] for s in manifest["shards"]]
    by_webdataset = _webdataset_packs(demo, shards)
    by_energon = load_all_packs(str(demo), manifest["counts"]["packs"])
    assert len(by_webdataset) == manifest["counts"]["packs"] == len(by_energon)
    assert sorted(by_webdataset) == sorted(by_energon) == [fmt.pack_key(i) for i in range(len(by_energon))]
    names = set()
    for key, members in by_webdataset.items():
        assert members == by_energon[key], key
        frames = {name for name in members if fmt.parse_frame_member(name)}
        assert set(fmt.REQUIRED_MEMBERS) <= set(members) - frames <= set(fmt.MEMBERS), key
        names |= {parsed[1] if (parsed := fmt.parse_frame_member(name)) else name for name in members}
    assert {"png", "jpeg", fmt.AUDIO_FEATURES} <= names  # the demo's media packs (png images, jpeg video) too
