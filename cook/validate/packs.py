"""Read packs of a cooked dataset for ``cook inspect`` and ``cook stats``: one pack by index (a seek through
``.tar.idx``), the pack holding a source (a scan of meta.json only), or every pack in order, streamed.

These readers trust the dataset enough to locate packs; ``cook validate`` is what checks it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from cook import format as fmt
from cook.validate.shards import RawPack, ShardWalk

ONLY_META = frozenset(set(fmt.MEMBERS) - {fmt.META})


@dataclass(frozen=True, slots=True)
class ShardSpan:
    name: str
    first_pack: int
    packs: int


def shard_spans(root: str) -> list[ShardSpan]:
    """The manifest's shards in order (name, first pack index, packs)."""
    with open(os.path.join(root, fmt.MANIFEST_NAME), encoding="utf-8") as handle:
        manifest = json.load(handle)
    return [ShardSpan(s["name"], int(s["first_pack"]), int(s["packs"])) for s in manifest.get("shards", [])]


def iter_packs(root: str, skip: frozenset[str] = frozenset()) -> Iterator[tuple[str, RawPack]]:
    """(shard name, pack) for every pack in dataset order; ``skip``: members not read."""
    for span in shard_spans(root):
        walk = ShardWalk(os.path.join(root, span.name), hash_bytes=False, skip=skip)
        for raw in walk.packs():
            yield span.name, raw


def _index_offset(shard_path: str, position: int) -> int:
    """The ``position``-th pack's header offset from ``.tar.idx`` (0 when the index cannot say)."""
    try:
        with open(shard_path + fmt.INDEX_SUFFIX, "rb") as handle:
            handle.seek(8 * position)
            raw = handle.read(8)
    except OSError:
        return 0
    return int(np.frombuffer(raw, dtype="<u8")[0]) if len(raw) == 8 else 0


def find_pack(root: str, index: int) -> tuple[str, RawPack] | None:
    """(shard name, pack) of pack ``index``; None when no shard holds it."""
    want = fmt.pack_key(index)
    for span in shard_spans(root):
        if not span.first_pack <= index < span.first_pack + span.packs:
            continue
        path = os.path.join(root, span.name)
        for start in (_index_offset(path, index - span.first_pack), 0):  # the index, then a plain walk
            for raw in ShardWalk(path, hash_bytes=False).packs(start):
                if raw.key == want:
                    return span.name, raw
                if start:
                    break
    return None


def find_source(root: str, source: str) -> int | None:
    """Index of the pack holding ``source`` (exact, else the first source ending with it); None if none."""
    suffix_match: int | None = None
    for _, raw in iter_packs(root, skip=ONLY_META):
        try:
            body = json.loads(bytes(raw.members.get(fmt.META, b"{}")))
        except ValueError:
            continue  # an unreadable meta.json holds no findable source; cook validate reports it
        sequences = body.get("sequences", []) if isinstance(body, dict) else []
        names = [s.get("source", "") for s in sequences if isinstance(s, dict)]
        digits = raw.key.removeprefix(fmt.PACK_KEY_PREFIX)
        if not digits.isdigit():
            continue
        index = int(digits)
        if source in names:
            return index
        if suffix_match is None and any(str(name).endswith(source) for name in names):
            suffix_match = index
    return suffix_match
