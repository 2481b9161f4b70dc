"""One loader run in its own process, for bench_reader (CPU is counted over the process tree).

    python -m bench.reader_job MODE DATA --packs N [--workers W] [--batch-size B] [--pipeline YAML]

MODE: ``reader`` (cook.reader over cooked shards), ``online`` (bench.online_loader over the raw
WebDataset; ``--pipeline`` gives the cook settings), ``crude`` (bare Energon over the cooked shards).
Reads batches until at least N packs, then prints one JSON line: packs, tokens (real, padding
excluded; 0 for crude), wall seconds of the read loop (workers start inside it) and of the process.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time

STARTED = time.perf_counter()


def _loader(mode: str, data: str, workers: int, batch_size: int, pipeline: str | None):  # type: ignore[no-untyped-def]
    from megatron.energon import WorkerConfig, get_savable_loader, get_train_dataset

    config = WorkerConfig(rank=0, world_size=1, num_workers=workers)
    if mode == "reader":
        from cook.reader import make_loader

        return make_loader(data, batch_size=batch_size, worker_config=config)
    from bench.online_loader import CrudeTaskEncoder, OnlineTaskEncoder

    if mode == "online":
        from cook.config import load_config

        assert pipeline is not None
        cook_config = load_config(pipeline)
        encoder = OnlineTaskEncoder(cook_config)
        buffer = cook_config.packing.buffer_size
        assert isinstance(buffer, int)
        dataset = get_train_dataset(
            data, batch_size=batch_size, packing_buffer_size=buffer, shuffle_buffer_size=None,
            max_samples_per_sequence=None, worker_config=config, task_encoder=encoder,
        )  # fmt: skip
    else:
        dataset = get_train_dataset(
            data, batch_size=batch_size, shuffle_buffer_size=None, max_samples_per_sequence=None,
            worker_config=config, task_encoder=CrudeTaskEncoder(),
        )  # fmt: skip
    return get_savable_loader(dataset)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["reader", "online", "crude"])
    parser.add_argument("data")
    parser.add_argument("--packs", type=int, required=True)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--pipeline")
    args = parser.parse_args(argv)
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    import torch

    torch.set_num_threads(1)
    loader = _loader(args.mode, args.data, args.workers, args.batch_size, args.pipeline)
    packs = tokens = 0
    loop_started = time.perf_counter()
    batches = iter(loader)
    while packs < args.packs:
        batch = next(batches)
        packs += len(batch.__key__)
        if args.mode != "crude":
            tokens += int(batch.cu_seqlens[-1])
    loop_s = time.perf_counter() - loop_started
    del batches, loader
    gc.collect()  # loader workers stop (and are waited for) before the process exits
    print(json.dumps({"packs": packs, "tokens": tokens, "loop_s": loop_s, "wall_s": time.perf_counter() - STARTED}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
