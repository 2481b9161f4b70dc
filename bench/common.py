"""Shared benchmark helpers: the synthetic text corpus and median timing."""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / "bench" / "_work"
DEMO_TOKENIZER = REPO / "tests" / "assets" / "demo_tokenizer"


def text_corpus(copies: int = 40) -> Path:
    """The valid demo chat records repeated ``copies`` times (deterministic), as one JSONL file."""
    path = WORK / f"chat_x{copies}.jsonl"
    if path.exists():
        return path
    WORK.mkdir(parents=True, exist_ok=True)
    rows = []
    for line in (REPO / "tests" / "assets" / "demo_data" / "chat.jsonl").read_bytes().splitlines():
        try:
            row = json.loads(line.decode("utf-8"))
        except ValueError:
            continue
        messages = row.get("messages")
        if isinstance(messages, list) and any(isinstance(m, dict) and m.get("role") == "assistant" for m in messages):
            rows.append(json.dumps(row))
    path.write_text("".join(r + "\n" for r in rows * copies))
    return path


def _median(clock: Callable[[], float], fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeats):
        start = clock()
        result = fn()
        times.append(clock() - start)
    return statistics.median(times), result


def median_cpu(fn: Callable[[], Any], repeats: int = 3) -> tuple[float, Any]:
    """Median CPU seconds of this process (all threads) over ``repeats`` calls, and the last result."""
    return _median(time.process_time, fn, repeats)


def median_wall(fn: Callable[[], Any], repeats: int = 3) -> tuple[float, Any]:
    """Median wall seconds over ``repeats`` calls, and the last result."""
    return _median(time.perf_counter, fn, repeats)


def single_threaded_tokenizers() -> None:
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
