"""One shard -> ``ShardScan``: every per-pack invariant of SPEC §9.

    shard file -ShardWalk-> RawPack -parse_pack-> Pack -boundaries, masks, tokens, media-> findings

``scan_shard`` is the unit of parallelism (one process per shard). It first tries ``bulk.bulk_scan``,
which maps the shard once, hashes it and checks all its text packs with NumPy at once; that fast
path accepts only a shard in which it finds nothing wrong. Any shard it does not accept (and every
shard under ``--deep``) is checked here pack by pack, streamed (``stream_shard``): this path is the
reference that names every problem. Either returns small totals: counts, problems (at most
``MAX_PROBLEMS`` kept), the digest of every source it packs and, with ``--deep``, a digest of every
pack's members for the Energon comparison.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from cook import format as fmt
from cook.types import Pack
from cook.validate import boundaries, masks, media, placeholders, tokens
from cook.validate.digests import source_digests
from cook.validate.members import parse_pack
from cook.validate.problems import Code, Finding, PackRules, Problem
from cook.validate.shards import RawPack, ShardWalk, check_index

MAX_PROBLEMS: Final = 1000


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


def pack_digest(members: Mapping[str, bytes | memoryview]) -> str:
    """A digest of a pack's members (names and bytes), to compare with what Energon hands out."""
    hasher = hashlib.blake2b(digest_size=16)
    for name in sorted(members):
        data = members[name]
        hasher.update(f"{name}\0{len(data)}\0".encode())
        hasher.update(data)
    return hasher.hexdigest()


def check_pack(pack: Pack, rules: PackRules) -> list[Finding]:
    """All per-pack invariants of a parsed pack; per-sequence checks only where boundaries are usable."""
    findings = boundaries.check_boundaries(pack, rules)
    findings += masks.check_values(pack) + tokens.check_range(pack, rules.tokens)
    usable = boundaries.boundaries_usable(findings)
    if usable:
        padding = boundaries.padding_positions(pack)
        findings += masks.check_mask(pack, padding) + tokens.check_padding(pack, rules.tokens, padding)
    media_findings = media.check_no_media(pack, rules)
    if media_findings is None:
        media_findings = media.check_visual(pack, rules, usable) + media.check_audio(pack, rules, usable)
    findings += media_findings
    if rules.deep and usable:
        if not media_findings:
            findings += placeholders.check_blocks(pack, rules.tokens)
        findings += placeholders.check_target_spans(pack, rules.tokens)
    return findings


def scan_shard(root: str, name: str, first_pack: int | None, rules: PackRules, verify_sha256: bool = True) -> ShardScan:
    """Check ``root/name``: tar structure, .tar.idx, pack keys, and every pack's invariants."""
    if not rules.deep:
        from cook.validate.bulk import bulk_scan

        scan = bulk_scan(root, name, first_pack, rules, verify_sha256)
        if scan is not None:
            return scan
    return stream_shard(root, name, first_pack, rules, verify_sha256)


def stream_shard(
    root: str, name: str, first_pack: int | None, rules: PackRules, verify_sha256: bool = True
) -> ShardScan:
    """Walk ``root/name`` once, pack by pack, naming every problem it finds."""
    path = os.path.join(root, name)
    scan = ShardScan(name)
    walk = ShardWalk(path, hash_bytes=verify_sha256, reuse_buffers=True)  # each pack is done before the next
    misplaced: list[str] = []
    sources: list[str] = []
    packs: list[int] = []
    try:
        for index, raw in enumerate(walk.packs()):
            scan.packs += 1
            if first_pack is not None and raw.key != fmt.pack_key(first_pack + index):
                misplaced.append(f"{raw.key} (expected {fmt.pack_key(first_pack + index)})")
            _scan_pack(scan, raw, rules, sources, packs)
    except OSError as err:
        scan.add([(Code.SHARD_UNREADABLE, f"{name}: {type(err).__name__}: {err.strerror or err}")])
        return scan  # complete stays False: the totals are not compared
    scan.source_digests = source_digests(sources)
    scan.source_packs = np.array(packs, dtype=np.int64)
    scan.add(walk.findings)
    if misplaced:
        scan.add([(Code.PACK_KEY, f"{len(misplaced)} packs out of sequence, first {misplaced[0]}")])
    scan.add(check_index(path, walk))
    scan.complete = walk.complete
    scan.offsets = list(walk.offsets) if walk.complete else None
    scan.bytes = walk.bytes_read
    scan.sha256 = walk.sha256 if verify_sha256 else None
    return scan


def pack_index(key: str) -> int:
    digits = key.removeprefix(fmt.PACK_KEY_PREFIX)
    return int(digits) if digits.isdigit() else -1


def add_totals(scan: ShardScan, pack: Pack, key: str, sources: list[str], packs: list[int]) -> None:
    """Count a pack whose boundaries are usable into ``scan``; its sources and pack index go to the lists."""
    scan.sources += len(pack.sequences)
    scan.tokens += int(pack.cu_seqlens[-1])
    scan.targets += int(np.count_nonzero(pack.loss_mask))
    scan.padded += int(pack.input_ids.shape[0])
    sources.extend(seq.source for seq in pack.sequences)
    packs.extend([pack_index(key)] * len(pack.sequences))


def _scan_pack(scan: ShardScan, raw: RawPack, rules: PackRules, sources: list[str], packs: list[int]) -> None:
    if rules.deep:
        scan.pack_digests[raw.key] = pack_digest(raw.members)
    pack, findings = parse_pack(raw)
    if pack is None:
        scan.unparsed += 1
        scan.add(findings, raw.key)
        return
    findings += check_pack(pack, rules)
    scan.add(findings, raw.key)
    if not boundaries.boundaries_usable(findings):
        scan.unparsed += 1
        return
    add_totals(scan, pack, raw.key, sources, packs)
