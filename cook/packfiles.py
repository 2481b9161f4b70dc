"""Reading cooked packs from their files: a shard -> its packs (member name -> bytes), a ``.npy`` member ->
its array, a dataset -> its packs in order; and what a pack's media rows imply in placeholder tokens.
Used by ``cook validate`` (which checks what it reads), ``cook inspect``, ``cook stats`` and the HTML
views (which trust a dataset enough to locate packs). numpy, the standard library and ``format`` only.

    shard-000000.tar -ShardWalk.packs-> RawPack(key, offset, {"input_ids.npy": bytes, ...}) -read_npy-> arrays

The tar is walked header by header with a small USTAR parser of its own (not ``tarfile``) so that every
offset is exact and nothing is trusted: a bad header checksum, a member type cook never writes, a member
or end-of-archive marker cut off by EOF, or non-zero bytes after the marker are recorded as ``faults``,
never raised. The file is memory-mapped read-only and hashed with sha256 when asked; members are views
into the map, which lives as long as any of them does, so a pack read stays valid after the walk moves on.

Example: the members ``pack-000000000.input_ids.npy`` ... ``pack-000000000.meta.json`` at offsets 0,
9216, ... group into one ``RawPack(key="pack-000000000", offset=0, members={"input_ids.npy": ...})``;
the ``.tar.idx`` beside the shard holds ``[offset of each pack, end of the last pack]`` as little-endian
uint64, which ``find_pack`` uses to seek to one pack.
"""

from __future__ import annotations

import enum
import hashlib
import math
import mmap
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from tokenize import TokenError
from typing import Any, Final

import numpy as np

from cook import format as fmt
from cook.manifest import load_manifest

BLOCK: Final = 512
VERIFY_HEADERS: Final = 1024  # header checksums verified together
REGULAR_TYPES: Final = (b"0", b"\0")
TYPE_NAMES: Final = {
    b"x": "pax header",
    b"g": "pax global header",
    b"L": "GNU long name",
    b"5": "directory",
    b"2": "symlink",
    b"1": "hard link",
}
_ZERO_BLOCK: Final = bytes(BLOCK)
_NO_PREFIX: Final = bytes(155)  # a USTAR name prefix field that is empty
FRAME_MEMBERS: Final = "frame.<k>"  # in a ``skip`` set: every stored frame member (frame.<k>.png|jpg) too
ONLY_META: Final = frozenset(set(fmt.MEMBERS) - {fmt.META} | {FRAME_MEMBERS})  # skip these to read meta.json alone
VISUAL_KINDS: Final = ("image", "video", "tiles")

MemberData = bytes | memoryview


class PackUnreadable(Exception):
    """A shard that should hold packs cannot be opened, or its walk stopped on a fault (one line: the shard,
    and the pack or byte where it stopped). ``cook inspect`` and ``cook stats`` report it; ``cook validate``
    reads the walk's ``faults`` instead."""


class TarFault(enum.Enum):
    """What can be wrong with a shard's tar structure (``cook validate`` gives each its error code)."""

    TRUNCATED = "a member or the end-of-archive marker is cut off"
    CORRUPT = "a bad header, a member type cook never writes, or bytes after the end"
    SPLIT_PACK = "a pack's members are not contiguous"
    DUPLICATE_MEMBER = "a member appears twice in a pack"


@dataclass(frozen=True, slots=True)
class RawPack:
    """One Energon sample as stored: its key, the offset of its first header, member name -> bytes, and
    member name -> size of each member the walk seeked over (``ShardWalk.skip``)."""

    key: str
    offset: int
    members: dict[str, MemberData]
    skipped: dict[str, int] = field(default_factory=dict)


class _Cut(Exception):
    """The walk cannot go on at header ``at`` (truncated or corrupt; ``fault`` None: recorded already)."""

    def __init__(self, fault: TarFault | None, detail: str, at: int) -> None:
        super().__init__(detail)
        self.fault, self.detail, self.at = fault, detail, at


@dataclass(slots=True)
class _Pending:
    """Packs read but not handed out yet, and their headers: the checksums of ``VERIFY_HEADERS`` headers are
    verified together (one NumPy sum), then the packs go out."""

    headers: list[bytes] = field(default_factory=list)
    at: list[int] = field(default_factory=list)  # each header's offset
    packs: list[RawPack] = field(default_factory=list)


