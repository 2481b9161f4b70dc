"""Template mode (issues 15, 28) per core vs bare ``apply_chat_template(tokenize=True)`` and vs ChatML mode.

Baseline: ``tokenizer.apply_chat_template(messages, tokenize=True)`` per record on the same records.
cook: ``tokenize_batch`` in batches of 256 (the worker's batch), ids and target masks included.
Floor: cook's encoder alone on the rendered conversations (``encode_texts``, batches of 256): no
rendering, no markup split, no masks; it bounds the ratio any path on this encoder can reach.
All figures are CPU seconds of this process (user+sys, all threads), **marginal** (a run over a
quarter of the records subtracted, so fixed costs cancel), median of 5 rounds that interleave the
paths, same run, same machine.
The whole-job row is ``cook run`` in-process (``--workers 0``), full corpus minus a quarter corpus.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import DEMO_TOKENIZER, REPO, WORK, median_cpu, single_threaded_tokenizers, text_corpus

COMMAND = ".venv/bin/python -m bench.run_all bench_template"
TEMPLATES = REPO / "tests" / "assets" / "templates"
BATCH = 256


def _short_rows(count: int) -> list[dict[str, Any]]:
    """Multi-turn chats of 1-3 sentence turns (typical SFT chat), from the demo data's sentences."""
    sentences: list[str] = []
    for line in (REPO / "tests" / "assets" / "demo_data" / "chat.jsonl").read_bytes().splitlines():
        try:
            row = json.loads(line.decode("utf-8"))
        except ValueError:
            continue
        for message in row.get("messages") or []:
            if isinstance(message, dict) and isinstance(message.get("content"), str):
                text = message["content"].replace("<think>", "").replace("</think>", "")
                sentences += [s.strip() + "." for s in text.split(".") if s.strip()]
    rng = random.Random(0)
    rows = []
    for _ in range(count):
        messages = [{"role": "system", "content": "You are a helpful assistant."}] if rng.random() < 0.5 else []
        for _ in range(rng.randint(1, 3)):
            messages.append({"role": "user", "content": " ".join(rng.sample(sentences, rng.randint(1, 2)))})
            messages.append({"role": "assistant", "content": " ".join(rng.sample(sentences, rng.randint(1, 3)))})
        rows.append({"messages": messages})
    return rows


def _marginal(fns: dict[str, Callable[[int], Any]], count: int, repeats: int = 5) -> dict[str, float]:
    """CPU seconds per record of each ``fn(n)`` (which processes the first n records): big run minus
    a quarter-size run, medians over ``repeats`` rounds that interleave the paths (so a slow spell of
    the shared machine hits all of them)."""
    small = count // 4
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.process_time()
            fn(count)
            middle = time.process_time()
            fn(small)
            times[name].append(((middle - start) - (time.process_time() - middle)) / (count - small))
    return {name: statistics.median(values) for name, values in times.items()}


def _paths(path: str, chat_format: str, rows: list[dict[str, Any]]) -> tuple[dict[str, float], str]:
    from transformers import AutoTokenizer

    from cook.config import TokenizerConfig
    from cook.cookers import COOKERS
    from cook.tokenize import ChatTokenizer, tokenize_batch
    from cook.types import RawRecord

    hf = AutoTokenizer.from_pretrained(path)
    rows = [row for row in rows if _renders(hf, row, chat_format)]  # what the template refuses: no baseline
    tokenizer = ChatTokenizer(path, "auto", chat_format=chat_format)  # the default backend, as `cook run` uses
    config = TokenizerConfig(path=path, chat_format=chat_format)  # type: ignore[arg-type]
    convs = [COOKERS["openai"](RawRecord(f"b#{i}", row, "b")) for i, row in enumerate(rows)]  # rows cook accepts
    texts = [hf.apply_chat_template(row["messages"], tokenize=False) for row in rows]

    def bare(n: int) -> None:
        for row in rows[:n]:
            hf.apply_chat_template(row["messages"], tokenize=True, return_dict=False)

    def cook(n: int) -> None:
        for i in range(0, n, BATCH):
            batch = convs[i : min(i + BATCH, n)]
            tokenize_batch(tokenizer, batch, [()] * len(batch), config)

    def floor(n: int) -> None:
        for i in range(0, n, BATCH):
            tokenizer.encode_texts(texts[i : min(i + BATCH, n)])

    cook(len(rows))  # warm the caches (byte table, template, markup runs)
    times = _marginal({"bare": bare, "cook": cook, "floor": floor}, len(rows))
    return {**times, "records": float(len(rows))}, tokenizer.backend.name


def _renders(hf: Any, row: dict[str, Any], chat_format: str) -> bool:
    if chat_format != "template":
        return True
    try:
        hf.apply_chat_template(row["messages"], tokenize=False)
    except Exception:  # the template's own raise_exception, or a type error on this record's content
        return False
    return True


def _varied_rows() -> list[dict[str, Any]]:
    """Generated, varied conversations (tests/e2e/conformance_records.py, eight seeds): shared and absent
    system prompts, 1-4 turns, edge whitespace, CJK/RTL/emoji, non-NFC text, long turns, reasoning,
    inline thinking; no tools (most templates here have none)."""
    from tests.e2e.conformance_records import records

    kinds = ("plain", "whitespace", "unicode", "nonnfc", "long", "reasoning", "think_inline")
    return [record.row for seed in range(8) for record in records(kinds=kinds, seed=seed)]


