"""``energon prepare`` for tests: Energon's own index pass over finished shards (the reference that
cook's in-run index is compared with, and the re-index after a test edits a shard in place)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path


def energon_prepare(root: Path | str, shard_names: list[str]) -> None:
    from megatron.energon.flavors.webdataset.base_webdataset import BaseWebdatasetFactory

    with contextlib.redirect_stdout(sys.stderr):  # Energon reports progress on stdout
        BaseWebdatasetFactory.prepare_dataset(
            Path(root), list(shard_names), split_parts_ratio=[("train", 1.0)], shuffle_seed=None, workers=1
        )