@dataclass(slots=True)
class ShardWalk:
    """Walks one shard; iterate ``packs()`` once, then read ``faults``, ``sha256``, ``complete``, ``offsets``."""

    path: str
    hash_bytes: bool = True
    # members seeked over, not read (only without hashing): their sizes in RawPack.skipped; FRAME_MEMBERS: frames
    skip: frozenset[str] = frozenset()
    verify_headers: int = VERIFY_HEADERS  # header checksums verified together (1: each pack out as it ends)
    faults: list[tuple[TarFault, str]] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)  # each pack's first header, then the end of the last
    complete: bool = False  # two zero blocks ended the archive, only zeros after them
    last_whole: bool = False  # the walk reached the end-of-archive marker (the last pack is whole)
    bytes_read: int = 0
    _hasher: Any = field(default_factory=hashlib.sha256)
    _fault_at: list[int] = field(default_factory=list)  # the header offset each fault was found at

    @property
    def sha256(self) -> str:
        return str(self._hasher.hexdigest())

    def packs(self, start_offset: int = 0) -> Iterator[RawPack]:
        """Yield the packs in file order from ``start_offset`` (a pack's first header; 0: the whole shard).

        A walk that stops early records why in ``faults``; the pack it was in is not yielded.
        """
        assert not (self.skip and self.hash_bytes), "skipped members cannot be hashed"
        with open(self.path, "rb", buffering=0) as handle:
            size = os.fstat(handle.fileno()).st_size
            data = memoryview(mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) if size else b"")
        self.bytes_read = max(0, size - start_offset)
        try:
            yield from self._walk(data, start_offset)
        finally:
            if self.hash_bytes:  # the sha256 covers the whole file, whatever stopped the walk
                self._hasher.update(data[start_offset:])

    def _walk(self, data: memoryview, offset: int) -> Iterator[RawPack]:
        seen: set[str] = set()
        key: str | None = None
        start, members, skipped = offset, dict[str, MemberData](), dict[str, int]()
        skip, end = self.skip, len(data)
        frames = FRAME_MEMBERS in skip
        pending = _Pending()
        try:
            while (header := self._header(data, offset, pending)) is not None:
                name, size = header
                member_key, _, member = name.partition(".")
                if member_key != key:
                    if key is not None:
                        pending.packs.append(RawPack(key, start, members, skipped))
                        if len(pending.headers) >= self.verify_headers:
                            yield from self._release(pending, offset)
                    if member_key in seen:
                        self._fault(TarFault.SPLIT_PACK, f"members of {member_key} are not contiguous", offset)
                    seen.add(member_key)
                    key, start, members, skipped = member_key, offset, {}, {}
                    self.offsets.append(offset)
                if member in members:
                    self._fault(TarFault.DUPLICATE_MEMBER, f"{key}: member {member} appears twice", offset)
                padded = size + (-size % BLOCK)
                if member in skip or (frames and fmt.parse_frame_member(member) is not None):
                    skipped[member] = size
                elif offset + BLOCK + padded <= end:
                    members[member] = data[offset + BLOCK : offset + BLOCK + size]
                else:
                    detail = f"at byte {offset}: member {name} cut off ({end - offset - BLOCK} of {padded} bytes)"
                    raise _Cut(TarFault.TRUNCATED, detail, offset)
                offset += BLOCK + padded
            if key is not None and self.last_whole:
                pending.packs.append(RawPack(key, start, members, skipped))
            yield from self._release(pending, offset)
        except _Cut as cut:
            if cut.fault is not None:
                yield from self._release(pending, start, cut)

    def _header(self, data: memoryview, offset: int, pending: _Pending) -> tuple[str, int] | None:
        """The next member's (name, size); None at a clean end-of-archive marker; raises ``_Cut``."""
        header = bytes(data[offset : offset + BLOCK])
        if len(header) < BLOCK:
            detail = f"at byte {offset}: " + ("header cut off" if header else "end marker missing")
            raise _Cut(TarFault.TRUNCATED, detail, offset)
        if header == _ZERO_BLOCK:
            self._finish(data, offset)
            return None
        pending.headers.append(header)
        pending.at.append(offset)
        parsed = _parse_header(header, offset)
        if isinstance(parsed, str):
            raise _Cut(TarFault.CORRUPT, parsed, offset)
        return parsed

    def _release(self, pending: _Pending, end: int, cut: _Cut | None = None) -> Iterator[RawPack]:
        """Hand out the pending packs (the last one ends at ``end``) up to the first header whose checksum is
        wrong. That header stops the walk (raises an empty ``_Cut``), and outranks ``cut``, the reason the
        walk stopped otherwise, if any."""
        table = np.frombuffer(b"".join(pending.headers), np.uint8).reshape(-1, BLOCK)  # uint8 [H, 512]
        actual = table.sum(axis=1, dtype=np.int64) - table[:, 148:156].sum(axis=1, dtype=np.int64) + 8 * ord(" ")
        stored = _checksums(table)
        wrong = np.flatnonzero(actual != stored)
        packs, stop = pending.packs, cut
        if wrong.size:
            i = int(wrong[0])
            at, value = pending.at[i], int(stored[i])
            ends = [*(pack.offset for pack in packs[1:]), end][: len(packs)]
            packs = [pack for pack, pack_end in zip(packs, ends, strict=True) if pack_end <= at]
            kept = [k for k, fault_at in enumerate(self._fault_at) if fault_at < at]
            self.faults, self._fault_at = [self.faults[k] for k in kept], [self._fault_at[k] for k in kept]
            detail = f"header at byte {at}: checksum {value if value >= 0 else None} != {actual[i]}"
            stop = _Cut(TarFault.CORRUPT, detail, at)
        if stop is not None and stop.fault is not None:
            self._fault(stop.fault, stop.detail, stop.at)
            self.last_whole = self.complete = False
        pending.headers, pending.at, pending.packs = [], [], []
        yield from packs
        if wrong.size and cut is None:
            raise _Cut(None, "", at)

    def _fault(self, fault: TarFault, detail: str, at: int) -> None:
        self.faults.append((fault, detail))
        self._fault_at.append(at)

    def _finish(self, data: memoryview, offset: int) -> None:
        """At the first zero block: a second one must follow, and only zero bytes after it."""
        self.offsets.append(offset)
        if data[offset + BLOCK : offset + 2 * BLOCK] != _ZERO_BLOCK:
            self._fault(TarFault.TRUNCATED, f"at byte {offset}: end-of-archive marker incomplete", offset)
            return
        self.last_whole = True
        self.complete = not np.frombuffer(data[offset + 2 * BLOCK :], np.uint8).any()
        if not self.complete:
            self._fault(TarFault.CORRUPT, f"non-zero bytes after the end-of-archive marker at {offset}", offset)


