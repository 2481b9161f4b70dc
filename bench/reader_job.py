"""One loader run in its own process, for bench_reader (CPU is counted over the process tree).

    python -m bench.reader_job MODE DATA --packs N [--workers W] [--batch-size B] [--pipeline YAML]
        [--no-watchdog] [--time-stages] [--decode cpu|cuda] [--device DEV]

MODE: ``reader`` (cook.reader over cooked shards), ``online`` (bench.online_loader over the raw
WebDataset; ``--pipeline`` gives the cook settings), ``crude`` (bare Energon over the cooked shards).
Reads batches until at least N packs, then prints one JSON line: packs, tokens (real, padding
excluded; 0 for crude), wall and process-tree CPU seconds of the read loop (workers start inside it),
and the wall seconds of the whole process. ``--no-watchdog`` turns off Energon's loader watchdog (a
thread woken twice per batch) in either loader; ``--time-stages`` (reader, workers 0) also reports the
thread CPU seconds spent inside ``decode_pack`` and ``collate_packs``. ``--decode`` (reader): where
JPEG frames are decoded (``make_loader(decode=...)``); ``--device``: every batch also goes through
``cook.reader.to_device`` (CUDA synchronized at the end of the loop), as a trainer's would.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from typing import Any

STARTED = time.perf_counter()


def _loader(
    mode: str,
    data: str,
    workers: int,
    batch_size: int,
    pipeline: str | None,
    watchdog: bool = True,
    decode: str = "cpu",
):  # type: ignore[no-untyped-def]
    from megatron.energon import WorkerConfig, get_savable_loader, get_train_dataset

    config = WorkerConfig(rank=0, world_size=1, num_workers=workers)
    options = {} if watchdog else {"watchdog_timeout_seconds": None}
    if mode == "reader":
        from cook.reader import make_loader

        return make_loader(data, batch_size=batch_size, worker_config=config, decode=decode, **options)
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
    return get_savable_loader(dataset, **options)


STAGE_NS = {"decode": 0, "collate": 0}


def _time_stages() -> None:
    """Wrap the reader's two functions (as ``cook.reader.loader`` calls them) with thread-CPU clocks."""
    import cook.reader.loader as loader

    def timed(name: str, fn: Any) -> Any:
        def wrapper(arg: Any) -> Any:
            started = time.thread_time_ns()
            try:
                return fn(arg)
            finally:
                STAGE_NS[name] += time.thread_time_ns() - started

        return wrapper

    loader.decode_pack = timed("decode", loader.decode_pack)  # type: ignore[assignment]
    loader.collate_packs = timed("collate", loader.collate_packs)  # type: ignore[assignment]


def _tree_cpu(process: Any) -> float:
    """user+sys seconds of ``process`` and its live descendants (the loader workers)."""
    total = 0.0
    for proc in [process, *process.children(recursive=True)]:
        try:
            times = proc.cpu_times()
        except Exception:  # a worker that exited between listing and reading (psutil.NoSuchProcess)
            continue
        total += times.user + times.system
    return total


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["reader", "online", "crude"])
    parser.add_argument("data")
    parser.add_argument("--packs", type=int, required=True)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--pipeline")
    parser.add_argument("--no-watchdog", action="store_true")
    parser.add_argument("--time-stages", action="store_true")
    parser.add_argument("--decode", default="cpu")
    parser.add_argument("--device")
    args = parser.parse_args(argv)
    if args.time_stages:
        assert args.mode == "reader" and args.workers == 0, "--time-stages times the main process only"
        _time_stages()
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    import torch

    torch.set_num_threads(1)
    loader = _loader(
        args.mode, args.data, args.workers, args.batch_size, args.pipeline, not args.no_watchdog, args.decode
    )
    import psutil

    from cook.reader import to_device

    me = psutil.Process()
    packs = tokens = 0
    loop_started, cpu_started = time.perf_counter(), _tree_cpu(me)
    batches = iter(loader)
    while packs < args.packs:
        batch = next(batches)
        packs += len(batch.__key__)
        if args.mode != "crude":
            tokens += int(batch.cu_seqlens[-1])
        if args.device:
            to_device(batch, args.device)
    if args.device and args.device.startswith("cuda"):
        torch.cuda.synchronize()
    loop_s, tree_cpu_s = time.perf_counter() - loop_started, _tree_cpu(me) - cpu_started  # workers still alive
    del batches, loader
    gc.collect()  # loader workers stop (and are waited for) before the process exits
    result = {"packs": packs, "tokens": tokens, "loop_s": loop_s, "tree_cpu_s": tree_cpu_s}
    result |= {f"{name}_s": ns / 1e9 for name, ns in STAGE_NS.items()} if args.time_stages else {}
    print(json.dumps({**result, "wall_s": time.perf_counter() - STARTED}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
