"""A few SFT steps on a cooked dataset, reader to optimizer, and one JSON line of figures on stdout.

    python -m cook.train.gpu_check DATASET_DIR [--steps 5] [--micro-batches 2] [--batch-size 2]

Made for a lent GPU: on CUDA it runs the step in bf16 autocast, where attention takes torch's flash
``varlen_attn`` over the packed ``cu_seqlens`` (checked first against the per-sequence SDPA reference
on a real batch: ``varlen_max_abs_diff``); batches are copied with pinned memory and pixels
normalized on the device. On a machine without CUDA it prints one line and exits 0, unless
``--device cpu`` asks for the CPU path (float32, or ``--bf16`` autocast).

**Frames decoded on the GPU** (issue 30): the first ``--frame-batches`` batches are read twice, with
``decode="cpu"`` (Pillow in the loader) and ``decode="cuda"`` (nvJPEG in ``to_device``), and their
patches compared on the device: ``frames`` gives the JPEG frames and patches compared, the largest and
the mean absolute difference and the share of values that differ. Beyond ``JPEG_DECODE_TOLERANCE`` the
check prints its line and exits 1. A dataset without JPEG frames reports ``"jpeg_frames": 0``, the CPU
path ``"frames": null``. ``--decode cuda`` also trains from the ``decode="cuda"`` loader.

The figures: device, tokens/s and median step time (after ``--warmup`` steps; step time covers
forward, backward and the optimizer, not the loader), the last LM loss, the aux loss as weighted by
both scalings (``supervised`` = the fix, ``legacy`` = Megatron's) and their ratio (``Σ P_mb / G``
when the micro-batch aux losses are equal), the total effective aux weights, G and the tokens of the
last step, the attention path (``varlen`` or ``sdpa``) and its difference to the reference.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from megatron.energon import WorkerConfig

from cook import format as fmt
from cook.manifest import load_manifest
from cook.reader import PackedBatch, make_loader, to_device
from cook.reader.loader import DECODES
from cook.train.attention import PackedAttention, sequence_attention, uses_varlen
from cook.train.config import AUX_LOSS_SCALINGS, ModelConfig, TrainConfig
from cook.train.model import MoEDecoder
from cook.train.step import StepResult, sft_step


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m cook.train.gpu_check", description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path, help="a cooked dataset directory")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--micro-batches", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=2, help="packs per micro-batch")
    parser.add_argument("--workers", type=int, default=None, help="loader processes (default: 2 on CUDA, 0 on CPU)")
    parser.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--scaling", choices=AUX_LOSS_SCALINGS, default="supervised")
    parser.add_argument("--bf16", action="store_true", help="autocast to bfloat16 on CPU too (always on CUDA)")
    parser.add_argument(
        "--decode", choices=DECODES, default="cpu", help="where the training loader decodes JPEG frames"
    )
    parser.add_argument("--frame-batches", type=int, default=8, help="batches compared, decode cpu against cuda")
    return parser.parse_args(argv)


# nvJPEG against Pillow's libjpeg-turbo (islow IDCT) on cook's q95 4:4:4 frames: the IDCTs round differently.
# Measured on an H200 (docs/DESIGN.md, "Frames decoded on the GPU"); a decode beyond this fails the check.
JPEG_DECODE_TOLERANCE = {"max_abs": 4, "mean_abs": 0.1}


@torch.no_grad()
def frames_check(dataset: Path, device: torch.device, batches: int) -> dict[str, object]:
    """The first ``batches`` batches' patches, ``decode="cuda"`` against ``decode="cpu"``, on ``device``."""
    config = WorkerConfig(rank=0, world_size=1, num_workers=0)
    loaders = [make_loader(dataset, batch_size=1, worker_config=config, repeat=False, decode=d) for d in DECODES]
    frames = patches = largest = total = differing = 0
    for host, deferred in itertools.islice(zip(*loaders, strict=False), batches):
        frames += 0 if deferred.jpeg_frames is None else len(deferred.jpeg_frames)
        expected, got = to_device(host, device).pixel_patches, to_device(deferred, device).pixel_patches
        if expected is None or got is None:
            continue
        delta = (got.to(torch.int16) - expected.to(torch.int16)).abs()
        patches += int(delta.shape[0])
        largest = max(largest, int(delta.max()))
        total += int(delta.sum())
        differing += int(torch.count_nonzero(delta))
    values = max(patches * fmt.PATCH_VALUES, 1)
    return {
        "jpeg_frames": frames,
        "patches": patches,
        "max_abs": largest,
        "mean_abs": round(total / values, 4),
        "share_differing": round(differing / values, 4),
    }