def _checksums(table: np.ndarray) -> np.ndarray:
    """int64 [H]: each header's checksum field (``table``: uint8 [H, 512]; -1 where it is unreadable). The
    field as tar writers write it, six octal digits, NUL, space, is read for all rows at once; any other
    form goes through ``_octal``, row by row."""
    field = table[:, 148:156]
    digits = field[:, :6].astype(np.int64) - ord("0")
    plain = ((digits >= 0) & (digits <= 7)).all(axis=1) & (field[:, 6] == 0) & (field[:, 7] == ord(" "))
    stored: np.ndarray = digits @ (8 ** np.arange(5, -1, -1, dtype=np.int64))
    for i in np.flatnonzero(~plain).tolist():
        value = _octal(field[i].tobytes())
        stored[i] = -1 if value is None else value
    return stored


def _octal(field_bytes: bytes) -> int | None:
    if field_bytes[:1] and field_bytes[0] & 0x80:  # GNU base-256
        return int.from_bytes(field_bytes[1:], "big")
    text = field_bytes.split(b"\0", 1)[0].strip()
    try:
        return int(text, 8) if text else 0
    except ValueError:
        return None


def _parse_header(header: bytes, offset: int) -> tuple[str, int] | str:
    """A USTAR header -> (name, size), or a message saying why it is not a regular member cook writes (its
    checksum is verified with the headers around it, ``ShardWalk._release``)."""
    kind = header[156:157]
    name = header[:100].split(b"\0", 1)[0]
    if header[257:262] == b"ustar" and header[345:500] != _NO_PREFIX:
        name = header[345:500].split(b"\0", 1)[0] + b"/" + name
    if kind not in REGULAR_TYPES:
        what = TYPE_NAMES.get(kind, f"type {kind!r}")
        return f"header at byte {offset}: member {name!r} is a {what}; cook writes regular USTAR members only"
    try:  # eleven octal digits and a NUL, as tar writers write it; _octal reads every other form
        size = int(header[124:135], 8) if header[135] == 0 else _octal(header[124:136])
    except ValueError:
        size = _octal(header[124:136])
    if size is None:
        return f"header at byte {offset}: unreadable size field"
    try:
        return name.decode("utf-8"), size
    except UnicodeDecodeError:
        return f"header at byte {offset}: member name {name!r} is not UTF-8"


