"""Known step counts: how many packs one data-parallel rank reads per epoch (InternVL #879 users
hand-count packs to set ``max_steps``).

    packs_per_epoch(DIR, rank, world_size, num_workers) -> int

Energon splits a dataset's samples over the ``world_size * max(num_workers, 1)`` global workers with
``Sharder.split_samples_to_workers`` (the remainder spread in bit-reversed worker order); this asks
that same function, so the figure is the one the loader will produce, not a re-derivation.
"""

from __future__ import annotations

from pathlib import Path

from megatron.energon import WorkerConfig
from megatron.energon.flavors.webdataset.sharder import Sharder

from cook.reader.contract import read_manifest


def total_packs(path: str | Path) -> int:
    manifest = read_manifest(Path(path))
    if manifest is None:
        raise FileNotFoundError(f"{path}: no cook manifest (not a cooked dataset directory)")
    return manifest.counts.packs


def packs_per_epoch(path: str | Path, rank: int = 0, world_size: int = 1, num_workers: int = 0) -> int:
    """Packs data-parallel ``rank`` of ``world_size`` reads in one epoch (the ranks' counts sum to the total)."""
    config = WorkerConfig(rank=rank, world_size=world_size, num_workers=num_workers)
    offsets = Sharder.split_samples_to_workers(0, total_packs(path), config)
    return int(offsets[-1] - offsets[0])


def steps_per_epoch(packs: int, global_batch_size: int) -> int:
    """Optimizer steps of ``global_batch_size`` packs in an epoch of ``packs`` (a last partial step dropped)."""
    if global_batch_size < 1:
        raise ValueError(f"global_batch_size={global_batch_size} must be >= 1")
    return packs // global_batch_size
