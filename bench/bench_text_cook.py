"""Text cook throughput per core vs the bare HF fast tokenizer's ``encode_batch`` on the same text.

Baseline: the demo tokenizer's backend ``encode_batch`` over each conversation rendered with the
chat template (``apply_chat_template(tokenize=False)``), single-threaded.
cook: the full per-record path on the same records, in one process: read JSONL, cook, tokenize
with targets, fit, pack (best_fit_decreasing, seq_len 4096) and write shards.
Both are CPU seconds of one process (= per core), median of 3, same run, same machine.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from bench.common import DEMO_TOKENIZER, WORK, median_cpu, median_wall, single_threaded_tokenizers, text_corpus

COMMAND = "make bench  # or: .venv/bin/python -m bench.run_all bench_text_cook"


def _bare(texts: list[str]) -> tuple[float, int]:
    from transformers import AutoTokenizer

    backend = AutoTokenizer.from_pretrained(str(DEMO_TOKENIZER)).backend_tokenizer
    seconds, encodings = median_cpu(lambda: backend.encode_batch(texts, add_special_tokens=False))
    return seconds, sum(len(e.ids) for e in encodings)


def _cook_path(config, corpus: str) -> tuple[float, int]:
    from cook.packing.packer import pack_window
    from cook.runner.units import Unit
    from cook.runner.worker import CookWorker
    from cook.writer.shards import write_shard

    worker = CookWorker(config)
    out = WORK / "text_cook_shards"

    def once() -> int:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        result, samples = worker.cook_samples(Unit(0, corpus, "jsonl"))
        packs = pack_window(samples, config.packing, worker.tokenizer.pad_id)
        size = config.output.shard_size
        for i in range(0, len(packs), size):
            write_shard(str(out), i // size, i, packs[i : i + size])
        return result.tokens

    return median_cpu(once)


def run() -> str:
    single_threaded_tokenizers()
    from transformers import AutoTokenizer

    from cook.config import load_config
    from cook.runner.local import LocalExecutor
    from cook.runner.pipeline import run_pipeline

    corpus = str(text_corpus(40))
    hf = AutoTokenizer.from_pretrained(str(DEMO_TOKENIZER))
    rows = [json.loads(line) for line in Path(corpus).read_text().splitlines()]
    texts = [hf.apply_chat_template(r["messages"], tokenize=False) for r in rows]
    bare_s, bare_tokens = _bare(texts)
    overrides = [f"input.path={corpus}", f"output.dir={WORK / 'text_cook_run'}", "output.shard_size=256"]
    config = load_config("pipelines/demo.yaml", overrides)
    cook_s, cook_tokens = _cook_path(config, corpus)
    started = time.process_time()
    wall_s, summary = median_wall(lambda: run_pipeline(config, LocalExecutor, overwrite=True, progress=False), 1)
    run_cpu_s = time.process_time() - started
    bare_rate, cook_rate = bare_tokens / bare_s, cook_tokens / cook_s
    full_rate = summary.counts["tokens"] / run_cpu_s
    return f"""## Text cook throughput per core (issue 2)

`{COMMAND}`

{len(rows):,} conversations ({bare_tokens:,} tokens as rendered by the chat template), the demo
tokenizer, one process, `TOKENIZERS_PARALLELISM=false`; CPU seconds, median of 3. cook's path
includes reading, cooking, tokenizing with targets, packing (BFD, seq_len 4096) and writing shards.
Target: cook >= 75% of the bare tokenizer.

| path | tokens | CPU s | tokens/s per core | vs bare |
| --- | ---: | ---: | ---: | ---: |
| bare `encode_batch` (baseline) | {bare_tokens:,} | {bare_s:.2f} | {bare_rate:,.0f} | 1.00 |
| cook read+cook+tokenize+pack+write | {cook_tokens:,} | {cook_s:.2f} | {cook_rate:,.0f} | **{cook_rate / bare_rate:.2f}** |
| `cook run` whole job in-process (1 run, incl. startup + Energon index) | {summary.counts["tokens"]:,} | {run_cpu_s:.2f} | {full_rate:,.0f} | {full_rate / bare_rate:.2f} |

The whole-job row adds the fixed costs a run pays once (importing transformers/torch, loading the
tokenizer, closing Energon's index, the manifest); they amortize on real inputs.
Machine: {os.cpu_count()} cores; wall time of the whole job {wall_s:.1f} s.
"""
