"""cook.reader: the training side's view of a cooked dataset (SPEC §10).

    make_loader(DIR, batch_size=..., worker_config=...) -> SavableDataLoader of PackedBatch
    to_device(PackedBatch, "cuda") -> PackedBatch on the device, pixels CLIP-normalized there
    make_loader(..., expect=Expectation(...)) refuses a dataset whose data contract differs
    packs_per_epoch(DIR, rank, world_size) -> packs one data-parallel rank reads per epoch

Modules: pack.py (crude sample -> PackedSample), batch.py (PackedSamples -> one THD PackedBatch:
labels, label-aligned loss mask, position ids, PackedSeqParams), device.py (pinned, non-blocking
copies; on-device normalization), loader.py (Energon task encoder + cooker, make_loader), contract.py
(the data contract of every dataset behind a path), epoch.py (packs and steps per epoch), tp.py
(tensor-parallel broadcast of a batch).
Imports only cook.format and cook.contract (L0) from cook, plus torch, numpy, megatron.energon and megatron.core.
"""

from cook.contract import ContractMismatch, Expectation, MediaSettings
from cook.reader.batch import IGNORE_INDEX, PackedBatch, collate_packs
from cook.reader.contract import check_datasets, dataset_contracts
from cook.reader.device import normalize_patches, to_device
from cook.reader.epoch import packs_per_epoch, steps_per_epoch, total_packs
from cook.reader.loader import PackedTaskEncoder, cook_pack, make_loader
from cook.reader.pack import PackedSample, PackFormatError, decode_pack

__all__ = [
    "IGNORE_INDEX",
    "ContractMismatch",
    "Expectation",
    "MediaSettings",
    "PackFormatError",
    "PackedBatch",
    "PackedSample",
    "PackedTaskEncoder",
    "check_datasets",
    "collate_packs",
    "cook_pack",
    "dataset_contracts",
    "decode_pack",
    "make_loader",
    "normalize_patches",
    "packs_per_epoch",
    "steps_per_epoch",
    "to_device",
    "total_packs",
]
