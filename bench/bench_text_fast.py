"""The text job with the fast tokenizer backend vs the bare HF tokenizer (issue 14).

    .venv/bin/python -m bench.run_all bench_text_fast

- **Bare HF**: the demo tokenizer's ``tokenizers`` backend, ``encode_batch`` over the chat-template
  rendering of the conversations (as bench_text_cook), one thread.
- **Bare gigatoken**: ``gigatoken.Tokenizer`` on the same tokenizer.json, ``encode_batch_list`` of the
  same rendered texts (control markup parsed as in HF), on the calling thread.
- **cook run**: the whole in-process job (``cook run pipelines/text_sft.yaml --workers 0``, reading,
  cooking, tokenizing with targets, packing, shards, Energon index, manifest) as a fresh process,
  with ``tokenizer.backend: hf`` and with the default (``auto``). CPU = user + system of the process
  tree (``bench.job_run``).

Every rate is **marginal**: (big input) - (small input) of the same thing, so start-up (imports,
tokenizer load, the Energon index) cancels. Medians of ``REPEATS``; within a repeat the runs are
interleaved. The start-up itself is reported from the small runs and from loading the tokenizer in
a fresh interpreter. Memory: ``bench.text_worker_rss``.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import DEMO_TOKENIZER, REPO, WORK, single_threaded_tokenizers, text_corpus
from bench.job_run import run_job

COMMAND = ".venv/bin/python -m bench.run_all bench_text_fast"
PIPELINE = "pipelines/text_sft.yaml"  # the production text pipeline: seq_len 16384, 256 packs a shard
BIG, SMALL = 40, 2  # copies of the demo chats
REPEATS = 5
RSS_UNITS = 10


def _rendered(corpus: Path) -> list[str]:
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(DEMO_TOKENIZER))
    rows = [json.loads(line) for line in corpus.read_text().splitlines()]
    return [hf.apply_chat_template(r["messages"], tokenize=False) for r in rows]


def _cpu(encode: Callable[[list[str]], list], batch: list[str]) -> float:
    start = time.process_time()
    encode(batch)
    return time.process_time() - start


def _bare(texts: dict[str, list[str]]) -> dict[str, tuple[float, int]]:
    """Marginal (CPU s, tokens) of the bare libraries: big - small texts."""
    import gigatoken
    from tokenizers import Tokenizer

    path = str(DEMO_TOKENIZER / "tokenizer.json")
    hf, fast = Tokenizer.from_file(path), gigatoken.Tokenizer(path)
    encoders = {
        "hf": lambda batch: [e.ids for e in hf.encode_batch(batch, add_special_tokens=False)],
        "gigatoken": lambda batch: fast.encode_batch_list(batch, parallel=False),
    }
    out = {}
    for name, encode in encoders.items():
        tokens = {size: sum(map(len, encode(batch))) for size, batch in texts.items()}
        seconds = statistics.median(_cpu(encode, texts["big"]) - _cpu(encode, texts["small"]) for _ in range(REPEATS))
        out[name] = (seconds, tokens["big"] - tokens["small"])
    return out


def _job(corpus: Path, backend: str, out: Path) -> tuple[float, float, dict]:
    args = [
        "run",
        PIPELINE,
        "--set",
        f"input.path={corpus}",
        "--set",
        f"tokenizer.backend={backend}",
        "--output",
        str(out),
        "--overwrite",
        "--workers",
        "0",
        "--quiet",
    ]
    stats = run_job(args, REPO, dict(os.environ), WORK / "text_fast_scratch")
    assert stats.rc == 0, stats.stderr
    manifest = json.loads((out / "cook_manifest.json").read_text())
    return stats.tree_cpu_s, stats.wall_s, manifest


def _jobs(corpora: dict[str, Path]) -> dict[str, dict]:
    runs: dict[tuple[str, str], list[tuple[float, float, dict]]] = {}
    for _ in range(REPEATS):
        for backend in ("hf", "auto"):
            for size, corpus in corpora.items():
                out = WORK / f"text_fast_{backend}_{size}"
                runs.setdefault((backend, size), []).append(_job(corpus, backend, out))
    result = {}
    for backend in ("hf", "auto"):
        big, small = runs[(backend, "big")], runs[(backend, "small")]
        marginals = sorted(b[0] - s[0] for b, s in zip(big, small, strict=True))
        marginal = statistics.median(marginals)
        manifest = big[-1][2]
        tokens = manifest["counts"]["tokens"] - small[-1][2]["counts"]["tokens"]
        shards = "".join(s["sha256"] for s in manifest["shards"])
        result[backend] = {
            "cpu_s": marginal,
            "spread": (marginals[0], marginals[-1]),
            "tokens": tokens,
            "startup_cpu_s": statistics.median(s[0] for s in small),
            "startup_wall_s": statistics.median(s[1] for s in small),
            "shards_sha256": hashlib.sha256(shards.encode()).hexdigest(),
            "shards": len(manifest["shards"]),
            "backend": manifest["tokenizer_backend"],
        }
    return result


def _in_process(corpora: dict[str, Path], label: str = "text_fast", repeats: int = REPEATS) -> list[float]:
    """Marginal CPU s of the same job run in this (warm) interpreter: ``run_pipeline`` with the
    ``LocalExecutor``, so no start-up enters either run (the steadier figure on a shared machine)."""
    from cook.config import load_config
    from cook.runner.local import LocalExecutor
    from cook.runner.pipeline import run_pipeline

    def cpu(size: str) -> float:
        overrides = [f"input.path={corpora[size]}", f"output.dir={WORK / f'{label}_inproc_{size}'}"]
        config = load_config(PIPELINE, overrides)
        start = time.process_time()
        run_pipeline(config, LocalExecutor, overwrite=True, progress=False)
        return time.process_time() - start

    cpu("small")  # first-use costs (imports, byte table) outside the timing
    return sorted(cpu("big") - cpu("small") for _ in range(repeats))


LOAD_SCRIPT = """
import sys, time
t = time.process_time()
from cook.tokenize.tokenizer import ChatTokenizer
if sys.argv[2] == "autotokenizer":
    from transformers import AutoTokenizer
    AutoTokenizer.from_pretrained(sys.argv[1])
