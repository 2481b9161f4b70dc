"""``.nv-meta/``: ``dataset.yaml`` (crude dataset, cook subflavor) plus Energon's own index.

The index (``index.sqlite``, ``.info.json``, ``split.yaml``, ``.tar.idx``) is made by
``megatron.energon``'s own preparation code, run once when all shards are written, so the result is
exactly what ``energon prepare`` would write: one ``train`` split holding every shard, in order.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator

from cook import format as fmt
from cook.writer.atomic import atomic_write


def preload() -> threading.Thread:
    """Import Energon (and torch under it) on a background thread while the run cooks, so the index
    pass at the end does not wait ~0.4 s for the import with every worker idle."""

    def load() -> None:
        import megatron.energon.flavors.webdataset.base_webdataset  # noqa: F401

    thread = threading.Thread(target=load, name="cook-preload-energon", daemon=True)
    thread.start()
    return thread


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 (and ``sys.stdout``) at stderr, for this process and its children."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def write_energon_meta(out_dir: str, shard_names: list[str]) -> None:
    from megatron.energon.flavors.webdataset.base_webdataset import BaseWebdatasetFactory

    meta = os.path.join(out_dir, fmt.NV_META_DIR)
    os.makedirs(meta, exist_ok=True)
    if shard_names:
        with _stdout_to_stderr():  # Energon reports progress on stdout; stdout is reserved for --json
            BaseWebdatasetFactory.prepare_dataset(
                out_dir,
                list(shard_names),
                split_parts_ratio=[("train", 1.0)],
                shuffle_seed=None,
                workers=max(1, min(4, len(shard_names))),
            )
    atomic_write(os.path.join(meta, fmt.DATASET_YAML), fmt.dataset_yaml())
