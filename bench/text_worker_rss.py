"""Worker memory over a long text job, for bench_text_fast (issue 14, item 3).

    python -m bench.text_worker_rss BACKEND CACHE UNITS    BACKEND: hf | gigatoken; CACHE: reset | keep

One ``CookWorker`` cooks UNITS units of never-repeating text (every unit has its own random
vocabulary, the worst case for a pretoken cache) and prints one JSON line: the resident memory
(VmRSS, MiB) after each unit. ``keep`` disables the per-unit reset of the encoder's cache, to show
what it bounds. Samples are dropped after each unit, as the staging store would move them out.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from bench.common import DEMO_TOKENIZER, WORK

RECORDS_PER_UNIT = 2500
WORDS_PER_TURN = 150


def _rss_mib() -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def unit_file(index: int) -> Path:
    """Unit ``index``: records of random words no other unit uses (a digit-tagged alphabet per unit)."""
    path = WORK / "rss_units" / f"unit-{index:03d}.jsonl"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = random.Random(index)
    letters = "abcdefghijklmnopqrstuvwxyz"

    def words() -> str:
        return " ".join(
            "".join(rng.choice(letters) for _ in range(rng.randint(4, 10))) + str(index) for _ in range(WORDS_PER_TURN)
        )

    rows = [
        {"messages": [{"role": "user", "content": words()}, {"role": "assistant", "content": words()}]}
        for _ in range(RECORDS_PER_UNIT)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def main(backend: str, cache: str, units: int) -> None:
    from cook.config import config_from_dict
    from cook.runner.staging import MemoryStore
    from cook.runner.units import Unit
    from cook.runner.worker import CookWorker
    from cook.tokenize.tokenizer import ChatTokenizer

    if cache == "keep":
        ChatTokenizer.reset_backend_cache = lambda self: None  # type: ignore[method-assign]
    files = [unit_file(i) for i in range(units)]
    config = config_from_dict(
        {
            "input": {"path": str(files[0].parent)},
            "tokenizer": {"path": str(DEMO_TOKENIZER), "backend": backend},
            "output": {"dir": str(WORK / "rss_out")},
            "packing": {"seq_len": 8192},
        }
    )
    worker = CookWorker(config, MemoryStore())
    rss = []
    for i, path in enumerate(files):
        summary, samples = worker.cook_samples(Unit(i, str(path), "jsonl"))
        assert len(samples) == RECORDS_PER_UNIT, summary
        del samples
        rss.append(round(_rss_mib(), 1))
    print(json.dumps({"backend": worker.tokenizer.backend.name, "cache": cache, "rss_mib": rss}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
