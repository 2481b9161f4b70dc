"""A cooked dataset -> a deterministic, seeded stream of its packed sequences, reading only the packs
drawn (one ``pread`` each, located through the shard's ``.tar.idx``), never a whole shard.

The draw: packs in a seeded random order; from each, one sequence (in a per-pack seeded order); when
every pack has given one, a second round, and so on. ``--reference 200`` on a dataset of 10,000
packs reads about 200 packs.

    for seq in draw_sequences(root, seed=0):   # seq.source "chat.jsonl#12", seq.ids int32 [length]
        ...
"""

from __future__ import annotations

import bisect
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from cook import format as fmt

BLOCK: Final = 512
_WANTED: Final = (fmt.INPUT_IDS, fmt.LOSS_MASK, fmt.CU_SEQLENS, fmt.CU_SEQLENS_PADDED, fmt.META)


class DatasetUnreadable(Exception):
    """The manifest or a drawn pack cannot be read as cook wrote it; the message says which."""


@dataclass(frozen=True)
class Sequence:
    """One packed sequence, as the dataset holds it."""

    source: str
    shard: str
    key: str  # the pack's key
    start: int  # its first token's position in the pack
    ids: np.ndarray  # int32 [length]
    mask: np.ndarray  # uint8 [length]
    media: bool  # the sequence has media placeholders
    truncated: bool  # cut to seq_len (packing.overflow: truncate): only its prefix is compared


@dataclass(frozen=True)
class Shard:
    name: str
    first_pack: int
    packs: int


def read_manifest(root: str) -> dict[str, Any]:
    try:
        with open(os.path.join(root, fmt.MANIFEST_NAME), encoding="utf-8") as handle:
            manifest = json.load(handle)
    except (OSError, ValueError) as err:
        raise DatasetUnreadable(f"{fmt.MANIFEST_NAME}: {err}") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("pipeline"), dict):
        raise DatasetUnreadable(f"{fmt.MANIFEST_NAME} records no pipeline")
    return manifest


def shards(manifest: dict[str, Any]) -> list[Shard]:
    try:
        return [Shard(s["name"], int(s["first_pack"]), int(s["packs"])) for s in manifest.get("shards", [])]
    except (KeyError, TypeError, ValueError) as err:
        raise DatasetUnreadable(f"{fmt.MANIFEST_NAME}: bad shards entry ({err})") from None


def read_pack(root: str, shard: Shard, position: int) -> list[Sequence]:
    """The sequences of the ``position``-th pack of ``shard``, located by its ``.tar.idx`` offsets: its
    tar headers and the five members needed are read (``pread``), media members are seeked over."""
    path = os.path.join(root, shard.name)
    where = f"{shard.name} pack {position}"
    try:
        bounds = np.fromfile(path + fmt.INDEX_SUFFIX, dtype="<u8", count=2, offset=8 * position)
        with open(path, "rb") as handle:
            key, members = _members(handle.fileno(), int(bounds[0]), int(bounds[1]), where)
    except (OSError, ValueError, IndexError) as err:
        raise DatasetUnreadable(f"{where}: {err}") from None
    try:
        ids, mask = fmt.load_npy(members[fmt.INPUT_IDS]), fmt.load_npy(members[fmt.LOSS_MASK])
        bounds_true, starts = fmt.load_npy(members[fmt.CU_SEQLENS]), fmt.load_npy(members[fmt.CU_SEQLENS_PADDED])
        entries = json.loads(members[fmt.META])["sequences"]
        out = []
        for i, entry in enumerate(entries):
            start, length = int(starts[i]), int(bounds_true[i + 1] - bounds_true[i])
            out.append(
                Sequence(
                    source=str(entry["source"]),
                    shard=shard.name,
                    key=key,
                    start=start,
                    ids=ids[start : start + length],
                    mask=mask[start : start + length],
                    media=bool(entry.get("media")),
                    truncated=bool(entry.get(fmt.SEQUENCE_TRUNCATED_KEY)),
                )
            )
    except (KeyError, ValueError, TypeError, IndexError) as err:
        raise DatasetUnreadable(f"{shard.name} {key}: {type(err).__name__} {err}") from None
    return out


def _members(fd: int, offset: int, end: int, where: str) -> tuple[str, dict[str, bytes]]:
    """(pack key, member name -> bytes) of the pack between two offsets (plain ustar headers, as cook writes)."""
    members: dict[str, bytes] = {}
    key = ""
    while offset + BLOCK <= end:
        header = os.pread(fd, BLOCK, offset)
        if len(header) < BLOCK or not header[0]:
            break
        name = header[:100].split(b"\0", 1)[0].decode("utf-8", "replace")
        try:
            size = int(header[124:136].strip(b"\0 ") or b"0", 8)
        except ValueError:
            raise DatasetUnreadable(f"{where}: a tar header has no size") from None
        key, _, member = name.partition(".")
        if member in _WANTED:
            members[member] = os.pread(fd, size, offset + BLOCK)
        offset += BLOCK + size + (-size % BLOCK)
    missing = [m for m in _WANTED if m not in members]
    if missing:
        raise DatasetUnreadable(f"{where}: no {', '.join(missing)}")
    return key, members


def draw_sequences(root: str, shard_list: list[Shard], seed: int) -> Iterator[Sequence]:
    """Every packed sequence once, in the seeded order of the module docstring, reading packs lazily."""
    firsts = [s.first_pack for s in shard_list]
    total = sum(s.packs for s in shard_list)
    order = np.random.default_rng(seed).permutation(total)
    taken: dict[int, int] = {}  # pack index -> sequences given so far
    sizes: dict[int, int] = {}
    round_ = 0
    while True:
        gave = False
        for pack in map(int, order):
            if taken.get(pack, 0) != round_ or sizes.get(pack, 1) <= round_:
                continue
            shard = shard_list[bisect.bisect_right(firsts, pack) - 1]
            sequences = read_pack(root, shard, pack - shard.first_pack)
            sizes[pack] = len(sequences)
            if round_ < len(sequences):
                within = np.random.default_rng([seed, pack]).permutation(len(sequences))
                taken[pack] = round_ + 1
                gave = True
                yield sequences[int(within[round_])]
        if not gave:
            return
        round_ += 1
