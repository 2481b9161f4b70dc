"""Input path or glob -> sorted list of input files, the format of each, and their source names.

**Formats.** By suffix: ``.jsonl`` -> ``jsonl``, ``.parquet`` -> ``parquet``, ``.tar`` -> ``wds``, and
``.json`` -> ``json`` when the file's first non-blank byte is ``[`` (one top-level JSON array, read as
its records, see ``json_array.py``), else ``jsonl`` (JSON Lines under a ``.json`` name). A ``.json``
file is looked at this way also when ``input.format`` is ``jsonl``: the config has no separate
``json`` value, and reading an array line by line would only reject every line.

**Source names.** A source id starts with the input file's path *relative to the input root*
(``source_name``), so the ids (and the shards, whose ``meta.json`` holds them) do not depend on how
``input.path`` was spelled or on the working directory. The root is ``input.path`` itself when it
is a directory, the directory part of a glob's non-magic prefix (the text before the first ``*``,
``?`` or ``[``) for a glob, and the file's directory for a single file::

    input.path               file                      source name
    data/                    data/x.jsonl              x.jsonl
    data/**/*.jsonl          data/sub/x.jsonl          sub/x.jsonl
    ../data/x.jsonl          ../data/x.jsonl           x.jsonl
    /abs/data/x.jsonl        /abs/data/x.jsonl         x.jsonl
    /abs/da*/**/x.jsonl      /abs/data/a/x.jsonl       data/a/x.jsonl
"""

from __future__ import annotations

import codecs
import glob
import os
import re
from typing import BinaryIO, Final

from cook.errors import ConfigError

SUFFIX_FORMATS: Final = {".jsonl": "jsonl", ".json": "json", ".parquet": "parquet", ".tar": "wds"}
_GLOB_MAGIC: Final = re.compile(r"[*?[]")
_BLANK: Final = b" \t\r\n"
_SNIFF_BYTES: Final = 4096


def first_nonblank(handle: BinaryIO) -> tuple[int, bytes]:
    """``(offset, byte)`` of the first byte of the file that is not whitespace (after a UTF-8 BOM);
    ``(end, b"")`` when there is none."""
    offset = len(codecs.BOM_UTF8) if handle.read(len(codecs.BOM_UTF8)) == codecs.BOM_UTF8 else 0
    handle.seek(offset)
    while block := handle.read(_SNIFF_BYTES):
        rest = block.lstrip(_BLANK)
        if rest:
            return offset + len(block) - len(rest), rest[:1]
        offset += len(block)
    return offset, b""


def first_byte(path: str) -> bytes:
    """The first byte of the file that is not whitespace (after a UTF-8 BOM); ``b""`` when none."""
    with open(path, "rb") as handle:
        return first_nonblank(handle)[1]


def detect_format(path: str, configured: str) -> str:
    """``configured`` unless it is ``auto``; then by suffix (module docstring). A ``.json`` file is
    ``json`` or ``jsonl`` by its first byte, whether the format is ``auto`` or ``jsonl``."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix == ".json" and configured in ("auto", "jsonl"):
        try:
            return "json" if first_byte(path) == b"[" else "jsonl"
        except OSError as err:
            raise ConfigError(f"input.path: cannot read {path!r}: {err.strerror}") from None
    if configured != "auto":
        return configured
    if suffix not in SUFFIX_FORMATS:
        raise ConfigError(
            f"input.path: cannot tell the format of {path!r} from its suffix (.jsonl, .json, .parquet, "
            f".tar); set input.format to one of jsonl, parquet, wds"
        )
    return SUFFIX_FORMATS[suffix]


def list_inputs(path: str, configured_format: str) -> list[tuple[str, str]]:
    """Expand a file, directory or glob into sorted ``(file, format)`` pairs.

    A directory means every file in it with a known suffix. Nothing matching is a config error.
    """
    if os.path.isdir(path):
        candidates = [os.path.join(path, n) for n in os.listdir(path)]
        files = [p for p in candidates if os.path.splitext(p)[1].lower() in SUFFIX_FORMATS]
    else:
        files = glob.glob(path, recursive=True)
    files = sorted(p for p in files if os.path.isfile(p))
    if not files:
        raise ConfigError(f"input.path: {path!r} matches no input file")
    return [(p, detect_format(p, configured_format)) for p in files]


def source_name(path: str, input_path: str) -> str:
    """``path`` (a file ``list_inputs(input_path, ...)`` returned) relative to the input root, with
    ``/`` separators: the part of a source id before ``#`` (module docstring).

    Lexical, no file system access, so every process computes the same name whatever its working
    directory: a directory input lists only its own files, so for a directory and for a single file
    alike the root is the file's directory and the name is its basename.

    >>> source_name("../data/sub/x.jsonl", "../data/**/*.jsonl"), source_name("/abs/data/x.jsonl", "/abs/data")
    ('sub/x.jsonl', 'x.jsonl')
    """
    magic = _GLOB_MAGIC.search(input_path)
    if magic is None:
        return os.path.basename(path)
    root = os.path.dirname(input_path[: magic.start()])
    return os.path.relpath(path, root or os.curdir).replace(os.sep, "/")