else:
    ChatTokenizer(sys.argv[1], "auto")
print(time.process_time() - t, "torch" in sys.modules)
"""


def _load(way: str) -> tuple[float, bool]:
    runs = []
    for _ in range(REPEATS):
        done = subprocess.run(
            [sys.executable, "-c", LOAD_SCRIPT, str(DEMO_TOKENIZER), way],
            capture_output=True,
            text=True,
            check=True,
            cwd=REPO,
        )
        seconds, torch = done.stdout.split()
        runs.append((float(seconds), torch == "True"))
    return statistics.median(r[0] for r in runs), runs[0][1]


def _rss() -> dict[str, list[float]]:
    out = {}
    for backend, cache in (("hf", "reset"), ("gigatoken", "keep"), ("gigatoken", "reset")):
        done = subprocess.run(
            [sys.executable, "-m", "bench.text_worker_rss", backend, cache, str(RSS_UNITS)],
            capture_output=True,
            text=True,
            check=True,
            cwd=REPO,
        )
        out[f"{backend} ({cache})"] = json.loads(done.stdout.splitlines()[-1])["rss_mib"]
    return out


def run() -> str:
    from cook.tokenize.backends import PROBES

    single_threaded_tokenizers()
    corpora = {"big": text_corpus(BIG), "small": text_corpus(SMALL)}
    texts = {size: _rendered(path) for size, path in corpora.items()}
    bare = _bare(texts)
    jobs = _jobs(corpora)
    in_process = _in_process(corpora)
    light_s, light_torch = _load("cook")
    auto_s, auto_torch = _load("autotokenizer")
    rss = _rss()
    base = bare["hf"][1] / bare["hf"][0]

    def row(name: str, seconds: float, tokens: int) -> str:
        rate = tokens / seconds
        return f"| {name} | {tokens:,} | {seconds:.2f} | {rate:,.0f} | **{rate / base:.2f}** |"

    identical = jobs["hf"]["shards_sha256"] == jobs["auto"]["shards_sha256"]
    rss_rows = "\n".join(
        f"| {k} | {v[0]:.0f} | {v[-1]:.0f} | {', '.join(f'{x:.0f}' for x in v)} |" for k, v in rss.items()
    )
    choice = jobs["auto"]["backend"]
    return f"""## Text job with the fast tokenizer backend (issue 14)

