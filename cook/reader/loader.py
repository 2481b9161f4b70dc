"""cook's Energon task encoder for schema-v1 packs, and a checkpointable loader over a cooked dataset.

    DIR (crude dataset, subflavor cook: packed_v1) -get_train_dataset(PackedTaskEncoder)->
        PackedSample per pack -batch-> PackedBatch -get_savable_loader-> SavableDataLoader

The cooker matches the subflavor ``format.SUBFLAVOR``, so a cooked dataset is read alone or blended
with others in an Energon metadataset (other datasets need their own cookers). The task encoder has
no Energon decoder (``decoder = None``): members arrive as raw bytes and ``decode_pack`` parses them
with ``allow_pickle=False`` — nothing in a cooked dataset is unpickled.

Resuming: ``loader.save_state_rank()`` after ``k`` batches and ``restore_state_rank(state)`` on a
fresh loader built with the same arguments continues at exactly the same pack, with or without
worker processes (Energon's savable loader; every function here is ``@stateless``).

Errors: a malformed pack raises ``PackFormatError``. What happens next is Energon's policy, set on the
``WorkerConfig``: its default ``global_error_handler`` logs and skips the sample (up to a tolerance);
pass ``global_error_handler=megatron.energon.reraise_exception`` to stop at the first bad pack.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from megatron.energon import (
    Cooker,
    DefaultTaskEncoder,
    SavableDataLoader,
    WorkerConfig,
    get_savable_loader,
    get_train_dataset,
    stateless,
)

from cook import format as fmt
from cook.contract import Expectation
from cook.errors import ConfigError
from cook.reader.batch import PackedBatch, collate_packs
from cook.reader.contract import check_datasets
from cook.reader.pack import PackedSample, decode_pack

DECODES = ("cpu", "cuda")  # make_loader(decode=...): where stored JPEG frames are decoded


@stateless
def cook_pack(crude: dict[str, Any]) -> PackedSample:
    """Energon cooker: one crude sample of a cooked dataset -> ``PackedSample``."""
    return decode_pack(crude)


@stateless
def cook_pack_deferred(crude: dict[str, Any]) -> PackedSample:
    """``cook_pack`` for ``decode="cuda"``: JPEG frames checked from their headers, left to the device."""
    return decode_pack(crude, defer_jpeg=True)


class PackedTaskEncoder(DefaultTaskEncoder[PackedSample, PackedSample, PackedBatch, PackedBatch]):
    """Task encoder for schema-v1 packs: cook (decode) each pack, concatenate a micro-batch into one
    THD stream (``collate_packs``). Nothing is left to do per batch on the host (``encode_batch`` is
    Energon's identity): pixel normalization (and, ``decode="cuda"``, JPEG frame decoding) happens on
    the device (``to_device``)."""

    decoder = None

    def __init__(self, decode: str = "cpu") -> None:
        super().__init__()
        cooker = cook_pack_deferred if decode == "cuda" else cook_pack
        self.cookers = (Cooker(cooker, has_subflavors=fmt.SUBFLAVOR),)

    @stateless
    def batch(self, samples: list[PackedSample]) -> PackedBatch:
        return collate_packs(samples)


def make_loader(
    path: str | Path,
    *,
    batch_size: int,
    worker_config: WorkerConfig,
    shuffle_buffer_size: int | None = None,
    max_samples_per_sequence: int | None = None,
    repeat: bool = True,
    expect: Expectation | None = None,
    decode: str = "cpu",
    **loader_kwargs: Any,
) -> SavableDataLoader[PackedBatch]:
    """A checkpointable loader of ``PackedBatch``es (``batch_size`` packs each) over a cooked dataset.

    ``worker_config`` is Energon's (rank, world size, worker processes, error handler);
    ``loader_kwargs`` go to ``megatron.energon.get_savable_loader``. ``path`` is a cooked dataset or an
    Energon metadataset blending several (``cook blend`` writes one; Energon draws each pack from a
    part with probability weight / sum of weights, every part repeated, so a weighted blend needs
    ``repeat=True``): cooked datasets with different contracts are refused
    (``cook.contract.ContractMismatch``), and given ``expect`` (the trainer's tokenizer directory, media
    settings, ``seq_len``, context-parallel size) so is any dataset that differs from it, in one error
    naming every field, before anything is read, as is a dataset whose stored frames this reader cannot
    decode as its contract declares. ``decode``: where stored JPEG frames are decoded: ``"cpu"`` (the
    default: Pillow, in the loader's workers) or ``"cuda"`` (the workers check each frame's header and
    pass its bytes on; ``to_device`` decodes a batch's frames on the GPU with nvJPEG, through
    torchvision: ``pip install 'cook[gpu]'``). PNG frames are decoded in the workers either way.

    >>> loader = make_loader("out/demo", batch_size=2,
    ...                      worker_config=WorkerConfig(rank=0, world_size=1, num_workers=2))  # doctest: +SKIP
    >>> batch = to_device(next(iter(loader)), "cuda")  # doctest: +SKIP
    """
    check_decode(decode)
    check_datasets(path, expect)
    dataset = get_train_dataset(
        str(path),
        batch_size=batch_size,
        shuffle_buffer_size=shuffle_buffer_size,
        max_samples_per_sequence=max_samples_per_sequence,
        worker_config=worker_config,
        task_encoder=PackedTaskEncoder(decode),
        repeat=repeat,
    )
    return get_savable_loader(dataset, **loader_kwargs)


def check_decode(decode: str) -> None:
    """Raise ``ConfigError`` (one line) unless frames can be decoded where ``decode`` says."""
    if decode not in DECODES:
        raise ConfigError(f"make_loader(decode={decode!r}): valid: {', '.join(DECODES)}")
    if decode == "cpu":
        return
    import torch

    if not torch.cuda.is_available():
        raise ConfigError("make_loader(decode='cuda'): torch sees no CUDA device; use decode='cpu'")
    try:
        from torchvision.io import decode_jpeg  # noqa: F401
    except ImportError as error:
        raise ConfigError(f"make_loader(decode='cuda') needs torchvision (pip install 'cook[gpu]'): {error}") from None
