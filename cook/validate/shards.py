"""One shard file -> its packs, streamed, with the tar-level invariants (SPEC §9: "shards are complete
tars whose ``.tar.idx`` offsets match").

The tar is walked header by header with its own small USTAR parser (not ``tarfile``) so that every
offset is exact and nothing is trusted: a bad header checksum, a member type cook never writes, a
member or end-of-archive marker cut off by EOF, or non-zero bytes after the marker are findings, not
exceptions. Only one pack's members are held in memory at a time; every byte read is hashed (sha256)
for the manifest check.

Example: the members ``pack-000000000.input_ids.npy`` ... ``pack-000000000.meta.json`` at offsets 0,
9216, ... group into one ``RawPack(key="pack-000000000", offset=0, members={"input_ids.npy": ...})``;
the ``.tar.idx`` must hold ``[offset of each pack, end of the last pack]`` as little-endian uint64.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from cook import format as fmt
from cook.validate.problems import Code, Finding

BLOCK: Final = 512
READ_BUFFER: Final = 1 << 20
PREFETCH: Final = 64 << 20  # bytes asked of the kernel ahead of the walk, so disk reads overlap the checks
REGULAR_TYPES: Final = (b"0", b"\0")
TYPE_NAMES: Final = {
    b"x": "pax header",
    b"g": "pax global header",
    b"L": "GNU long name",
    b"5": "directory",
    b"2": "symlink",
    b"1": "hard link",
}


if TYPE_CHECKING:
    _Handle = io.BufferedReader[io.FileIO]

MemberData = bytes | memoryview  # a memoryview only from a walk with reuse_buffers (valid until the next pack)


@dataclass(frozen=True, slots=True)
class RawPack:
    """One Energon sample as stored: its key, the offset of its first header, member name -> bytes."""

    key: str
    offset: int
    members: dict[str, MemberData]


class _Cut(Exception):
    """The walk cannot go on (truncated or corrupt); the reason is in ``findings``."""


@dataclass(slots=True)
class ShardWalk:
    """Walks one shard; iterate ``packs()`` once, then read ``findings``, ``sha256``, ``complete``.

    ``reuse_buffers``: members are read into one buffer per member name, reused from pack to pack, and
    handed out as memoryviews that stay valid only until the next pack is read (no allocation, no page
    faults per member: the walk then reads at the speed of a plain ``readinto`` loop).
    """

    path: str
    hash_bytes: bool = True
    skip: frozenset[str] = frozenset()  # members seeked over, not read (only without hashing): not in RawPack
    reuse_buffers: bool = False
    findings: list[Finding] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)  # each pack's first header, then the end of the last
    complete: bool = False  # two zero blocks ended the archive, only zeros after them
    last_whole: bool = False  # the walk reached the end-of-archive marker (the last pack is whole)
    bytes_read: int = 0
    _hasher: Any = field(default_factory=hashlib.sha256)
    _buffers: dict[str, bytearray] = field(default_factory=dict)
    _prefetched: int = 0  # the file is requested from the kernel up to this offset

    @property
    def sha256(self) -> str:
        return str(self._hasher.hexdigest())

    def _read(self, handle: _Handle, size: int) -> bytes:
        data = handle.read(size)
        self.bytes_read += len(data)
        if self.hash_bytes:
            self._hasher.update(data)
        return data

    def packs(self, start_offset: int = 0) -> Iterator[RawPack]:
        """Yield the packs in file order from ``start_offset`` (a pack's first header; 0: the whole shard).

        A walk that stops early records why in ``findings``; the pack it was in is not yielded.
        """
        assert not (self.skip and self.hash_bytes), "skipped members cannot be hashed"
        seen: set[str] = set()
        key: str | None = None
        start, offset, members = 0, start_offset, dict[str, MemberData]()
        with io.BufferedReader(io.FileIO(self.path, "rb"), buffer_size=READ_BUFFER) as handle:
            handle.seek(start_offset)
            try:
                while (header := self._header(handle, offset)) is not None:
                    name, size = header
                    member_key, _, member = name.partition(".")
                    if member_key != key:
                        if key is not None:
                            yield RawPack(key, start, members)  # before the next pack's data is read
                        if member_key in seen:
                            self.findings.append((Code.PACK_KEY, f"members of {member_key} are not contiguous"))
                        seen.add(member_key)
                        key, start, members = member_key, offset, {}
                        self.offsets.append(offset)
                    if member in members:
                        self.findings.append((Code.MEMBER_DUPLICATE, f"{key}: member {member} appears twice"))
                    data = self._payload(handle, name, member, size, offset)
                    if data is not None:
                        members[member] = data
                    offset += BLOCK + size + (-size % BLOCK)
            except _Cut:
                while self.hash_bytes and self._read(handle, READ_BUFFER):
                    pass  # the sha256 and byte count cover the whole file, whatever stopped the walk
                return
            if key is not None and self.last_whole:
                yield RawPack(key, start, members)

    def _prefetch(self, handle: _Handle, offset: int) -> None:
        """Keep ``PREFETCH`` bytes ahead of ``offset`` requested (``POSIX_FADV_WILLNEED``): the kernel reads
        them in the background while this process hashes and checks, instead of one read at a time."""
        if offset + PREFETCH // 2 >= self._prefetched and hasattr(os, "posix_fadvise"):
            start = max(offset, self._prefetched)
            os.posix_fadvise(handle.fileno(), start, offset + PREFETCH - start, os.POSIX_FADV_WILLNEED)
            self._prefetched = offset + PREFETCH

    def _header(self, handle: _Handle, offset: int) -> tuple[str, int] | None:
        """The next member's (name, size); None at a clean end-of-archive marker; raises ``_Cut``."""
        self._prefetch(handle, offset)
        header = self._read(handle, BLOCK)
        if len(header) < BLOCK:
            self._cut(
                Code.TAR_TRUNCATED, f"at byte {offset}: " + ("header cut off" if header else "end marker missing")
            )
        if header == bytes(BLOCK):
            self._finish(handle, offset)
            return None
        parsed = _parse_header(header, offset)
        if isinstance(parsed, str):
            self._cut(Code.TAR_CORRUPT, parsed)
        return parsed  # type: ignore[return-value]

    def _payload(self, handle: _Handle, name: str, member: str, size: int, offset: int) -> MemberData | None:
        """The member's data (None when skipped), its block padding consumed; raises ``_Cut`` if cut off."""
        padded = size + (-size % BLOCK)
        if member in self.skip:
            handle.seek(padded, os.SEEK_CUR)
            return None
        if self.reuse_buffers:
            buffer = self._buffers.get(member)
            if buffer is None or len(buffer) < padded:  # a new buffer: views of the old one stay valid
                buffer = self._buffers[member] = bytearray(padded + padded // 4)
            view = memoryview(buffer)[:padded]
            got = handle.readinto(view)
            self.bytes_read += got
            if self.hash_bytes:
                self._hasher.update(view[:got])
            data: MemberData = view[:size]
        else:
            data = self._read(handle, size)
            got = len(data) + len(self._read(handle, padded - size)) if len(data) == size else len(data)
        if got < padded:
            self._cut(Code.TAR_TRUNCATED, f"at byte {offset}: member {name} cut off ({got} of {padded} bytes)")
        return data

    def _cut(self, code: Code, detail: str) -> None:
        self.findings.append((code, detail))
        raise _Cut

    def _finish(self, handle: _Handle, offset: int) -> None:
        """At the first zero block: a second one must follow, and only zero bytes after it."""
        self.offsets.append(offset)
        if self._read(handle, BLOCK) != bytes(BLOCK):
            self.findings.append((Code.TAR_TRUNCATED, f"at byte {offset}: end-of-archive marker incomplete"))
            return
        self.last_whole = True
        while chunk := self._read(handle, READ_BUFFER):
            if chunk.count(0) != len(chunk):
                self.findings.append((Code.TAR_CORRUPT, f"non-zero bytes after the end-of-archive marker at {offset}"))
                return
        self.complete = True


def _octal(field_bytes: bytes) -> int | None:
    if field_bytes[:1] and field_bytes[0] & 0x80:  # GNU base-256
        return int.from_bytes(field_bytes[1:], "big")
    text = field_bytes.split(b"\0", 1)[0].strip()
    try:
        return int(text, 8) if text else 0
    except ValueError:
        return None


def _parse_header(header: bytes, offset: int) -> tuple[str, int] | str:
    """A USTAR header -> (name, size), or a message saying why it is not a regular member cook writes."""
    stored = _octal(header[148:156])
    actual = sum(header[:148]) + 8 * 32 + sum(header[156:])
    if stored != actual:
        return f"header at byte {offset}: checksum {stored} != {actual}"
    kind = header[156:157]
    name = header[:100].split(b"\0", 1)[0]
    if header[257:262] == b"ustar" and header[345:500].strip(b"\0"):
        name = header[345:500].split(b"\0", 1)[0] + b"/" + name
    if kind not in REGULAR_TYPES:
        what = TYPE_NAMES.get(kind, f"type {kind!r}")
        return f"header at byte {offset}: member {name!r} is a {what}; cook writes regular USTAR members only"
    size = _octal(header[124:136])
    if size is None:
        return f"header at byte {offset}: unreadable size field"
    try:
        return name.decode("utf-8"), size
    except UnicodeDecodeError:
        return f"header at byte {offset}: member name {name!r} is not UTF-8"


def check_index(shard_path: str, walk: ShardWalk) -> list[Finding]:
    """``.tar.idx`` beside the shard == the walk's offsets (each pack's first header + the end)."""
    return check_index_offsets(shard_path, walk.offsets, walk.complete)


def check_index_offsets(shard_path: str, offsets: list[int], complete: bool) -> list[Finding]:
    """``.tar.idx`` == ``offsets`` (each pack's first header, then the end); ``complete``: the walk reached
    a clean end of the archive (otherwise only the file's presence is checked)."""
    idx_path = shard_path + fmt.INDEX_SUFFIX
    if not os.path.isfile(idx_path):
        return [(Code.IDX_MISSING, f"{os.path.basename(idx_path)} does not exist")]
    if not complete:
        return []  # offsets past a truncation are unknown; the truncation is reported already
    with open(idx_path, "rb") as handle:
        raw = handle.read()
    if len(raw) % 8:
        return [(Code.IDX_MISMATCH, f"{len(raw)} bytes is not a whole number of uint64 offsets")]
    stored = np.frombuffer(raw, dtype="<u8").astype(np.int64)  # int64 [packs + 1]
    actual = np.asarray(offsets, dtype=np.int64)
    if stored.shape == actual.shape and (stored == actual).all():
        return []
    if stored.shape != actual.shape:
        return [(Code.IDX_MISMATCH, f"{stored.shape[0]} offsets, expected {actual.shape[0]} (packs + 1)")]
    first = int(np.flatnonzero(stored != actual)[0])
    return [(Code.IDX_MISMATCH, f"offset {first} is {stored[first]}, the sample header is at {actual[first]}")]
