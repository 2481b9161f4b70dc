"""``PackedBatch`` on the host -> the same batch on the device, JPEG frames decoded and pixels normalized there.

    to_device(PackedBatch [CPU], device) -> PackedBatch [device] with pixel_values filled

Pixel patches cross the bus as **uint8** (4x fewer bytes than float32) and the CLIP mean/std math
runs on the device, after the copy. Host tensors are pinned (only when CUDA is available) and copied
with ``non_blocking=True``, so the copy overlaps with whatever the device is still doing.

**Frames left to the device** (``make_loader(decode="cuda")``): a batch whose ``jpeg_frames`` is set
carries those JPEG members as bytes. They are decoded here, all of the batch's in one call: on CUDA by
nvJPEG through ``torchvision.io.decode_jpeg(device=...)`` (torchvision, pinned by the ``gpu`` extra),
on the CPU by Pillow (``cook.frames.decode_frame``, what ``decode="cpu"`` does in the workers). Each
decoded frame is cut into patches on the device (``patchify``, the layout of ``cook.frames``) and put
at its rows, the other frames' patches around it, so ``pixel_patches`` is the same ``[P, 768]`` as on
the CPU path: bit for bit where both decoders agree, and within the decoders' difference otherwise
(docs/DESIGN.md gives the measured figure).
"""

from __future__ import annotations

import dataclasses

import torch

from cook import format as fmt
from cook.frames import FRAME_ERRORS, decode_frame
from cook.reader.batch import PackedBatch, item_patches
from cook.reader.pack import PackFormatError


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


def patchify(frame: torch.Tensor) -> torch.Tensor:
    """uint8 ``[3, H, W]`` (sides multiples of 16) -> uint8 ``[(H/16)(W/16), 768]`` on its device, raster
    order, each patch ``C x 16 x 16``: ``cook.frames.patchify_image``'s layout.

    >>> frame = torch.arange(3 * 16 * 32, dtype=torch.int64).view(3, 16, 32).to(torch.uint8)
    >>> patches = patchify(frame)
    >>> patches.shape, bool((patches[1].view(3, 16, 16) == frame[:, :, 16:]).all())
    (torch.Size([2, 768]), True)
    """
    p = fmt.PATCH_SIZE
    channels, height_px, width_px = frame.shape
    grid = frame.view(channels, height_px // p, p, width_px // p, p)  # [C, gh, y, gw, x]
    return grid.permute(1, 3, 0, 2, 4).reshape(-1, channels * p * p)


def decode_jpeg_frames(data: torch.Tensor, frames: torch.Tensor, device: torch.device) -> list[torch.Tensor]:
    """The frames ``frames`` (``PackedBatch.jpeg_frames`` rows) of ``data`` -> uint8 ``[p, 768]`` each, on
    ``device``: nvJPEG in one batched call on CUDA, Pillow on the CPU. Raises ``PackFormatError`` on a
    frame that does not decode to its RGB grid."""
    rows = frames.tolist()
    members = [data[offset : offset + length] for offset, length, _, _, _ in rows]
    if device.type == "cpu":
        try:
            pairs = zip(members, rows, strict=True)
            return [torch.from_numpy(decode_frame(m.numpy().tobytes(), "jpeg", h, w)) for m, (*_, h, w) in pairs]
        except FRAME_ERRORS as error:
            raise PackFormatError(f"a JPEG frame does not decode as declared ({error})") from error
    from torchvision.io import ImageReadMode, decode_jpeg

    try:
        images = decode_jpeg(members, mode=ImageReadMode.RGB, device=device)
    except RuntimeError as error:
        raise PackFormatError(f"a JPEG frame does not decode on {device} ({error})") from error
    for image, (*_, h, w) in zip(images, rows, strict=True):
        if tuple(image.shape) != (fmt.CHANNELS, h, w):
            raise PackFormatError(f"a JPEG frame decodes to {list(image.shape)}, expected [3, {h}, {w}]")
    return [patchify(image) for image in images]


def _move(tensor: torch.Tensor, device: torch.device, pin: bool) -> torch.Tensor:
    if pin and tensor.device.type == "cpu" and not tensor.is_pinned():
        tensor = tensor.pin_memory()
    return tensor.to(device, non_blocking=True)


def _patches(batch: PackedBatch, device: torch.device, pin: bool) -> torch.Tensor | None:
    """The batch's ``[P, 768]`` patches on ``device``, its deferred JPEG frames decoded there."""
    host = batch.pixel_patches
    if batch.jpeg_frames is None or batch.jpeg_data is None or batch.media_sizes is None:
        return None if host is None else _move(host, device, pin)
    total = sum(item_patches(batch.media_sizes))
    out = torch.empty((total, fmt.PATCH_VALUES), dtype=torch.uint8, device=device)
    decoded = decode_jpeg_frames(batch.jpeg_data, batch.jpeg_frames, device)
    on_host = torch.ones(total, dtype=torch.bool)
    for (_, _, row, _, _), patches in zip(batch.jpeg_frames.tolist(), decoded, strict=True):
        out[row : row + patches.shape[0]] = patches
        on_host[row : row + patches.shape[0]] = False
    if host is not None:
        out[on_host.to(device)] = _move(host, device, pin)
    return out


def to_device(batch: PackedBatch, device: torch.device | str) -> PackedBatch:
    """Copy every tensor of ``batch`` to ``device`` (pinned, non-blocking), decode the JPEG frames left to
    the device, then normalize pixels there."""
    device = torch.device(device)
    pin = device.type == "cuda" and torch.cuda.is_available()
    deferred = ("pixel_patches", "jpeg_data", "jpeg_frames")
    moved: dict[str, torch.Tensor | None] = {
        field.name: _move(value, device, pin)
        for field in dataclasses.fields(batch)
        if field.name not in deferred and isinstance(value := getattr(batch, field.name), torch.Tensor)
    }
    patches = _patches(batch, device, pin)
    moved |= {"pixel_patches": patches, "jpeg_data": None, "jpeg_frames": None}
    moved["pixel_values"] = None if patches is None else normalize_patches(patches)
    return dataclasses.replace(batch, **moved)
