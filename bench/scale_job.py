"""One cook job for bench_scale, run in its own process so its memory is its own.

    python -m bench.scale_job CORPUS OUT WORKERS UNIT_BYTES   -> one JSON line on stdout

WORKERS=0 cooks in-process; otherwise a local Ray with WORKERS actors, warmed up (tokenizer loaded)
before the clock starts, and transformers already imported in the driver, so the figure is the
steady-state rate and not the start-up (paid once per job, reported apart: ``imports_s``,
``ray_s``). Energon (with torch) is imported inside the clock by whichever process publishes
``.nv-meta/`` at the end: this one in-process, an actor with Ray. After the clock, Energon's import is
timed (``energon_import_s``: cold where an actor published, ~0 in-process), then ``energon prepare`` over
the finished shards (``prepare_s``, import excluded), the index pass cook no longer needs, beside cook's
own in-run index work (``index_s``, its import included).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any


def _time_methods(cls: Any, names: tuple[str, ...]) -> list[float]:
    """Wrap ``cls``'s (a class's or a module's) callables ``names`` to add their wall seconds to the
    returned one-item list."""
    total = [0.0]
    for name in names:
        method = getattr(cls, name)

        def timed(*args: Any, _method: Any = method, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return _method(*args, **kwargs)
            finally:
                total[0] += time.perf_counter() - start

        setattr(cls, name, timed)
    return total


def energon_prepare(root: str, shard_names: list[str]) -> None:
    """What ``energon prepare`` does: index the finished shards by reading every tar header."""
    import contextlib

    from megatron.energon.flavors.webdataset.base_webdataset import BaseWebdatasetFactory

    with contextlib.redirect_stdout(sys.stderr):
        BaseWebdatasetFactory.prepare_dataset(
            root, shard_names, split_parts_ratio=[("train", 1.0)], shuffle_seed=None, workers=4
        )


def main(corpus: str, out: str, workers: int, unit_bytes: int) -> None:
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    from cook.config import load_config
    from cook.runner import worker
    from cook.runner.local import LocalExecutor
    from cook.runner.pipeline import run_pipeline

    overrides = [
        f"input.path={corpus}",
        f"output.dir={out}",
        f"input.unit_bytes={unit_bytes}",
        "packing.buffer_size=2000",
        "output.shard_size=64",
        "ray.cpus_per_actor=1",
    ]
    config = load_config("pipelines/demo.yaml", overrides)
    imports_start = time.perf_counter()
    from cook.tokenize import ChatTokenizer

    # the driver's one-time imports, outside the clock. Not Energon's: the driver no longer needs it,
    # and the worker that publishes `.nv-meta/` imports it (with torch) inside the clock, in this
    # process in-process and in an actor with Ray, so both runs pay it alike
    ChatTokenizer(config.tokenizer.path)
    ray_start = time.perf_counter()
    index_clock = _time_methods(worker, ("publish_index",))  # in this process only: workers == 0
    if workers == 0:
        executor = LocalExecutor(config)
    else:
        import ray

        from cook.runner.ray_executor import RayExecutor

        executor = RayExecutor(config, None, workers)
        ray.get([a.__ray_ready__.remote() for a in executor.actors])
    startup = {"imports_s": ray_start - imports_start, "ray_s": time.perf_counter() - ray_start}
    close, executor.close = executor.close, lambda: None  # Ray's shutdown is start-up's twin: not timed
    start, cpu_start = time.perf_counter(), time.process_time()
    summary = run_pipeline(config, lambda _config: executor, overwrite=True, progress=False)
    seconds = time.perf_counter() - start
    driver_cpu_s = time.process_time() - cpu_start
    close()
    import_start = time.perf_counter()  # cold with Ray (an actor published); in-process publish_index paid it
    from megatron.energon.flavors.webdataset.base_webdataset import BaseWebdatasetFactory  # noqa: F401

    prepare_start = time.perf_counter()
    shards = sorted(n for n in os.listdir(out) if n.endswith(".tar"))
    energon_prepare(out, shards)
    prepare_s = time.perf_counter() - prepare_start
    result = {
        "workers": workers,
        "seconds": seconds,
        "records": summary.counts["records_in"],
        "tokens": summary.counts["tokens"],
        "index_s": index_clock[0],
        "prepare_s": prepare_s,
        "energon_import_s": prepare_start - import_start,
        **startup,
        "driver_max_rss_mb": _hwm_mb(),  # bench_scale replaces it with its sampled peak
        "driver_cpu_s": driver_cpu_s,
    }
    print(json.dumps(result), flush=True)


def _hwm_mb() -> float:
    """``VmHWM``: this process image's own peak (``ru_maxrss`` starts from the forking parent's)."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
