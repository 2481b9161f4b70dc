"""Media references -> bytes, in the order of SPEC §4 (``MediaStore.resolve``).

    resolve(ref, members, origin_dir) -> bytes   or   Rejected(media_missing | media_unsafe | media_limit | ...)

Resolution order, first hit wins:

1. **A member of the same WebDataset sample** (``members``: name -> bytes):
   a. by full name (``members[ref]``);
   b. by basename: ``members[basename(ref)]``, else the one member whose own basename equals it;
   c. by extension: the ref's extension is the ref itself when it has no ``.`` and no ``/``
      (``"jpg"``), else the part after the last ``.`` of its basename; it resolves when EXACTLY one
      member's name ends with ``.<ext>`` (or equals ``<ext>``), case-insensitively. Two ``.jpg`` members
      and the ref ``"jpg"`` resolve to neither (ambiguous) and the search goes on to the stores.
2. **A store**: for a relative ref, each auxiliary store in order (``input.media_stores``: directories
   or uncompressed ``.tar`` files), then ``input.media_root``, then ``origin_dir`` (the directory of
   the input file; ``""`` is the working directory), joined to the ref. A ref that leaves its root
   lexically (``../x.jpg``) raises ``media_unsafe`` at once; so does a directory entry whose real path
   (symlinks resolved) is outside the root's real path: symlinks that point out of a store are refused
   (add their target as a store instead). Directories and dangling links are not served.
   An **absolute** ref that exists locally is read directly (SPEC §4 implies it): only a regular file
   (a device, FIFO or socket is ``media_unsafe``) and within the byte limit.
3. **The basename fallback**: an absolute ref that does not exist locally resolves to its basename at
   the top level of the first auxiliary store, else ``media_root``, that holds it.

``data:`` URIs (``data:image/png;base64,...``, as OpenAI-style records carry) are decoded in place;
``http(s)://`` and other URLs are ``media_unsupported`` (nothing is fetched). Anything else that
resolves nowhere is ``media_missing`` with the ref in the detail.

Tar stores are indexed once, at construction, by normalized member name (``./a/b.jpg`` -> ``a/b.jpg``);
members are read by offset with ``os.pread`` on a held descriptor, never extracted. Symlinks,
hardlinks, devices, FIFOs, directories and names that are absolute or contain ``..`` are not indexed,
i.e. never served. When a name occurs twice the first member wins.

Sizes are checked against ``media.max_media_bytes`` from ``stat``/the tar header before reading
(``media_limit``), and every read is bounded by the limit.

A store holds open file descriptors: build one per process (or Ray actor), and ``close()`` it.
"""

from __future__ import annotations

import base64
import binascii
import os
import posixpath
import stat
import tarfile
from collections.abc import Mapping
from typing import Final

from cook.errors import ConfigError, Rejected, RejectReason
from cook.sources.tar_member import unsafe_reason

_URL_SCHEMES: Final = ("http://", "https://", "s3://", "gs://", "ftp://", "file://")


class _TarStore:
    """One uncompressed tar indexed by member name: name -> (data offset, size)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.members: dict[str, tuple[int, int]] = {}
        try:
            with tarfile.open(path, mode="r:") as tar:
                for member in tar:
                    name = _safe_member_name(member)
                    if name is not None and name not in self.members:
                        self.members[name] = (member.offset_data, member.size)
        except (tarfile.TarError, OSError) as err:
            raise ConfigError(f"input.media_stores: {path!r} is not a readable uncompressed tar: {err}") from None
        self._fd = os.open(path, os.O_RDONLY)

    def read(self, name: str, max_bytes: int, ref: str) -> bytes | None:
        entry = self.members.get(name)
        if entry is None:
            return None
        offset, size = entry
        _check_size(size, max_bytes, ref)
        data = os.pread(self._fd, size, offset)
        if len(data) != size:
            raise Rejected(RejectReason.MEDIA_DECODE, f"{ref[:200]!r}: tar {self.path!r} truncated at member {name!r}")
        return data

    def close(self) -> None:
        os.close(self._fd)


class _DirStore:
    """A directory: relative refs are joined to it and must stay inside its real path."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.real = os.path.realpath(path)

    def read(self, name: str, max_bytes: int, ref: str) -> bytes | None:
        candidate = os.path.join(self.real, name)
        if not os.path.lexists(candidate):
            return None
        real = os.path.realpath(candidate)
        if os.path.commonpath([real, self.real]) != self.real:
            raise Rejected(RejectReason.MEDIA_UNSAFE, f"{ref[:200]!r} resolves outside the store {self.path!r}")
        if not os.path.isfile(real):  # a directory, a dangling link, a device: not served by this store
            return None
        return _read_regular_file(real, max_bytes, ref)

    def close(self) -> None:
        pass


