"""GPU JPEG decoders against Pillow on cook's stored frames (issue 30 item 4: the decoder chosen by measurement).

    python -m bench.bench_gpu_decode [COOKED_DIR ...] [--photos 64] [--batch 64] [--repeats 5]

Made for a lent GPU (one prepared run; see bench/RESULTS.md). Frames: every ``frame.<k>.jpg`` member of
the cooked datasets given, and ``--photos`` photo-like 1280x800 frames (``bench_media.photo_jpeg``)
stored as cook stores them (``cook.frames.encode_frame``: Pillow, quality 95, 4:4:4). Decoders:

- **pillow**: Pillow on the CPU, one frame at a time (what ``decode="cpu"`` runs in each loader worker);
- **torchvision**: ``torchvision.io.decode_jpeg(frames, device="cuda")``, nvJPEG, one call per batch;
- **nvimgcodec**: nvImageCodec's ``Decoder().decode(frames)`` on the GPU, one call per batch (where
  the package imports).

For each set and decoder: wall ms and CPU ms (this process, user + sys) per frame, the median of
``--repeats`` passes after one warm-up pass, CUDA synchronized; and the decoded values against
Pillow's: the largest and the mean absolute difference, and the share of values that differ. Prints
one JSON object.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import tarfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

Decoder = Callable[[Sequence[bytes]], list[np.ndarray]]  # JPEG members -> uint8 [H, W, 3] each


def stored_frames(dataset: Path) -> list[bytes]:
    """Every ``frame.<k>.jpg`` member of the dataset's shards, in shard order."""
    frames = []
    for shard in sorted(dataset.glob("*.tar")):
        with tarfile.open(shard) as tar:
            for member in tar:
                if member.isfile() and member.name.endswith(".jpg") and ".frame." in member.name:
                    data = tar.extractfile(member)
                    assert data is not None
                    frames.append(data.read())
    return frames


def photo_frames(count: int) -> list[bytes]:
    """``count`` photo-like frames, stored as cook stores a 1280x800 image in jpeg storage."""
    from bench.bench_media import photo_jpeg
    from cook.contract import FrameStorage
    from cook.frames import encode_frame, patchify_image

    frames = []
    for seed in range(count):
        with Image.open(io.BytesIO(photo_jpeg(seed))) as image:
            patches = patchify_image(image.convert("RGB"))
        frames.append(encode_frame(patches, 800, 1280, FrameStorage("jpeg", jpeg_quality=95)))
    return frames


def pillow(frames: Sequence[bytes]) -> list[np.ndarray]:
    out = []
    for data in frames:
        with Image.open(io.BytesIO(data), formats=["JPEG"]) as image:
            out.append(np.asarray(image.convert("RGB")))
    return out


def torchvision_decoder() -> Decoder:
    from torchvision.io import ImageReadMode, decode_jpeg

    def decode(frames: Sequence[bytes]) -> list[np.ndarray]:
        tensors = [torch.frombuffer(bytearray(data), dtype=torch.uint8) for data in frames]
        images = decode_jpeg(tensors, mode=ImageReadMode.RGB, device="cuda")
        torch.cuda.synchronize()
        return images  # type: ignore[no-any-return]  # [3, H, W] CUDA tensors; compared after the timing

    return decode


def nvimgcodec_decoder() -> Decoder:
    from nvidia import nvimgcodec  # type: ignore[attr-defined]

    decoder = nvimgcodec.Decoder()

    def decode(frames: Sequence[bytes]) -> list[np.ndarray]:
        images = decoder.decode(list(frames))
        torch.cuda.synchronize()
        return images  # type: ignore[no-any-return]  # nvimgcodec.Image, [H, W, 3] on the GPU

    return decode


def _host(image: Any) -> np.ndarray:
    """A decoder's output as uint8 [H, W, 3] on the host."""
    if isinstance(image, np.ndarray):
        return image
    if isinstance(image, torch.Tensor):
        return image.permute(1, 2, 0).cpu().numpy()
    return torch.as_tensor(image, device="cuda").cpu().numpy()  # __cuda_array_interface__, HWC


def _time(decode: Decoder, frames: Sequence[bytes], batch: int, repeats: int) -> tuple[float, float, list[Any]]:
    """(wall ms, CPU ms) per frame, medians over ``repeats`` passes after a warm-up; the last pass's output."""
    decoded: list[Any] = []
    walls, cpus = [], []
    for attempt in range(repeats + 1):
        decoded = []
        wall, cpu = time.perf_counter(), time.process_time()
        for start in range(0, len(frames), batch):
            decoded += decode(frames[start : start + batch])
        if attempt:  # the first pass warms up (CUDA context, nvJPEG handles, caches)
            walls.append((time.perf_counter() - wall) / len(frames) * 1e3)
            cpus.append((time.process_time() - cpu) / len(frames) * 1e3)
    return statistics.median(walls), statistics.median(cpus), decoded


def _difference(decoded: Sequence[Any], reference: Sequence[np.ndarray]) -> dict[str, float]:
    largest, total, differing, values = 0, 0, 0, 0
    for image, expected in zip(decoded, reference, strict=True):
        got = _host(image).astype(np.int16)
        assert got.shape == expected.shape, (got.shape, expected.shape)
        delta = np.abs(got - expected)
        largest = max(largest, int(delta.max()))
        total += int(delta.sum())
        differing += int(np.count_nonzero(delta))
        values += delta.size
    return {"max_abs": largest, "mean_abs": round(total / values, 4), "share_differing": round(differing / values, 4)}


def measure(frames: Sequence[bytes], batch: int, repeats: int) -> dict[str, Any]:
    decoders: dict[str, Decoder] = {"pillow": pillow}
    for name, make in (("torchvision", torchvision_decoder), ("nvimgcodec", nvimgcodec_decoder)):
        try:
            decoders[name] = make()
        except Exception as error:  # not installed here, or no GPU backend: named in the output
            print(f"bench_gpu_decode: {name}: {type(error).__name__}: {error}", file=sys.stderr)
    result: dict[str, Any] = {"frames": len(frames), "mb": round(sum(map(len, frames)) / 2**20, 2)}
    reference: list[np.ndarray] = []
    for name, decode in decoders.items():
        try:
            wall, cpu, decoded = _time(decode, frames, batch if name != "pillow" else len(frames), repeats)
        except Exception as error:
            result[name] = {"error": f"{type(error).__name__}: {error}"}
            continue
        reference = reference or [_host(image) for image in decoded]
        result[name] = {"wall_ms": round(wall, 3), "cpu_ms": round(cpu, 3), **_difference(decoded, reference)}
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_gpu_decode", description=__doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="*", type=Path)
    parser.add_argument("--photos", type=int, default=64)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    import PIL

    sets = {str(path): stored_frames(path) for path in args.datasets}
    sets["photos"] = photo_frames(args.photos) if args.photos else []
    versions: dict[str, str] = {"torch": torch.__version__, "pillow": PIL.__version__}
    for module in ("torchvision", "nvidia.nvimgcodec"):
        try:
            versions[module] = str(__import__(module, fromlist=["__version__"]).__version__)
        except Exception as error:
            versions[module] = f"unavailable ({type(error).__name__})"
    report = {
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "versions": versions,
        "batch": args.batch,
        "repeats": args.repeats,
        "sets": {name: measure(frames, args.batch, args.repeats) for name, frames in sets.items() if frames},
    }
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
