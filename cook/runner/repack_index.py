"""Cooked datasets -> their sequences in input order -> repack units (``cook repack``, SPEC §2).

    dataset dir -load_source-> SourceManifest -index_source-> CookedSource (each sequence's pack, place, order)
    [CookedSource, ...] -repack_units(unit_bytes)-> [Unit with SequenceReads], in input order

Only the packs' ``meta.json`` members are read here (the walk seeks over the arrays), so the index
costs per sequence, not per byte of media. A source's packs permute its sequences (each window is
packed by length), so the input order is recovered from each sequence's ``source`` id,
``<input file>#<line | row | array index | tar key>``:

- files in sorted order, as ``cook run`` lists them: source names are paths relative to one root, so
  their order is the order of the full paths;
- within a JSONL, JSON or Parquet file, by the line, array index or row number;
- within a WebDataset tar, by key: ``cook run`` reads a tar in member order, which equals the key
  order for tars written in key order (as webdataset's ``TarWriter`` users and ``cook``'s own tests
  write them).

Worked example, a source cooked from ``a.jsonl`` (lines 1-3) with one window, packed as
``pack 0 = [a.jsonl#3, a.jsonl#1]``, ``pack 1 = [a.jsonl#2]``: the order is ``#1 (pack 0, seq 1),
#2 (pack 1, seq 0), #3 (pack 0, seq 0)``.

A unit is a range of one source's sequences in that order, of about ``unit_bytes`` (a sequence
counts its share of its pack's bytes, by tokens). Its edges are put where no pack holds sequences on
both sides (the ends of the source's windows), so each pack is opened by one unit; a range of more
than ``SPLIT_UNITS`` x ``unit_bytes`` without such an edge (a long window, ``buffer_size: all``) is
cut anyway: a pack across that cut has its small members read by both units, its media rows by
the unit whose sequence they belong to.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import numpy as np
import orjson

from cook import format as fmt
from cook.errors import ConfigError
from cook.manifest import Manifest, ManifestError, load_manifest
from cook.packfiles import ONLY_META, ShardWalk
from cook.runner.units import SequenceReads, Unit

SPLIT_UNITS = 4  # a range without a pack edge is cut after this many unit_bytes
TAR_SUFFIX = ".tar"


@dataclass(frozen=True)
class SourceManifest:
    """A cooked dataset given to ``cook repack``: its directory, manifest and the manifest's sha256."""

    path: str
    manifest: Manifest
    manifest_sha256: str


@dataclass(frozen=True, eq=False)
class CookedSource:
    """One cooked dataset to repack and its sequences in input order (int arrays [N])."""

    source: SourceManifest
    shards: tuple[str, ...]  # shard paths, manifest order
    shard: np.ndarray  # int32 [N] index into shards
    offset: np.ndarray  # int64 [N] its pack's first header in the shard
    seq: np.ndarray  # int32 [N] its position in the pack
    pack: np.ndarray  # int64 [N] its pack's index in the dataset
    seq_bytes: np.ndarray  # float64 [N] its share of its pack's bytes (by tokens), to size units

    @property
    def sequences(self) -> int:
        return int(self.seq.shape[0])


def load_source(path: str) -> SourceManifest:
    """The finished dataset at ``path``; ``ConfigError`` (one line) when it is not one."""
    try:
        manifest = load_manifest(path)
        with open(os.path.join(path, fmt.MANIFEST_NAME), "rb") as handle:
            digest = hashlib.sha256(handle.read()).hexdigest()
    except (ManifestError, OSError) as err:
        raise ConfigError(f"repack source {path!r} is not a finished cooked dataset: {err}") from None
    return SourceManifest(os.path.abspath(path), manifest, digest)