`{COMMAND}`

Demo chats x{BIG} minus x{SMALL} (marginal: {jobs["auto"]["tokens"]:,} tokens in the job), the demo
tokenizer, one thread everywhere; CPU = user + system, median of {REPEATS}. 1-minute load average
{os.getloadavg()[0]:.1f} at the end of the run. Note the corpus
repeats the 240 demo chats, which favours encoders with a word cache (HF's and gigatoken's alike).

| path | tokens | CPU s | tokens/s per core | vs bare HF |
| --- | ---: | ---: | ---: | ---: |
{row("bare HF `encode_batch` (baseline)", *bare["hf"])}
{row("bare gigatoken `encode_batch_list`", *bare["gigatoken"])}
{row("`cook run` whole job, `tokenizer.backend: hf`", jobs["hf"]["cpu_s"], jobs["hf"]["tokens"])}
{row("`cook run` whole job, default (`auto` -> " + choice["name"] + ")", jobs["auto"]["cpu_s"], jobs["auto"]["tokens"])}
{row("same job in-process (`run_pipeline` + `LocalExecutor`, warm), default", statistics.median(in_process), jobs["auto"]["tokens"])}

Spread of the marginal CPU s over the {REPEATS} repeats (min - max): `cook run` hf
{jobs["hf"]["spread"][0]:.2f} - {jobs["hf"]["spread"][1]:.2f}, `cook run` default
{jobs["auto"]["spread"][0]:.2f} - {jobs["auto"]["spread"][1]:.2f}, in-process default
{in_process[0]:.2f} - {in_process[-1]:.2f}. The `cook run` rows subtract two fresh processes whose
~2.5 CPU s start-up varies by a few tenths on this shared machine, so the in-process row is the
steadier figure for the job itself.
Text-only ChatML conversations are assembled as NumPy columns (`cook/tokenize/chatml_columns.py`:
one pass appends segment codes, one gather builds the batch's ids, one repeat its mask), the
general piece/layout path serves media and template mode; ids and masks are equal (property test).

Target: whole job >= 3x bare HF (moonshot 5x). The self-check of `auto` compared
{choice["strings_checked"]} strings ({len(PROBES)} probes, the added tokens, the first unit's texts): {choice["self_check"]}.

**Shards unchanged**: {jobs["hf"]["shards"]} shards, sha256 over the shard digests:
`hf` `{jobs["hf"]["shards_sha256"][:16]}…`, `auto` `{jobs["auto"]["shards_sha256"][:16]}…` —
{"**byte-identical**" if identical else "**DIFFERENT**"}.

**Start-up** (the x{SMALL} job, median): `hf` {jobs["hf"]["startup_wall_s"]:.2f} s wall /
{jobs["hf"]["startup_cpu_s"]:.2f} CPU s, `auto` {jobs["auto"]["startup_wall_s"]:.2f} s wall /
{jobs["auto"]["startup_cpu_s"]:.2f} CPU s. Loading the tokenizer in a fresh interpreter:
`ChatTokenizer(auto)` {light_s:.2f} CPU s (torch imported: {light_torch}) vs `AutoTokenizer`
{auto_s:.2f} CPU s (torch imported: {auto_torch}). The workers' path imports neither torch nor
transformers (test_backend_cook); the driver still imports torch once, at the end, through
megatron.energon's index writer (cook/writer/energon_index.py).

**Worker memory** (`python -m bench.text_worker_rss BACKEND CACHE {RSS_UNITS}`): VmRSS in MiB after
each of {RSS_UNITS} units of never-repeating random words (2,500 records each, 1x = one unit).

| backend (encoder cache) | 1x | {RSS_UNITS}x | after each unit |
| --- | ---: | ---: | --- |
{rss_rows}

gigatoken's pretoken cache is unbounded (`keep`); cook rebuilds the encoder (~8 ms) once 8 M
characters have gone through it since the last rebuild (`reset`: here every second unit of ~6.8 M
characters), which bounds the worker's memory (the cache holds at most ~8 M characters' words).
"""


if __name__ == "__main__":
    print(run())
