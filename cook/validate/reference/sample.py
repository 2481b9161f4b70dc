"""A cooked dataset -> a deterministic, seeded stream of its packed sequences, reading only the packs
drawn (each located through the shard's ``.tar.idx``), never a whole shard.

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
from collections.abc import Sequence as Sequence_
from dataclasses import dataclass
from typing import Final

import numpy as np

from cook import format as fmt
from cook import packfiles
from cook.manifest import ShardInfo
from cook.packfiles import PackUnreadable, read_npy

_MEDIA: Final = frozenset(fmt.VISUAL_MEMBERS + fmt.AUDIO_MEMBERS)  # not read: only text is compared


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


def read_pack(root: str, shard: ShardInfo, position: int) -> list[Sequence]:
    """The sequences of the ``position``-th pack of ``shard``, read alone (``packfiles.read_pack``), its
    media members seeked over."""
    key = fmt.pack_key(shard.first_pack + position)
    try:
        members = packfiles.read_pack(os.path.join(root, shard.name), position, key, _MEDIA).members
    except PackUnreadable as err:
        raise DatasetUnreadable(str(err)) from None
    try:
        ids, mask = read_npy(members[fmt.INPUT_IDS]), read_npy(members[fmt.LOSS_MASK])
        bounds_true, starts = read_npy(members[fmt.CU_SEQLENS]), read_npy(members[fmt.CU_SEQLENS_PADDED])
        entries = json.loads(bytes(members[fmt.META]))["sequences"]
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


def draw_sequences(root: str, shard_list: Sequence_[ShardInfo], seed: int) -> Iterator[Sequence]:
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