# ---- .npy members

NPY_ERRORS: Final = (ValueError, OSError, EOFError, SyntaxError, TokenError, RecursionError)
_MAGIC_V1: Final = b"\x93NUMPY\x01\x00"
_LAYOUT_CACHE: Final = 4096  # header dicts seen (one per dtype and shape: a dataset has a few hundred)
_layouts: dict[bytes, tuple[np.dtype, tuple[int, ...], int]] = {}  # canonical header -> dtype, shape, count
_HEADER: Final = re.compile(rb"\{'descr': '([<>|][a-zA-Z]\d+)', 'fortran_order': False, 'shape': \(([\d, ]*)\), \} *\n")


def read_npy(data: MemberData) -> np.ndarray:
    """One ``.npy`` member -> its array; raises one of ``NPY_ERRORS``: ``ValueError`` (pickled, malformed,
    short or trailing bytes), or what ``np.load`` raises parsing a damaged header dict.

    The version-1.0 header ``np.save`` writes for a C-order array of a non-object dtype, e.g.
    ``{'descr': '<i4', 'fortran_order': False, 'shape': (8192,), }``, with exactly ``prod(shape) * itemsize``
    bytes after it, is read as a read-only view of ``data`` (no copy); any other member goes to
    ``format.load_npy`` (``allow_pickle=False``), so nothing is unpickled and nothing is accepted that
    ``np.load(allow_pickle=False)`` would refuse. Bytes after the array, which ``np.load`` silently
    ignores, are refused.
    """
    view = memoryview(data)
    if view[:8].tobytes() == _MAGIC_V1 and len(view) >= 10:
        end = 10 + view[8] + (view[9] << 8)
        header = view[10:end].tobytes()
        layout = _layouts.get(header)
        if layout is None and (layout := _canonical_layout(header)) is not None:
            if len(_layouts) >= _LAYOUT_CACHE:
                _layouts.clear()
            _layouts[header] = layout
        if layout is not None:
            dtype, shape, count = layout
            extra = len(view) - end - count * dtype.itemsize
            if extra > 0:
                raise ValueError(f"{extra} bytes after the array data")
            if extra == 0:
                array = np.frombuffer(view, dtype=dtype, count=count, offset=end)
                return array if len(shape) == 1 else array.reshape(shape)
    return fmt.load_npy(bytes(view))  # a short payload or any other header: np.load says what is wrong


def _canonical_layout(text: bytes) -> tuple[np.dtype, tuple[int, ...], int] | None:
    """The dtype, shape and element count of a header dict in ``np.save``'s own form; None for any other
    or an object dtype."""
    match = _HEADER.fullmatch(text)
    if match is None:
        return None
    try:
        dtype = np.dtype(match.group(1).decode("ascii"))
        shape = tuple(int(part) for part in match.group(2).split(b",") if part.strip())
    except (TypeError, ValueError):
        return None
    return None if dtype.hasobject else (dtype, shape, math.prod(shape))


# ---- what media rows imply (SPEC §6)


def visual_embeddings(kind: str, frames: int, height_px: int, width_px: int) -> int:
    """``<image>`` tokens of one ``media_sizes`` row of ``kind`` ("image" | "video" | "tiles")."""
    if kind == "tiles":
        return fmt.tiles_embeddings(frames)
    if kind == "video":
        return fmt.video_embeddings(frames, height_px, width_px)
    return fmt.image_embeddings(height_px, width_px)


def clip_tokens(lengths: np.ndarray) -> np.ndarray:
    """int64 [C]: ``<so_embedding>`` tokens of each clip from its valid 10 ms frames. A clip of ``L`` frames
    came from ``L * 160 + r`` samples (``0 <= r < 160``) and ``format.audio_clip_tokens`` only looks at
    ``samples // 160``: 3000 frames (30 s) -> 375, 100 frames (1 s) -> 13."""
    return np.array([fmt.audio_clip_tokens(int(frames) * fmt.AUDIO_HOP) for frames in lengths], dtype=np.int64)


