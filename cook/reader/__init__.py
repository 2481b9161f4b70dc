"""cook.reader: the training side's view of a cooked dataset (SPEC §10).

    make_loader(DIR, batch_size=..., worker_config=...) -> SavableDataLoader of PackedBatch
    to_device(PackedBatch, "cuda") -> PackedBatch on the device, pixels CLIP-normalized there

Modules: pack.py (crude sample -> PackedSample), batch.py (PackedSamples -> one THD PackedBatch:
labels, label-aligned loss mask, position ids, PackedSeqParams), device.py (pinned, non-blocking
copies; on-device normalization), loader.py (Energon task encoder + cooker, make_loader).
Imports only cook.format from cook, plus torch, numpy, megatron.energon and megatron.core.
"""

from cook.reader.batch import IGNORE_INDEX, PackedBatch, collate_packs, pack_targets
from cook.reader.device import normalize_patches, to_device
from cook.reader.loader import PackedTaskEncoder, cook_pack, make_loader
from cook.reader.pack import PackedSample, PackFormatError, decode_pack

__all__ = [
    "IGNORE_INDEX",
    "PackFormatError",
    "PackedBatch",
    "PackedSample",
    "PackedTaskEncoder",
    "collate_packs",
    "cook_pack",
    "decode_pack",
    "make_loader",
    "normalize_patches",
    "pack_targets",
    "to_device",
]
