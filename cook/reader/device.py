"""``PackedBatch`` on the host -> the same batch on the device, pixels normalized there.

    to_device(PackedBatch [CPU], device) -> PackedBatch [device] with pixel_values filled

Pixel patches cross the bus as **uint8** (4x fewer bytes than float32) and the CLIP mean/std math
runs on the device, after the copy. Host tensors are pinned (only when CUDA is available) and copied
with ``non_blocking=True``, so the copy overlaps with whatever the device is still doing.
"""

from __future__ import annotations

import dataclasses

import torch

from cook import format as fmt
from cook.reader.batch import PackedBatch


def normalize_patches(patches: torch.Tensor) -> torch.Tensor:
    """uint8 ``[P, 768]`` -> float32 ``[P, 3, 16, 16]``: ``(x / 255 - CLIP_MEAN[c]) / CLIP_STD[c]``.

    Runs on ``patches.device``. Each stored patch is ``C x 16 x 16`` (channel-major), so
    ``.flatten(1)`` of the result gives ``[P, 768]`` in the stored value order.

    >>> normalize_patches(torch.full((1, 768), 255, dtype=torch.uint8))[0, :, 0, 0]  # doctest: +ELLIPSIS
    tensor([1.9303, 2.0749, 2.1459])
    """
    shape = (1, fmt.CHANNELS, 1, 1)
    mean = torch.tensor(fmt.CLIP_MEAN, dtype=torch.float32, device=patches.device).view(shape)
    std = torch.tensor(fmt.CLIP_STD, dtype=torch.float32, device=patches.device).view(shape)
    pixels = patches.view(-1, fmt.CHANNELS, fmt.PATCH_SIZE, fmt.PATCH_SIZE).float().div_(255.0)
    return pixels.sub_(mean).div_(std)


def _move(tensor: torch.Tensor, device: torch.device, pin: bool) -> torch.Tensor:
    if pin and tensor.device.type == "cpu" and not tensor.is_pinned():
        tensor = tensor.pin_memory()
    return tensor.to(device, non_blocking=True)


def to_device(batch: PackedBatch, device: torch.device | str) -> PackedBatch:
    """Copy every tensor of ``batch`` to ``device`` (pinned, non-blocking), then normalize pixels there."""
    device = torch.device(device)
    pin = device.type == "cuda" and torch.cuda.is_available()
    moved: dict[str, torch.Tensor | None] = {
        field.name: _move(value, device, pin)
        for field in dataclasses.fields(batch)
        if isinstance(value := getattr(batch, field.name), torch.Tensor)
    }
    patches = moved.get("pixel_patches")
    moved["pixel_values"] = None if patches is None else normalize_patches(patches)
    return dataclasses.replace(batch, **moved)