# ---- a dataset's packs


def iter_packs(root: str, skip: frozenset[str] = frozenset()) -> Iterator[tuple[str, RawPack]]:
    """(shard name, pack) for every pack in dataset order; ``skip``: members not read. Raises
    ``PackUnreadable`` at a shard that cannot be opened or whose walk records a fault."""
    for span in load_manifest(root).shards:
        walk = ShardWalk(os.path.join(root, span.name), hash_bytes=False, skip=skip)
        for raw in _walked(walk, span.name):
            yield span.name, raw
        if walk.faults:
            raise PackUnreadable(f"{span.name}: {walk.faults[0][1]}")


def _walked(walk: ShardWalk, name: str, start_offset: int = 0) -> Iterator[RawPack]:
    """``walk.packs(start_offset)``, with a shard that cannot be opened raised as ``PackUnreadable``."""
    try:
        yield from walk.packs(start_offset)
    except OSError as err:
        raise PackUnreadable(f"{name}: cannot be read ({err.strerror or err})") from None


def _index_offset(shard_path: str, position: int) -> int:
    """The ``position``-th pack's header offset from ``.tar.idx`` (0 when the index cannot say)."""
    try:
        with open(shard_path + fmt.INDEX_SUFFIX, "rb") as handle:
            handle.seek(8 * position)
            raw = handle.read(8)
    except OSError:
        return 0
    return int(np.frombuffer(raw, dtype="<u8")[0]) if len(raw) == 8 else 0


def read_pack(shard_path: str, position: int, key: str, skip: frozenset[str] = frozenset()) -> RawPack:
    """The pack ``key``, the ``position``-th of a shard, read alone (``skip``: members not read): from its
    ``.tar.idx`` offset, then (a damaged index) by a walk from the start. Raises ``PackUnreadable`` when
    the shard cannot be opened or does not yield it (a fault, or a missing key)."""
    name = os.path.basename(shard_path)
    for start in (_index_offset(shard_path, position), 0):  # the index, then a plain walk
        walk = ShardWalk(shard_path, hash_bytes=False, skip=skip, verify_headers=1)
        for raw in _walked(walk, name, start):
            if raw.key == key:
                return raw
            if start:
                break
    why = walk.faults[0][1] if walk.faults else "the shard does not hold it"
    raise PackUnreadable(f"{key} in {name} cannot be read: {why}")


def find_pack(root: str, index: int) -> tuple[str, RawPack] | None:
    """(shard name, pack) of pack ``index``; None when no shard of the manifest spans it. Raises
    ``PackUnreadable`` when the shard that spans it cannot be read or does not yield it."""
    for span in load_manifest(root).shards:
        if span.first_pack <= index < span.first_pack + span.packs:
            path = os.path.join(root, span.name)
            return span.name, read_pack(path, index - span.first_pack, fmt.pack_key(index))
    return None


# ---- one pack's members, located from their tar headers alone


def pack_member_spans(shard_path: str, offset: int) -> dict[str, tuple[int, int]]:
    """Member name -> (offset of its data in the shard, size) for the pack whose first header is at
    ``offset``: only the pack's tar headers are read (``cook repack`` then reads just the bytes it moves).
    For a dataset already trusted (a finished cook's); raises ``PackUnreadable`` at a header it cannot parse."""
    spans: dict[str, tuple[int, int]] = {}
    key: str | None = None
    try:
        fd = os.open(shard_path, os.O_RDONLY)
    except OSError as err:
        raise PackUnreadable(f"{shard_path}: cannot be read ({err.strerror or err})") from None
    try:
        while len(header := os.pread(fd, BLOCK, offset)) == BLOCK and header != _ZERO_BLOCK:
            parsed = _parse_header(header, offset)
            if isinstance(parsed, str):
                raise PackUnreadable(f"{shard_path}: {parsed}")
            name, size = parsed
            member_key, _, member = name.partition(".")
            if key is not None and member_key != key:
                break
            key = member_key
            spans[member] = (offset + BLOCK, size)
            offset += BLOCK + size + (-size % BLOCK)
    finally:
        os.close(fd)
    if not spans:
        raise PackUnreadable(f"{shard_path}: no pack at byte {offset}")
    return spans
