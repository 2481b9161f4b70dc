"""The one safety check of a tar member, for the WebDataset reader and the tar media store.

    TarInfo -> None (safe to read) | the reason it is not

Only regular files are read: links (symbolic or hard), devices, FIFOs and directories never are,
and neither is a member whose name is absolute or has a ``..`` part, whatever it points at.
"""

from __future__ import annotations

import tarfile


def unsafe_reason(member: tarfile.TarInfo) -> str | None:
    """Why ``member`` must not be read, or None when it is a regular file with a contained name.

    >>> unsafe_reason(tarfile.TarInfo("a/b.jpg")), unsafe_reason(tarfile.TarInfo("../b.jpg"))
    (None, 'absolute or parent-relative name')
    """
    if not member.isreg():
        return "link or special file"
    if member.name.startswith("/") or ".." in member.name.split("/"):
        return "absolute or parent-relative name"
    return None