def within_tolerance(frames: dict[str, object]) -> bool:
    return all(float(frames[k]) <= limit for k, limit in JPEG_DECODE_TOLERANCE.items())  # type: ignore[arg-type]


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _model_config(dataset: Path, hidden: int, layers: int) -> ModelConfig:
    manifest = load_manifest(str(dataset))
    return ModelConfig(
        vocab_size=manifest.tokenizer.vocab_size,
        hidden_size=hidden,
        num_layers=layers,
        num_heads=max(hidden // 64, 1),
        ffn_hidden_size=2 * hidden,
        max_positions=manifest.seq_len,
    )


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


@torch.no_grad()
def attention_check(model: MoEDecoder, batch: PackedBatch, bf16: bool) -> tuple[str, float]:
    """(attention path, max |path - per-sequence SDPA|) for layer 0's attention on ``batch``."""
    attention = model.layers[0].attention
    assert isinstance(attention, PackedAttention)
    x = model.embed_tokens(batch.input_ids[0]) + model.embed_positions(batch.position_ids[0])
    with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=bf16):
        fast = attention(x, batch.cu_seqlens_padded, batch.max_seqlen)
        tokens, hidden = x.shape
        q, k, v = attention.qkv(x).view(tokens, 3, attention.num_heads, hidden // attention.num_heads).unbind(1)
        path = "varlen" if uses_varlen(q) else "sdpa"
        reference = attention.out(sequence_attention(q, k, v, batch.cu_seqlens_padded).reshape(tokens, hidden))
    return path, float((fast.float() - reference.float()).abs().max())


def _figures(device: torch.device, times: list[float], tokens: list[int], last: StepResult) -> dict[str, object]:
    return {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "steps": len(times),
        "tokens_per_s": round(sum(tokens) / sum(times), 1),
        "step_time_s": round(statistics.median(times), 4),
        "loss": round(last.lm_loss, 5),
        "aux_loss_supervised": last.aux_loss_supervised,
        "aux_loss_legacy": last.aux_loss_legacy,
        "aux_legacy_over_supervised": _ratio(last.aux_loss_legacy, last.aux_loss_supervised),
        "global_target_tokens": last.global_target_tokens,
        "tokens": last.tokens,
        "routed_tokens": list(last.routed_tokens),
        "grad_norm": last.grad_norm,
        "aux_weight_supervised": last.aux_weight_supervised,
        "aux_weight_legacy": last.aux_weight_legacy,
    }


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.device is None and not torch.cuda.is_available():
        print("gpu_check: no CUDA device on this machine; nothing to check (--device cpu runs the CPU path)")
        return 0
    device = torch.device(args.device or "cuda")
    bf16 = args.bf16 or device.type == "cuda"
    workers = args.workers if args.workers is not None else (2 if device.type == "cuda" else 0)
    torch.manual_seed(0)
    model = MoEDecoder(_model_config(args.dataset, args.hidden, args.layers)).to(device)
    config = TrainConfig(moe_aux_loss_scaling=args.scaling)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    frames = frames_check(args.dataset, device, args.frame_batches) if device.type == "cuda" else None
    loader = make_loader(
        args.dataset,
        batch_size=args.batch_size,
        worker_config=WorkerConfig(rank=0, world_size=1, num_workers=workers),
        decode=args.decode,
    )
    batches = iter(loader)
    attention_path, attention_diff = attention_check(model, to_device(next(batches), device), bf16)
    times: list[float] = []
    tokens: list[int] = []
    for step in range(args.warmup + args.steps):
        micro_batches = [to_device(next(batches), device) for _ in range(args.micro_batches)]
        _synchronize(device)
        start = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            result = sft_step(model, optimizer, micro_batches, config)
        _synchronize(device)
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
            tokens.append(result.tokens)
    figures = {**_figures(device, times, tokens, result), "bf16": bf16, "attention": attention_path}
    figures |= {"varlen_max_abs_diff": attention_diff, "decode": args.decode, "frames": frames}
    print(json.dumps(figures), flush=True)
    return 0 if frames is None or within_tolerance(frames) else 1


if __name__ == "__main__":
    sys.exit(main())
