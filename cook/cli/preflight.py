"""Checks of a resolved ``PipelineConfig`` against the machine, before ``cook run`` does any work.

    preflight(config) -> None    or ConfigError (exit 2): one line, every problem found, each naming its key

SPEC §2: bad config is exit 2 with a one-line reason *before any work*; so these run before the
input is planned, Ray is started or the output directory is touched. Without them a bad media
path surfaced only at the first media record (as a worker traceback, and never in a text-only run),
a directory that is not a tokenizer got AutoTokenizer's sentencepiece hint after the output
directory was created, and an unwritable output ended in a traceback.

- ``input.media_root`` must be a directory; each ``input.media_stores`` entry a directory or an
  uncompressed tar (its first header is read here; the media store indexes the rest).
- ``tokenizer.path`` must be a directory holding ``tokenizer.json`` or ``tokenizer_config.json``, and
  then load (``ChatTokenizer``: AutoTokenizer, a fast backend, the chat tokens, a pad token).
- ``output.dir`` must be creatable and writable: a temporary directory is made and removed in it, or
  in its nearest existing parent when it does not exist yet (nothing else is created).
- ``packing.seq_len`` is bounded by the schema (``cook.config.MAX_SEQ_LEN``).
"""

from __future__ import annotations

import os
import tarfile
import tempfile

from cook.config import PipelineConfig
from cook.errors import ConfigError

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def preflight(config: PipelineConfig) -> None:
    """Raise one ConfigError naming every problem found; then load the tokenizer once (it raises its own)."""
    problems = [
        *media_problems(config),
        *tokenizer_problems(config.tokenizer.path),
        *output_problems(config.output.dir),
    ]
    if problems:
        raise ConfigError("; ".join(problems))
    from cook.tokenize.tokenizer import ChatTokenizer

    # a bad one raises ConfigError naming tokenizer.path; an explicit fast backend is self-checked here
    backend = "hf" if config.tokenizer.backend == "auto" else config.tokenizer.backend
    ChatTokenizer(config.tokenizer.path, backend, chat_format=config.tokenizer.chat_format)


def media_problems(config: PipelineConfig) -> list[str]:
    problems = []
    root = config.input.media_root
    if root is not None and not os.path.isdir(root):
        why = "is not a directory" if os.path.exists(root) else "does not exist"
        problems.append(f"input.media_root: {root!r} {why}")
    for i, store in enumerate(config.input.media_stores):
        if not os.path.exists(store):
            problems.append(f"input.media_stores[{i}]: {store!r} does not exist")
        elif not os.path.isdir(store):
            tar_problem = _tar_problem(store)
            if tar_problem:
                problems.append(
                    f"input.media_stores[{i}]: {store!r} is neither a directory nor an uncompressed tar ({tar_problem})"
                )
    return problems


def _tar_problem(path: str) -> str | None:
    try:
        with tarfile.open(path, mode="r:") as tar:
            tar.next()
    except (tarfile.TarError, OSError) as err:
        return str(err) or type(err).__name__
    return None


def tokenizer_problems(path: str) -> list[str]:
    if not os.path.isdir(path):
        why = "is not a directory" if os.path.exists(path) else "does not exist"
        return [f"tokenizer.path: {path!r} {why}"]
    if not any(os.path.isfile(os.path.join(path, name)) for name in TOKENIZER_FILES):
        return [f"tokenizer.path: {path!r} is not a tokenizer directory: no {' / '.join(TOKENIZER_FILES)}"]
    return []


def output_problems(out_dir: str) -> list[str]:
    """``output.dir`` (``--output``) can be created and written: probed with a temporary directory."""
    target = os.path.abspath(out_dir)
    if os.path.exists(target) and not os.path.isdir(target):
        return [f"output.dir (--output): {out_dir!r} exists and is not a directory"]
    existing = target
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        return [f"output.dir (--output): {out_dir!r} cannot be created: {existing!r} is not a directory"]
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".cook-probe-", dir=existing))
    except OSError as err:
        where = "is not writable" if existing == target else f"cannot be created in {existing!r}"
        return [f"output.dir (--output): {out_dir!r} {where} ({err.strerror or type(err).__name__})"]
    return []
