"""``make train-demo``: cook the demo (or reuse ``out/demo`` when current), then SFT steps on CPU.

    python -m cook.train.demo [--pipeline pipelines/demo.yaml] [--out out/demo] [--steps 4] ...

Each step prints exactly one line on stdout (tests and users parse it)::

    step 3 loss 5.4321 aux 0.0123 aux weight: supervised=1.000000 legacy=7.312 tokens/s 12345

``loss`` is the LM loss (per token, or per sample with ``--loss-normalization sample``), ``aux`` the
MoE load-balancing term as trained, ``supervised`` the total effective aux weight with the fix
(``Σ scale_mb · P_mb / D``, exactly 1) and ``legacy`` the same with Megatron's scale 1 (``Σ P_mb / D``),
``tokens/s`` the tokens (padding included) of the step over its wall time, loader included.

The demo is cooked by ``cook run PIPELINE --output DIR --workers 0`` (in-process; the bytes are the
same as with Ray actors), which recognises the same run finished in ``DIR`` (its ``.cook-run.json`` and
manifest: same pipeline, ray aside, inputs, tokenizer and cook version) and then changes nothing: a demo
``make cook`` just cooked is reused as it is. A different run there (``cook run`` exits 2 and says how
it differs) is replaced with ``--overwrite``. The reader checks the data contract (``expect``: the
pipeline's tokenizer and ``seq_len``) before the first step.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import warnings

import torch
import yaml
from megatron.energon import WorkerConfig

from cook.contract import Expectation
from cook.manifest import load_manifest
from cook.reader import make_loader, to_device
from cook.train.config import AUX_LOSS_SCALINGS, LOSS_NORMALIZATIONS, ModelConfig, TrainConfig
from cook.train.model import MoEDecoder
from cook.train.step import StepResult, sft_step

# Energon's loaders always ask torch's DataLoader for pinned memory, and torch warns on a machine without
# an accelerator that nothing will be pinned; the demo trains on the CPU either way.
PIN_MEMORY_WARNING = r"'pin_memory' argument is set as true but no accelerator is found"


def step_line(step: int, result: StepResult, tokens_per_s: float) -> str:
    """The one line per step (format fixed: see the module docstring)."""
    return (
        f"step {step} loss {result.lm_loss:.4f} aux {result.aux_loss:.4f} aux weight: "
        f"supervised={result.aux_weight_supervised:.6f} legacy={result.aux_weight_legacy:.3f} "
        f"tokens/s {tokens_per_s:.0f}"
    )


def ensure_cooked(out_dir: str, pipeline: str) -> bool:
    """Cook ``pipeline`` into ``out_dir`` unless the same run finished there; True when it was reused."""
    command = [sys.executable, "-m", "cook.cli.main", "run", pipeline, "--output", out_dir, "--workers", "0"]
    first = subprocess.run([*command, "--quiet", "--json"], capture_output=True, text=True)
    if first.returncode == 0 and json.loads(first.stdout)["already_finished"]:
        print(f"train-demo: reusing {out_dir} (cook run: the same run finished there)", file=sys.stderr)
        return True
    if first.returncode == 2:  # another run is there (cook run's line says how it differs), or a config error
        why = first.stderr.strip().splitlines()[-1].removeprefix("cook: error: ") if first.stderr.strip() else ""
        print(f"train-demo: cooking {pipeline} into {out_dir} with --overwrite ({why})", file=sys.stderr)
        second = subprocess.run([*command, "--quiet", "--overwrite"], stdout=subprocess.DEVNULL)
        if second.returncode:
            sys.exit(second.returncode)
    else:
        sys.stderr.write(first.stderr)
        if first.returncode:
            sys.exit(first.returncode)
    print(f"train-demo: cooked {pipeline} into {out_dir}", file=sys.stderr)
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
    loader = make_loader(args.out, batch_size=args.batch_size, worker_config=worker_config, expect=expect)
    with warnings.catch_warnings():  # the loader starts on the first next()
        warnings.filterwarnings("ignore", PIN_MEMORY_WARNING, UserWarning, r"torch\.utils\.data\.dataloader")
        batches = iter(loader)
        for step in range(1, args.steps + 1):
            start = time.perf_counter()
            micro_batches = [to_device(next(batches), "cpu") for _ in range(args.micro_batches)]
            result = sft_step(model, optimizer, micro_batches, config)
            print(step_line(step, result, result.tokens / (time.perf_counter() - start)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
