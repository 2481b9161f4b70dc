"""One shard -> ``ShardScan``: the tar-level and every per-pack invariant of SPEC §9.

    shard file -packfiles.ShardWalk-> RawPack -parse_members-> PackMembers
        -> batches of ~BATCH_BYTES: sequence_columns, PackBatch -> boundaries, masks, tokens, placeholders
           (a few NumPy passes per batch); a pack with media also media.check_visual / check_audio
        -> .tar.idx == the walk's pack offsets

``scan_shard`` is the unit of parallelism (one process per shard). It reads every byte once (plain
reads, hashed with sha256 as they arrive), names every problem it finds, and returns small totals:
counts, problems (at most ``MAX_PROBLEMS`` kept), the digest of every source it packs and, with
``--deep``, a digest of every pack's members for the Energon comparison.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import chain
from typing import Final

import numpy as np

from cook import format as fmt
from cook.packfiles import MemberData, RawPack, ShardWalk, TarFault
from cook.types import Pack
from cook.validate import boundaries, masks, media, placeholders, tokens
from cook.validate.batch import Findings, PackBatch, Spans, Workspace
from cook.validate.digests import source_digests
from cook.validate.frames import storage_findings
from cook.validate.members import PackMembers, SequenceEntry, parse_members, sequence_columns
from cook.validate.problems import Code, Finding, PackRules, Problem

MAX_PROBLEMS: Final = 1000
BATCH_BYTES: Final = 4 << 20  # member bytes checked together (a few hundred text packs); bounds memory on media shards
FAULT_CODES: Final = {
    TarFault.TRUNCATED: Code.TAR_TRUNCATED,
    TarFault.CORRUPT: Code.TAR_CORRUPT,
    TarFault.SPLIT_PACK: Code.PACK_KEY,
    TarFault.DUPLICATE_MEMBER: Code.MEMBER_DUPLICATE,
}


@dataclass(slots=True)
class ShardScan:
    """What one shard holds and what is wrong with it."""

    name: str
    complete: bool = False  # walked to a clean end-of-archive marker
    packs: int = 0
    unparsed: int = 0  # packs with unreadable members or boundaries: their counts are missing from the totals
    sources: int = 0
    tokens: int = 0
    targets: int = 0
    padded: int = 0
    bytes: int = 0
    sha256: str | None = None
    problems: list[Problem] = field(default_factory=list)
    problems_total: int = 0
    source_digests: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))  # uint64 [S]
    source_packs: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # int64 [S]: pack index
    pack_digests: dict[str, str] = field(default_factory=dict)
    offsets: list[int] | None = None  # each pack's first header, then the end (complete walks only)

    def add(self, findings: list[Finding], key: str = "") -> None:
        for code, detail in findings:
            self.problems_total += 1
            if len(self.problems) < MAX_PROBLEMS:
                self.problems.append(Problem(code.value, self.name, key, detail))


def pack_digest(members: Mapping[str, MemberData]) -> str:
    """A digest of a pack's members (names and bytes), to compare with what Energon hands out."""
    hasher = hashlib.blake2b(digest_size=16)
    for name in sorted(members):
        data = members[name]
        hasher.update(f"{name}\0{len(data)}\0".encode())
        hasher.update(data)
    return hasher.hexdigest()


def check_packs(packs: list[Pack], rules: PackRules, space: Workspace | None = None) -> Findings:
    """All per-pack invariants of parsed packs, as one batch (laid out in ``space``, or in new arrays): the
    findings of each."""
    members = [PackMembers("", _arrays(pack), list(map(SequenceEntry.of, pack.sequences))) for pack in packs]
    columns = sequence_columns(list(chain.from_iterable(m.entries for m in members)))
    return check_batch(PackBatch.of(members, columns, space), list(packs), rules)[0]


def check_pack(pack: Pack, rules: PackRules) -> list[Finding]:
    """All per-pack invariants of one parsed pack."""
    return check_packs([pack], rules)[0]


def _arrays(pack: Pack) -> dict[str, np.ndarray]:
    named = (
        (fmt.INPUT_IDS, pack.input_ids),
        (fmt.LOSS_MASK, pack.loss_mask),
        (fmt.CU_SEQLENS, pack.cu_seqlens),
        (fmt.CU_SEQLENS_PADDED, pack.cu_seqlens_padded),
        (fmt.PIXEL_PATCHES, pack.pixel_patches),
        (fmt.MEDIA_SIZES, pack.media_sizes),
        (fmt.AUDIO_FEATURES, pack.audio_features),
        (fmt.AUDIO_LENGTHS, pack.audio_lengths),
    )
    return {name: array for name, array in named if array is not None}


