"""Surgical edits of a cooked dataset for the corruption tests: rewrite one pack's members and keep
everything else consistent (the tar, its .tar.idx, the manifest's sha256 and bytes, and on request
Energon's index), so that only the intended invariant breaks."""

from __future__ import annotations

import hashlib
import json
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from cook import format as fmt
from tests.energon_prepare import energon_prepare
from tests.unit.validate.packs_data import write_tar


def read_shard(path: Path) -> list[tuple[str, dict[str, bytes]]]:
    """(key, member name -> bytes) in file order."""
    packs: list[tuple[str, dict[str, bytes]]] = []
    with tarfile.open(path) as tar:
        for member in tar:
            key, _, name = member.name.partition(".")
            if not packs or packs[-1][0] != key:
                packs.append((key, {}))
            handle = tar.extractfile(member)
            assert handle is not None
            packs[-1][1][name] = handle.read()
    return packs


def edit_manifest(root: Path, change: Callable[[dict[str, Any]], Any]) -> None:
    path = root / fmt.MANIFEST_NAME
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest, indent=2, sort_keys=True))


def rewrite_pack(root: Path, index: int, change: Callable[[dict[str, bytes]], Any]) -> None:
    """Apply ``change`` to pack ``index``'s members (in place), rewrite its shard, fix idx/sha256/bytes
    and re-index it with ``energon prepare``."""
    manifest = json.loads((root / fmt.MANIFEST_NAME).read_text())
    entry = next(s for s in manifest["shards"] if s["first_pack"] <= index < s["first_pack"] + s["packs"])
    path = root / entry["name"]
    packs = read_shard(path)
    change(packs[index - entry["first_pack"]][1])
    write_tar(path, packs)

    def fix(m: dict[str, Any]) -> None:
        shard = next(s for s in m["shards"] if s["name"] == entry["name"])
        shard.update(sha256=hashlib.sha256(path.read_bytes()).hexdigest(), bytes=path.stat().st_size)

    edit_manifest(root, fix)
    energon_prepare(root, [s["name"] for s in manifest["shards"]])


def load(members: dict[str, bytes], name: str) -> np.ndarray:
    return fmt.load_npy(members[name]).copy()


def save(members: dict[str, bytes], name: str, array: np.ndarray, meta: dict[str, Any] | None = None) -> None:
    members[name] = fmt.npy_bytes(array)
    if meta is not None:
        members[fmt.META] = json.dumps(meta).encode()


def free_prompt_span(members: dict[str, bytes], width: int) -> tuple[int, int]:
    """(sequence, start) of ``width`` non-target tokens inside a sequence, after its first token."""
    mask = fmt.load_npy(members[fmt.LOSS_MASK])
    starts = fmt.load_npy(members[fmt.CU_SEQLENS_PADDED])
    for i, seq in enumerate(json.loads(members[fmt.META])["sequences"]):
        begin = int(starts[i]) + 1
        if not mask[begin : begin + width].any() and seq["length"] > width + 1 and not seq["media"]:
            return i, begin
    raise AssertionError(f"no sequence has {width} prompt tokens")


def add_media(members: dict[str, bytes], seq: int, image_size: tuple[int, int, int], audio_frames: int) -> None:
    """Give sequence ``seq`` one image of ``image_size`` (frames, H, W) and one audio clip of ``audio_frames``."""
    frames, height, width = image_size
    members[fmt.PIXEL_PATCHES] = fmt.npy_bytes(np.zeros((frames * (height // 16) * (width // 16), 768), np.uint8))
    members[fmt.MEDIA_SIZES] = fmt.npy_bytes(np.array([image_size], np.int32))
    members[fmt.AUDIO_FEATURES] = fmt.npy_bytes(np.zeros((1, audio_frames, 128), np.float16))
    members[fmt.AUDIO_LENGTHS] = fmt.npy_bytes(np.array([audio_frames], np.int32))
    meta = json.loads(members[fmt.META])
    meta["sequences"][seq]["media"] = ["image", "audio"]
    members[fmt.META] = json.dumps(meta).encode()
