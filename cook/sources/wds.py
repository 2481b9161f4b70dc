"""WebDataset tar -> RawRecord per sample, streamed. Source id ``<name>#<key>`` (``name``: the
file's source name, ``files.source_name``).

Members are grouped into samples the WebDataset way: the key is the member path up to the first dot
of its basename, consecutive members with the same key form one sample. The ``.json`` member is the
record; the other members travel along as ``RawRecord.members`` (media), keyed by member basename
(``sample-01.jpg``); the media store resolves references against them. Nothing is extracted to
disk and nothing is unpickled.

Unsafe members (absolute names, ``..``, links, devices) fail their whole sample
(``unsafe_member``). A truncated or corrupt tar ends the file with one ``bad_archive`` failure that
names the offset where reading stopped; the samples before it are kept. A failure is a failed
``RawRecord`` in the sample's place (``RawRecord.failed``).
"""

from __future__ import annotations

import os
import posixpath
import tarfile
from collections.abc import Iterator

from cook.errors import RejectReason
from cook.sources.cursor import Cursor
from cook.sources.decode import decode_record
from cook.sources.tar_member import unsafe_reason
from cook.types import RawRecord


def split_member_name(name: str) -> tuple[str, str]:
    """``'a/b/sample-01.conv.json' -> ('a/b/sample-01', 'conv.json')``."""
    directory, base = posixpath.split(name)
    stem, _, ext = base.partition(".")
    return posixpath.join(directory, stem) if directory else stem, ext


def read_wds(
    path: str,
    max_record_bytes: int,
    span: tuple[int, int] | None = None,
    first_index: int = 1,
    name: str | None = None,
    cursor: Cursor | None = None,
) -> Iterator[RawRecord]:
    """A tar is always one whole unit: ``span`` and ``first_index`` are accepted and ignored."""
    name = path if name is None else name
    cursor = Cursor() if cursor is None else cursor
    key: str | None = None
    members: dict[str, bytes] = {}
    problem: str | None = None
    try:
        cursor.total = os.path.getsize(path)
        with tarfile.open(path, mode="r|*") as tar:
            for member in tar:
                if member.isdir():
                    continue
                member_key, ext = split_member_name(member.name)
                if member_key != key:
                    if key is not None:
                        cursor.done = tar.offset
                        yield _sample(path, name, key, members, problem, max_record_bytes)
                    key, members, problem = member_key, {}, None
                reason = unsafe_reason(member)
                if reason is not None:
                    problem = f"member {member.name!r}: {reason}"
                    continue
                if member.size > max_record_bytes and ext.endswith("json"):
                    problem = f"member {member.name!r}: {member.size} bytes > input.max_record_bytes"
                    continue
                handle = tar.extractfile(member)
                members[posixpath.basename(member.name)] = handle.read() if handle else b""
    except (tarfile.TarError, OSError, EOFError) as err:
        if key is not None:
            yield _sample(path, name, key, members, problem or f"archive broken inside sample: {err}", max_record_bytes)
            key = None
        yield RawRecord.failed(f"{name}#<archive>", path, RejectReason.BAD_ARCHIVE, f"tar unreadable: {err}"[:300])
    if key is not None:
        cursor.done = cursor.total
        yield _sample(path, name, key, members, problem, max_record_bytes)


def _sample(
    path: str, name: str, key: str, members: dict[str, bytes], problem: str | None, max_bytes: int
) -> RawRecord:
    source = f"{name}#{key}"
    if problem is not None:
        return RawRecord.failed(source, path, RejectReason.UNSAFE_MEMBER, problem)
    json_names = sorted(n for n in members if n.endswith(".json"))
    if not json_names:
        return RawRecord.failed(source, path, RejectReason.MISSING_FIELD, "sample has no .json member")
    media = {name: data for name, data in members.items() if name != json_names[0]}
    return decode_record(members[json_names[0]], source, path, max_bytes, media)
