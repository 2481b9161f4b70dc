"""One road for rejects: whatever stage rejects a record (the source reading it, the cooker, media,
tokenize, the packer's fit), the reject reaches ``rejects.jsonl`` through the CLI with its reason
and its detail, in the worker's order, and ``records_in = sources_packed + records_rejected``.

One JSONL unit mixes good and bad records of every kind over more than one tokenize batch
(``TOKENIZE_BATCH`` cooked records), so a batch holds text-only and media conversations and rejects
of every stage. The order pinned here: a record's read, cook and media rejects as it is read; the
tokenize and fit rejects of a batch, in batch order, once the batch is full (or the unit ends).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from cook import format as fmt
from cook.cli.main import main
from cook.config import PackingConfig, TokenizerConfig
from cook.cookers import COOKERS
from cook.errors import Rejected
from cook.packing.packer import fit_sample
from cook.runner.worker import TOKENIZE_BATCH
from cook.tokenize import ChatTokenizer, tokenize_batch
from cook.types import RawRecord
from tests.conftest import DEMO_TOKENIZER, pipeline_dict
from tests.unit.media.media_data import rgb_bytes

RECORDS = 1000
MAX_RECORD_BYTES = 8192
SEQ_LEN = 1024
LONG_ANSWER = "word " * 1200  # > SEQ_LEN tokens: too_long (packing.overflow: reject)


def _chat(user: Any, answer: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": user}, answer or {"role": "assistant", "content": "Fine."}]}


def _record(i: int) -> tuple[bytes, str, str | None]:
    """Record ``i``: its JSONL line, the stage that handles it, and the detail of a read, cook or media
    reject (None: the record cooks; tokenize and fit rejects are worked out from the stages)."""
    kind = i % 10
    if kind == 0:
        return json.dumps(_chat(f"q{i}")).encode(), "ok", None
    if kind == 1:
        return (
            b'{"messages": [',
            "bad_json",
            "Expecting value: line 2 column 1 (char 15)",
        )  # the line ends in its newline
    if kind == 2:
        image = _chat([{"type": "text", "text": f"look {i}"}, {"type": "image", "image": "ok.png"}])
        return json.dumps(image).encode(), "ok", None
    if kind == 3:
        return b'{"a": "\xff"}', "bad_utf8", "invalid UTF-8 at byte 7"
    if kind == 4:
        silent = _chat(f"q{i}", {"role": "assistant", "content": "a", "loss": False})
        return json.dumps(silent).encode(), "tokenize", None
    if kind == 5:
        return b"[1, 2]", "bad_type", "record is a JSON list, not an object"
    if kind == 6:
        robot = {"messages": [{"role": "robot", "content": "hi"}]}
        return (
            json.dumps(robot).encode(),
            "bad_role",
            "messages[0].role 'robot' is not one of system, user, assistant, tool",
        )
    if kind == 7:
        return json.dumps(_chat(f"q{i}", {"role": "assistant", "content": LONG_ANSWER})).encode(), "tokenize", None
    if kind == 8:
        missing = _chat([{"type": "text", "text": "see"}, {"type": "image", "image": f"missing-{i}.png"}])
        detail = f"'missing-{i}.png' not found in the sample, stores or media_root"
        return json.dumps(missing).encode(), "media_missing", detail
    line = json.dumps(_chat("x" * MAX_RECORD_BYTES)).encode()
    return line, "too_large", f"{len(line) + 1} bytes > input.max_record_bytes"  # with its newline


def _late_reject(line: bytes, source: str, tokenizer: ChatTokenizer) -> tuple[str, str]:
    """The tokenize or fit reject of a text-only record, from the stages themselves."""
    conv = COOKERS["openai"](RawRecord(source, json.loads(line), "a.jsonl"))
    (tokenized,) = tokenize_batch(tokenizer, [conv], [()], TokenizerConfig(path=str(DEMO_TOKENIZER)))
    with pytest.raises(Rejected) as info:
        fit_sample(tokenized.sample(), PackingConfig(seq_len=SEQ_LEN, overflow="reject"))
    return info.value.reason.value, info.value.detail


def _expected_rejects(lines: list[bytes], kinds: list[tuple[str, str | None]]) -> list[dict[str, str]]:
    """The worker's order: read/cook/media rejects at once, tokenize/fit rejects per full batch."""
    tokenizer = ChatTokenizer(str(DEMO_TOKENIZER))
    out: list[dict[str, str]] = []
    pending: list[dict[str, str]] = []
    cooked = 0
    for number, (line, (stage, detail)) in enumerate(zip(lines, kinds, strict=True), start=1):
        source = f"a.jsonl#{number}"
        if stage not in ("ok", "tokenize"):
            out.append({"source": source, "reason": stage, "detail": str(detail)})
            continue
        cooked += 1
        if stage == "tokenize":
            reason, late = _late_reject(line, source, tokenizer)
            pending.append({"source": source, "reason": reason, "detail": late})
        if cooked % TOKENIZE_BATCH == 0:
            out, pending = out + pending, []
    return out + pending


def test_every_stage_rejects_through_one_road(tmp_path: Path) -> None:
    data, media = tmp_path / "data", tmp_path / "media"
    data.mkdir()
    media.mkdir()
    (media / "ok.png").write_bytes(rgb_bytes(np.full((64, 96, 3), 128, dtype=np.uint8)))
    records = [_record(i) for i in range(RECORDS)]
    lines = [line for line, _, _ in records]
    (data / "a.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    config = pipeline_dict(
        str(data),
        str(tmp_path / "out"),
        input={"media_root": str(media), "max_record_bytes": MAX_RECORD_BYTES},
        packing={"seq_len": SEQ_LEN, "overflow": "reject"},
    )
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(config))

    assert main(["run", str(tmp_path / "p.yaml"), "--workers", "0", "--quiet"]) == 0

    out = tmp_path / "out"
    got = [json.loads(line) for line in (out / fmt.REJECTS_NAME).read_text().splitlines()]
    expected = _expected_rejects(lines, [(stage, detail) for _, stage, detail in records])
    assert {r["reason"] for r in expected} == {
        "bad_json",
        "bad_utf8",
        "bad_type",
        "too_large",
        "bad_role",
        "media_missing",
        "no_target",
        "too_long",
    }
    assert got == expected
    counts = json.loads((out / fmt.MANIFEST_NAME).read_text())["counts"]
    assert (counts["records_in"], counts["sources_packed"], counts["records_rejected"]) == (
        RECORDS,
        RECORDS // 5,
        len(expected),
    )
    assert counts["records_in"] == counts["sources_packed"] + counts["records_rejected"]