def check_batch(batch: PackBatch, packs: list[Pack | None], rules: PackRules) -> tuple[Findings, np.ndarray]:
    """Every per-pack invariant of the batch: findings per pack, and bool [K]: the boundaries are usable.
    ``packs``: each pack as a ``Pack`` where the per-pack checks need it (media, or ``--deep``), else None."""
    findings, usable = boundaries.check_boundaries(batch, rules)
    masks.check_values(batch, findings)
    tokens.check_range(batch, rules.tokens, findings)
    spans = Spans.of(batch, usable)
    masks.check_mask(batch, spans, findings)
    tokens.check_padding(batch, rules.tokens, spans, findings)
    media.check_no_media(batch, rules, findings)
    for k, pack in enumerate(packs):
        if pack is not None:
            findings[k] += _pack_checks(pack, rules, bool(batch.media[k]), bool(usable[k]))
    return findings, usable


def _pack_checks(pack: Pack, rules: PackRules, has_media: bool, usable: bool) -> list[Finding]:
    """The media arithmetic of a pack with media, and with ``--deep`` its placeholder blocks and target spans."""
    found = media.check_visual(pack, rules, usable) + media.check_audio(pack, rules, usable) if has_media else []
    if rules.deep and usable:
        if not found:
            found += placeholders.check_blocks(pack, rules.tokens)
        found += placeholders.check_target_spans(pack, rules.tokens)
    return found


def scan_shard(root: str, name: str, first_pack: int | None, rules: PackRules) -> ShardScan:
    """Check ``root/name``: tar structure, .tar.idx, pack keys, and every pack's invariants."""
    path = os.path.join(root, name)
    scan = ShardScan(name)
    walk = ShardWalk(path)
    misplaced: list[str] = []
    sources = _Sources()
    pending: list[tuple[PackMembers, list[Finding]]] = []
    pending_bytes = 0
    space = _workspace()
    try:
        for index, raw in enumerate(walk.packs()):
            scan.packs += 1
            if first_pack is not None and raw.key != fmt.pack_key(first_pack + index):
                misplaced.append(f"{raw.key} (expected {fmt.pack_key(first_pack + index)})")
            parsed = _parse(scan, raw, rules)
            if parsed is not None:
                pending.append(parsed)
                pending_bytes += sum(map(len, raw.members.values()))
            if pending_bytes >= BATCH_BYTES:
                _check_pending(scan, pending, rules, sources, space)
                pending, pending_bytes = [], 0
        _check_pending(scan, pending, rules, sources, space)
    except OSError as err:
        scan.add([(Code.SHARD_UNREADABLE, f"{name}: {type(err).__name__}: {err.strerror or err}")])
        return scan  # complete stays False: the totals are not compared
    scan.source_digests = source_digests(sources.names)
    scan.source_packs = np.concatenate([np.zeros(0, np.int64), *sources.packs])
    scan.add([(FAULT_CODES[fault], detail) for fault, detail in walk.faults])
    if misplaced:
        scan.add([(Code.PACK_KEY, f"{len(misplaced)} packs out of sequence, first {misplaced[0]}")])
    scan.add(check_index(path, walk.offsets, walk.complete))
    scan.complete = walk.complete
    scan.offsets = list(walk.offsets) if walk.complete else None
    scan.bytes = walk.bytes_read
    scan.sha256 = walk.sha256
    return scan


_THREAD: Final = threading.local()


def _workspace() -> Workspace:
    """This thread's batch workspace: every shard it scans reuses the same buffers (about 5 bytes a token
    of its largest batch stay allocated)."""
    space: Workspace | None = getattr(_THREAD, "space", None)
    if space is None:
        space = _THREAD.space = Workspace()
    return space


def _parse(scan: ShardScan, raw: RawPack, rules: PackRules) -> tuple[PackMembers, list[Finding]] | None:
    if rules.deep:
        scan.pack_digests[raw.key] = pack_digest(raw.members)
    members, findings = parse_members(raw, decode_frames=rules.deep)
    findings += storage_findings(
        raw.members, rules.frame_storage, rules.video_frame_storage, *_sizes_and_kinds(members)
    )
    if members is None:
        scan.unparsed += 1
        scan.add(findings, raw.key)
        return None
    return members, findings