def _whole_job(rows: list[dict[str, Any]]) -> tuple[float, float]:
    """(cook run CPU s per record, bare apply_chat_template CPU s per record) on the Llama-3 tokenizer."""
    from transformers import AutoTokenizer

    from cook.config import load_config
    from cook.runner.local import LocalExecutor
    from cook.runner.pipeline import run_pipeline

    path = str(TEMPLATES / "llama3")
    corpora = {}
    for name, part in (("big", rows), ("small", rows[: len(rows) // 4])):
        corpora[name] = WORK / f"template_{name}.jsonl"
        corpora[name].write_text("".join(json.dumps(r) + "\n" for r in part))

    def run(name: str) -> None:
        overrides = [
            f"input.path={corpora[name]}",
            f"output.dir={WORK / ('template_run_' + name)}",
            f"tokenizer.path={path}",
            "tokenizer.chat_format=template",
            "packing.seq_len=8192",
        ]
        run_pipeline(load_config("pipelines/demo.yaml", overrides), LocalExecutor, overwrite=True, progress=False)

    run("small")  # imports and first-use costs outside the timing
    cook_s = (median_cpu(lambda: run("big"))[0] - median_cpu(lambda: run("small"))[0]) / (len(rows) - len(rows) // 4)
    hf = AutoTokenizer.from_pretrained(path)

    def bare(n: int) -> None:
        for row in rows[:n]:
            hf.apply_chat_template(row["messages"], tokenize=True, return_dict=False)

    return cook_s, _marginal({"bare": bare}, len(rows), repeats=3)["bare"]


def _cookable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from cook.cookers import COOKERS
    from cook.errors import Rejected
    from cook.types import RawRecord

    out = []
    for row in rows:
        try:
            COOKERS["openai"](RawRecord("b#0", row, "b"))
        except Rejected:
            continue
        out.append(row)
    return out


def run() -> str:
    single_threaded_tokenizers()
    demo_rows = _cookable([json.loads(line) for line in Path(text_corpus(2)).read_text().splitlines()])
    corpora = {"short chats": _short_rows(2000), "demo chats (long)": demo_rows, "varied (generated)": _varied_rows()}
    from tests.assets.family_tokenizers import build as build_family
    from tests.assets.real_tokenizers import build as build_real

    real_root, family_root = WORK / "real_tokenizers", WORK / "family_tokenizers"
    cases = [
        ("Llama-3", str(TEMPLATES / "llama3"), "template"),
        ("Gemma", str(TEMPLATES / "gemma"), "template"),
        ("ChatML (demo)", str(DEMO_TOKENIZER), "template"),
        ("ChatML (demo)", str(DEMO_TOKENIZER), "chatml"),
        # real templates: Llama-3.1 filters tool results (| tojson), so every record is rendered twice;
        # Qwen2.5 has an NFC normalizer; Phi-3 a first-only Metaspace and rstrip tokens; DeepSeek-R1
        # tests content for '</think>'
        ("Llama-3.1 (real vocab)", str(build_real("llama3.1", real_root)), "template"),
        ("Qwen2.5 (family)", str(build_family("qwen2.5", family_root)), "template"),
        ("Phi-3 (family)", str(build_family("phi3", family_root)), "template"),
        ("DeepSeek-R1 (family)", str(build_family("deepseek-r1", family_root)), "template"),
    ]
    lines = []
    for corpus, rows in corpora.items():
        for family, path, chat_format in cases:
            if corpus == "demo chats (long)" and "(" in family and "demo" not in family:
                continue  # the demo's multi-part contents are cook's input format, not these templates'
            t, backend = _paths(path, chat_format, rows)
            lines.append(
                f"| {corpus} ({t['records']:,.0f}) | {family} | `{chat_format}` | {backend} | {t['bare'] * 1e6:.0f} | "
                f"{t['cook'] * 1e6:.0f} | **{t['bare'] / t['cook']:.2f}** | {t['floor'] * 1e6:.0f} | "
                f"{t['bare'] / t['floor']:.2f} |"
            )
    job_s, job_bare_s = _whole_job(corpora["short chats"])
    table = "\n".join(lines)
    return f"""## Chat templates: template mode vs bare `apply_chat_template` (issues 15, 28)

`{COMMAND}`

Per record, CPU µs (user+sys of this one process, i.e. per core), marginal (all records minus a
quarter of them), median of 5 interleaved rounds; `TOKENIZERS_PARALLELISM=false`. *bare*: `apply_chat_template(messages,
tokenize=True)` per record. *cook*: `tokenize_batch` (ids + target masks; template mode renders the
Jinja template once per record on sentinels and splits only its markup; a template that filters
content, as Llama-3.1's `| tojson` on tool results, is rendered a second time with the real text for
every record, one that tests content with a literal only for records that hold it). *floor*: cook's encoder
(same backend) alone on the already-rendered text, the bound for any path on this encoder (`bare / floor` is the
best ratio reachable). Target: cook ≥ 1.5× bare per core.

| corpus | template | `chat_format` | cook's backend | bare µs | cook µs | bare / cook | floor µs | bare / floor |
| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |
{table}

Whole job, `cook run` in-process (`--workers 0`) in template mode on the Llama-3 tokenizer, short
chats (2,000 minus 500 records: read, cook, tokenize, pack, write shards and Energon index):
{job_s * 1e6:.0f} µs per record vs bare `apply_chat_template` {job_bare_s * 1e6:.0f} µs
(**{job_bare_s / job_s:.2f}×**).

cook encodes with its default backend (`tokenizer.backend: auto`, shown per row: gigatoken where it
passes the self-check against hf, ids identical); *bare* is Hugging Face's own path. `bare / floor`
bounds the ratio any path on cook's encoder can reach. {os.cpu_count()} cores visible, 1-minute load
average {os.getloadavg()[0]:.1f} at the end; ratios are within one run (interleaved). The whole-job figure is the median of 3 runs of each size.
"""