class MediaStore:
    """Resolves media references to bytes (module docstring); holds the tar indexes and descriptors."""

    def __init__(self, media_root: str | None, stores: list[str], max_media_bytes: int) -> None:
        self.max_media_bytes = max_media_bytes
        self._stores: list[_TarStore | _DirStore] = []
        self._origins: dict[str, _DirStore | None] = {}  # origin_dir -> store, cached
        try:
            for path in [*stores, *([media_root] if media_root else [])]:
                if os.path.isdir(path):
                    self._stores.append(_DirStore(path))
                elif os.path.isfile(path):
                    self._stores.append(_TarStore(path))
                else:
                    knob = "input.media_root" if path == media_root else "input.media_stores"
                    raise ConfigError(f"{knob}: {path!r} is neither a directory nor a tar file")
        except ConfigError:
            self.close()
            raise

    def close(self) -> None:
        for store in self._stores:
            store.close()

    def __enter__(self) -> MediaStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def resolve(self, ref: str, members: Mapping[str, bytes], origin_dir: str) -> bytes:
        """The bytes of ``ref`` (SPEC §4 order, see the module docstring) or ``Rejected``."""
        if not ref:
            raise Rejected(RejectReason.MEDIA_MISSING, "empty media reference")
        if ref.startswith("data:"):
            return self._data_uri(ref)
        if ref.lower().startswith(_URL_SCHEMES):
            raise Rejected(RejectReason.MEDIA_UNSUPPORTED, f"{ref[:200]!r}: remote URLs are not fetched")
        data = _from_members(ref, members)
        if data is not None:
            _check_size(len(data), self.max_media_bytes, ref)
            return data
        if os.path.isabs(ref):
            return self._absolute(ref)
        name = _relative_name(ref)
        for store in self._roots(origin_dir):
            found = store.read(name, self.max_media_bytes, ref)
            if found is not None:
                return found
        raise Rejected(RejectReason.MEDIA_MISSING, f"{ref[:200]!r} not found in the sample, stores or media_root")

    def _roots(self, origin_dir: str) -> list[_TarStore | _DirStore]:
        origin_dir = origin_dir or "."
        if origin_dir not in self._origins:
            self._origins[origin_dir] = _DirStore(origin_dir) if os.path.isdir(origin_dir) else None
        origin = self._origins[origin_dir]
        return self._stores if origin is None else [*self._stores, origin]

    def _absolute(self, ref: str) -> bytes:
        if os.path.lexists(ref):
            return _read_regular_file(ref, self.max_media_bytes, ref)
        base = posixpath.basename(ref)
        if base and base not in (".", ".."):
            for store in self._stores:
                found = store.read(base, self.max_media_bytes, ref)
                if found is not None:
                    return found
        raise Rejected(
            RejectReason.MEDIA_MISSING, f"{ref[:200]!r} does not exist and its basename is in no media store"
        )

    def _data_uri(self, ref: str) -> bytes:
        header, sep, payload = ref.partition(",")
        if not sep or not header.endswith(";base64"):
            raise Rejected(RejectReason.MEDIA_UNSUPPORTED, "only base64 data: URIs are supported")
        _check_size(len(payload) * 3 // 4, self.max_media_bytes, header)
        try:
            return base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError) as err:
            raise Rejected(RejectReason.MEDIA_DECODE, f"{header}: bad base64 payload: {err}") from None


def _from_members(ref: str, members: Mapping[str, bytes]) -> bytes | None:
    """Step 1: full name, basename, then a unique extension match (module docstring)."""
    if not members:
        return None
    if ref in members:
        return members[ref]
    base = posixpath.basename(ref)
    if base in members:
        return members[base]
    same_base = [name for name in members if posixpath.basename(name) == base]
    if len(same_base) == 1:
        return members[same_base[0]]
    if "." not in ref and "/" not in ref:
        ext = ref.lower()  # a bare extension: "jpg"
    else:
        _, dot, ext = base.lower().rpartition(".")
        if not dot or not ext:
            return None
    matches = [name for name in members if name.lower() == ext or name.lower().endswith("." + ext)]
    return members[matches[0]] if len(matches) == 1 else None


def _relative_name(ref: str) -> str:
    """Normalize a relative ref (``./a//b.jpg`` -> ``a/b.jpg``); ``media_unsafe`` when it climbs out."""
    name = posixpath.normpath(ref)
    if name == ".." or name.startswith("../") or name.startswith("/"):
        raise Rejected(RejectReason.MEDIA_UNSAFE, f"{ref[:200]!r} climbs out of its media root")
    return name


def _safe_member_name(member: tarfile.TarInfo) -> str | None:
    """Normalized name of a regular, safely-named tar member; None for anything not to be served
    (also a sparse member: its data is not one run at ``offset_data``, so ``pread`` cannot serve it)."""
    if unsafe_reason(member) is not None or member.issparse():
        return None
    normalized = posixpath.normpath(member.name)
    return None if normalized in (".", "") else normalized


def _check_size(size: int, max_bytes: int, ref: str) -> None:
    if size > max_bytes:
        raise Rejected(RejectReason.MEDIA_LIMIT, f"{ref[:200]!r}: {size} bytes > media.max_media_bytes={max_bytes}")


def _read_regular_file(path: str, max_bytes: int, ref: str) -> bytes:
    """Read a regular file, refusing others and anything above ``max_bytes`` (checked, then bounded)."""
    try:
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            raise Rejected(RejectReason.MEDIA_MISSING, f"{ref[:200]!r} is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise Rejected(RejectReason.MEDIA_UNSAFE, f"{ref[:200]!r} is not a regular file (device, FIFO, socket)")
        _check_size(info.st_size, max_bytes, ref)
        with open(path, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as err:
        raise Rejected(RejectReason.MEDIA_MISSING, f"{ref[:200]!r} unreadable: {err.strerror}") from None
    _check_size(len(data), max_bytes, ref)
    return data