def _sizes_and_kinds(members: PackMembers | None) -> tuple[np.ndarray | None, list[str] | None]:
    """The pack's ``media_sizes`` and media kinds in placeholder order (None for a pack that did not parse)."""
    if members is None or fmt.MEDIA_SIZES not in members.arrays:
        return None, None
    return members.arrays[fmt.MEDIA_SIZES], [kind for entry in members.entries for kind in entry.media]


@dataclass(slots=True)
class _Sources:
    """The sources of the counted packs, in order, and the pack index of each (one array per batch)."""

    names: list[str] = field(default_factory=list)
    packs: list[np.ndarray] = field(default_factory=list)


def _check_pending(
    scan: ShardScan,
    pending: list[tuple[PackMembers, list[Finding]]],
    rules: PackRules,
    sources: _Sources,
    space: Workspace,
) -> None:
    """Check a batch of parsed packs, report per pack, and count the packs whose boundaries are usable."""
    if not pending:
        return
    columns = sequence_columns(list(chain.from_iterable(members.entries for members, _ in pending)))
    parsed = [members for members, _ in pending]
    batch = PackBatch.of(parsed, columns, space)
    packs = [m.to_pack() if rules.deep or batch.media[k] else None for k, m in enumerate(parsed)]
    found, usable = check_batch(batch, packs, rules)
    for (members, findings), more in zip(pending, found, strict=True):
        if findings or more:
            scan.add(findings + more, members.key)
    scan.unparsed += int(np.count_nonzero(~usable))
    _add_totals(scan, batch, parsed, usable, sources)


def _add_totals(
    scan: ShardScan, batch: PackBatch, parsed: list[PackMembers], usable: np.ndarray, sources: _Sources
) -> None:
    """Count the packs whose boundaries are usable into ``scan``: sources, tokens, targets, padded tokens."""
    kept = np.flatnonzero(usable)
    counts = np.diff(batch.first_sequence)[kept]
    last = batch.rows[1:] - 1
    scan.sources += int(counts.sum())
    scan.tokens += int(batch.cu[last[kept]].sum())
    scan.padded += int(batch.tokens[kept].sum())
    targets = np.count_nonzero(batch.mask)
    for k in np.flatnonzero(~usable).tolist():
        targets -= np.count_nonzero(batch.mask[batch.base[k] : batch.base[k + 1]])
    scan.targets += int(targets)
    names = batch.columns.sources
    if kept.shape[0] == batch.packs:
        sources.names.extend(names)
    else:
        sequence = batch.first_sequence
        sources.names.extend(chain.from_iterable(names[sequence[k] : sequence[k + 1]] for k in kept.tolist()))
    sources.packs.append(np.repeat([pack_index(parsed[k].key) for k in kept.tolist()], counts).astype(np.int64))


def pack_index(key: str) -> int:
    digits = key.removeprefix(fmt.PACK_KEY_PREFIX)
    return int(digits) if digits.isdigit() else -1


def check_index(shard_path: str, offsets: list[int], complete: bool) -> list[Finding]:
    """``.tar.idx`` beside the shard == ``offsets`` (each pack's first header, then the end, as the walk
    found them); ``complete``: the walk reached a clean end of the archive (otherwise only the file's
    presence is checked: offsets past a truncation are unknown, and the truncation is reported already)."""
    idx_path = shard_path + fmt.INDEX_SUFFIX
    if not os.path.isfile(idx_path):
        return [(Code.IDX_MISSING, f"{os.path.basename(idx_path)} does not exist")]
    if not complete:
        return []
    with open(idx_path, "rb") as handle:
        raw = handle.read()
    if len(raw) % 8:
        return [(Code.IDX_MISMATCH, f"{len(raw)} bytes is not a whole number of uint64 offsets")]
    stored = np.frombuffer(raw, dtype="<u8").astype(np.int64)  # int64 [packs + 1]
    actual = np.asarray(offsets, dtype=np.int64)
    if stored.shape != actual.shape:
        return [(Code.IDX_MISMATCH, f"{stored.shape[0]} offsets, expected {actual.shape[0]} (packs + 1)")]
    if (stored == actual).all():
        return []
    first = int(np.flatnonzero(stored != actual)[0])
    return [(Code.IDX_MISMATCH, f"offset {first} is {stored[first]}, the sample header is at {actual[first]}")]
