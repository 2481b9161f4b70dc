"""Output-file flags (``--plot FILE.png``, ``--html FILE``) checked before any work, as config errors; and
``show``: stdout that a closed pager does not turn into a traceback."""

from __future__ import annotations

import os
import sys

from cook.errors import ConfigError


def check_output_file(flag: str, path: str, example: str) -> None:
    """``flag path`` can be written: its directory exists and is writable, and it is not a directory."""
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ConfigError(f"{flag} {path}: is a directory; give a file name such as {example}")
    if not os.path.isdir(parent):
        raise ConfigError(f"{flag} {path}: directory {parent!r} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {path}: directory {parent!r} is not writable")


def show(text: str) -> None:
    """Print ``text`` on stdout; a pager or ``head`` that closed it ends the output quietly."""
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keeps the interpreter's final flush quiet
