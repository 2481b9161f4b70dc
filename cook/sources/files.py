"""Input path or glob -> sorted list of input files, and the format of each."""

from __future__ import annotations

import glob
import os

from cook.errors import ConfigError

SUFFIX_FORMATS = {".jsonl": "jsonl", ".json": "jsonl", ".parquet": "parquet", ".tar": "wds"}


def detect_format(path: str, configured: str) -> str:
    """``configured`` unless it is ``auto``; then by suffix (``.jsonl``/``.parquet``/``.tar``)."""
    if configured != "auto":
        return configured
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in SUFFIX_FORMATS:
        raise ConfigError(
            f"input.path: cannot tell the format of {path!r} from its suffix; set input.format "
            f"to one of jsonl, parquet, wds"
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