def index_source(source: SourceManifest) -> CookedSource:
    """``source``'s sequences in input order, from its packs' ``meta.json``; ``ConfigError`` (one line) when
    a shard cannot be read."""
    path, manifest = source.path, source.manifest
    shards = tuple(os.path.join(path, s.name) for s in manifest.shards)
    names: list[str] = []
    ids: list[str] = []
    shard_of: list[int] = []
    offsets: list[int] = []
    seqs: list[int] = []
    pack_of: list[int] = []
    lengths: list[int] = []
    pack_bytes: list[int] = []
    for number, shard_path in enumerate(shards):
        walk = ShardWalk(shard_path, hash_bytes=False, skip=ONLY_META)
        try:
            packs = list(walk.packs())
        except OSError as err:
            raise ConfigError(f"repack source {path!r}: {shard_path} cannot be read ({err.strerror})") from None
        if walk.faults or len(packs) != manifest.shards[number].packs:
            listed = manifest.shards[number].packs
            why = walk.faults[0][1] if walk.faults else f"{len(packs)} packs, the manifest lists {listed}"
            raise ConfigError(f"repack source {path!r}: {shard_path} is damaged ({why}); run cook validate")
        for pack_number, raw in enumerate(packs, len(pack_bytes)):  # numbered across the source's shards
            try:
                sequences = orjson.loads(bytes(raw.members[fmt.META]))["sequences"]
            except (KeyError, TypeError, orjson.JSONDecodeError) as err:
                raise ConfigError(f"repack source {path!r}: {shard_path} {raw.key}: bad {fmt.META} ({err})") from None
            for position, entry in enumerate(sequences):
                name, _, record = entry["source"].rpartition("#")
                names.append(name)
                ids.append(record)
                shard_of.append(number)
                offsets.append(raw.offset)
                seqs.append(position)
                pack_of.append(pack_number)
                lengths.append(entry["length"])
        pack_bytes += np.diff(np.array(walk.offsets, dtype=np.int64)).tolist()
    pack = np.array(pack_of, dtype=np.int64)
    tokens = np.array(lengths, dtype=np.float64)  # float64 [N]
    pack_tokens = np.bincount(pack, weights=tokens, minlength=len(pack_bytes))  # float64 [packs]
    seq_bytes = np.array(pack_bytes, dtype=np.float64)[pack] * tokens / np.maximum(pack_tokens[pack], 1)
    order = input_order(names, ids)
    return CookedSource(
        source=source,
        shards=shards,
        shard=np.array(shard_of, dtype=np.int32)[order],
        offset=np.array(offsets, dtype=np.int64)[order],
        seq=np.array(seqs, dtype=np.int32)[order],
        pack=pack[order],
        seq_bytes=seq_bytes[order],
    )


def input_order(names: list[str], ids: list[str]) -> np.ndarray:
    """int64 [N]: the permutation that puts sequences (file name, record id) in ``cook run``'s input order
    (module docstring): by file name, then by the number of a JSONL/JSON/Parquet record or the key of a
    tar sample.

    >>> input_order(["b.jsonl", "a.jsonl", "a.jsonl"], ["1", "10", "9"]).tolist()
    [2, 1, 0]
    """
    if not names:
        return np.zeros(0, dtype=np.int64)
    files, file_rank = np.unique(np.array(names), return_inverse=True)
    in_tar = np.char.endswith(files, TAR_SUFFIX)[file_rank]  # bool [N]
    within = np.zeros(len(ids), dtype=np.int64)
    numbered = np.flatnonzero(~in_tar)
    if numbered.size:
        within[numbered] = np.array([ids[i] for i in numbered.tolist()], dtype=np.int64)
    keyed = np.flatnonzero(in_tar)
    if keyed.size:
        _, key_rank = np.unique(np.array([ids[i] for i in keyed.tolist()]), return_inverse=True)
        within[keyed] = key_rank
    return np.lexsort((within, file_rank.astype(np.int64)))


def repack_units(sources: list[CookedSource], unit_bytes: int) -> list[Unit]:
    """Every source's sequences, in order, as units of about ``unit_bytes`` of packs (module docstring)."""
    units: list[Unit] = []
    for source in sources:
        manifest_path = os.path.join(source.source.path, fmt.MANIFEST_NAME)
        for start, stop, size in _ranges(source, unit_bytes):
            reads = SequenceReads(
                source.shards, source.shard[start:stop], source.offset[start:stop], source.seq[start:stop]
            )
            units.append(Unit(len(units), manifest_path, "cooked", (start, stop), 1, size, reads))
    return units


def _ranges(source: CookedSource, unit_bytes: int) -> list[tuple[int, int, int]]:
    """``[(start, stop, bytes)]`` cutting ``source``'s order into units (module docstring)."""
    n = source.sequences
    if n == 0:
        return []
    last = np.zeros(int(source.pack.max()) + 1, dtype=np.int64)  # each pack's last position in the order
    last[source.pack] = np.arange(n)  # later positions overwrite earlier ones (positions ascend)
    reach = np.maximum.accumulate(last[source.pack])  # int64 [N]: the furthest position packs so far reach
    edges = np.flatnonzero(reach == np.arange(n)) + 1  # a unit may end after these; the last is n
    total = np.cumsum(source.seq_bytes)  # float64 [N]: bytes up to each position
    edge_total = total[edges - 1]
    out: list[tuple[int, int, int]] = []
    start, base = 0, 0.0
    while start < n:
        j = max(int(np.searchsorted(edges, start + 1)), int(np.searchsorted(edge_total, base + unit_bytes)))
        stop = int(edges[min(j, edges.shape[0] - 1)])
        forced = int(np.searchsorted(total, base + SPLIT_UNITS * unit_bytes)) + 1  # no edge in reach
        stop = max(start + 1, min(stop, forced, n))
        out.append((start, stop, round(total[stop - 1] - base)))
        start, base = stop, float(total[stop - 1])
    return out
