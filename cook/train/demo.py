"""``make train-demo``: cook the demo (or reuse ``out/demo`` when current), then SFT steps on CPU.

    python -m cook.train.demo [--pipeline pipelines/demo.yaml] [--out out/demo] [--steps 4] ...

Each step prints exactly one line on stdout (tests and users parse it)::

    step 3 loss 5.4321 aux 0.0123 aux weight: supervised=1.000000 legacy=7.312 tokens/s 12345

``loss`` is the LM loss (per token, or per sample with ``--loss-normalization sample``), ``aux`` the
MoE load-balancing term as trained, ``supervised`` the total effective aux weight with the fix
(``Σ scale_mb · P_mb / D``, exactly 1) and ``legacy`` the same with Megatron's scale 1 (``Σ P_mb / D``),
``tokens/s`` the tokens (padding included) of the step over its wall time, loader included.

**Current** means: ``DIR/cook_manifest.json`` exists (a finished run) and ``DIR/.train-demo.json``,
written after the cook, records the same sha256 of the pipeline file, of every input file (the
input path, recursively) and of every tokenizer file, and the same cook version, as now. Anything
else re-cooks with ``cook run PIPELINE --output DIR --overwrite --workers 0`` (in-process; the bytes
are the same as with Ray actors). The reader checks the data contract (``expect``: the pipeline's
tokenizer and ``seq_len``) before the first step.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch
import yaml
from megatron.energon import WorkerConfig

from cook import __version__
from cook import format as fmt
from cook.contract import Expectation
from cook.manifest import load_manifest
from cook.reader import make_loader, to_device
from cook.train.config import AUX_LOSS_SCALINGS, LOSS_NORMALIZATIONS, ModelConfig, TrainConfig
from cook.train.model import MoEDecoder
from cook.train.step import StepResult, sft_step

STAMP_NAME = ".train-demo.json"


def step_line(step: int, result: StepResult, tokens_per_s: float) -> str:
    """The one line per step (format fixed: see the module docstring)."""
    return (
        f"step {step} loss {result.lm_loss:.4f} aux {result.aux_loss:.4f} aux weight: "
        f"supervised={result.aux_weight_supervised:.6f} legacy={result.aux_weight_legacy:.3f} "
        f"tokens/s {tokens_per_s:.0f}"
    )


def _files(path: str) -> list[str]:
    if os.path.isdir(path):
        return sorted(str(p) for p in Path(path).rglob("*") if p.is_file())
    return sorted(p for p in glob.glob(path) if os.path.isfile(p))


def _digest(path: str) -> str:
    """sha256 over the files at ``path`` (a file, directory or glob): names relative to it, and contents."""
    hasher = hashlib.sha256()
    root = path if os.path.isdir(path) else os.path.dirname(path)
    for file in _files(path):
        with open(file, "rb") as handle:
            hasher.update(f"{os.path.relpath(file, root)}\0{hashlib.sha256(handle.read()).hexdigest()}\n".encode())
    return hasher.hexdigest()


def demo_stamp(pipeline: str) -> dict[str, str]:
    """What makes a cooked demo current: the pipeline file, its inputs, its tokenizer, the cook version."""
    with open(pipeline, encoding="utf-8") as handle:
        data: dict[str, Any] = yaml.safe_load(handle)
    return {
        "cook_version": __version__,
        "pipeline_sha256": _digest(pipeline),
        "input_sha256": _digest(str(data["input"]["path"])),
        "tokenizer_sha256": _digest(str(data["tokenizer"]["path"])),
    }


def is_current(out_dir: str, pipeline: str) -> bool:
    stamp = os.path.join(out_dir, STAMP_NAME)
    if not (os.path.isfile(os.path.join(out_dir, fmt.MANIFEST_NAME)) and os.path.isfile(stamp)):
        return False
    with open(stamp, encoding="utf-8") as handle:
        recorded: dict[str, str] = json.load(handle)
    return recorded == demo_stamp(pipeline)


def ensure_cooked(out_dir: str, pipeline: str) -> bool:
    """Cook ``pipeline`` into ``out_dir`` unless it is current there; returns True when it was reused."""
    if is_current(out_dir, pipeline):
        reason = "current: same pipeline, inputs, tokenizer, cook version"
        print(f"train-demo: reusing {out_dir} ({reason})", file=sys.stderr)
        return True
    print(f"train-demo: cooking {pipeline} into {out_dir}", file=sys.stderr)
    command = [sys.executable, "-m", "cook.cli.main", "run", pipeline, "--output", out_dir, "--overwrite"]
    subprocess.run([*command, "--workers", "0", "--quiet"], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out_dir, STAMP_NAME), "w", encoding="utf-8") as handle:
        json.dump(demo_stamp(pipeline), handle, indent=2, sort_keys=True)
    return False


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m cook.train.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--pipeline", default="pipelines/demo.yaml")
    parser.add_argument("--out", default="out/demo")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--micro-batches", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=1, help="packs per micro-batch")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--scaling", choices=AUX_LOSS_SCALINGS, default="supervised")
    parser.add_argument("--loss-normalization", choices=LOSS_NORMALIZATIONS, default="token")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    ensure_cooked(args.out, args.pipeline)
    manifest = load_manifest(args.out)
    with open(args.pipeline, encoding="utf-8") as handle:
        tokenizer_dir = str(yaml.safe_load(handle)["tokenizer"]["path"])
    expect = Expectation(tokenizer_dir=tokenizer_dir, seq_len=manifest.seq_len)
    torch.manual_seed(0)
    heads = max(args.hidden // 32, 1)
    model = MoEDecoder(
        ModelConfig(vocab_size=manifest.tokenizer.vocab_size, hidden_size=args.hidden, num_heads=heads,
                    ffn_hidden_size=2 * args.hidden, max_positions=manifest.seq_len)
    )  # fmt: skip
    config = TrainConfig(moe_aux_loss_scaling=args.scaling, loss_normalization=args.loss_normalization)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr)
    worker_config = WorkerConfig(rank=0, world_size=1, num_workers=0)
    batches = iter(make_loader(args.out, batch_size=args.batch_size, worker_config=worker_config, expect=expect))
    for step in range(1, args.steps + 1):
        start = time.perf_counter()
        micro_batches = [to_device(next(batches), "cpu") for _ in range(args.micro_batches)]
        result = sft_step(model, optimizer, micro_batches, config)
        print(step_line(step, result, result.tokens / (time.perf_counter() - start)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
