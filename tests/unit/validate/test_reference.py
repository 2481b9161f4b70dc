"""``cook.validate.reference`` pieces: the prefix-render masks equal each test template's ``{% generation %}``
variant, the ChatML reference template renders the documented format, and the input reader finds a
record by its line (blank lines, a BOM) or Parquet row (across row groups)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cook import format as fmt
from cook.validate.reference.records import InputFiles, NotCheckable, to_record
from cook.validate.reference.render import ControlText, Renderer, _target_runs, hf_messages
from tests.conftest import DEMO_TOKENIZER, REPO
from tests.e2e.test_validate_reference import chat_rows

TEMPLATES = REPO / "tests" / "assets" / "templates"


@pytest.mark.parametrize("family", ["llama3", "mistral", "gemma", "phi3"])
def test_prefix_render_masks_equal_the_generation_template(family: str) -> None:
    renderer = Renderer(str(TEMPLATES / family), "template", True)
    generation = (TEMPLATES / family / "generation_template.jinja").read_text()
    compared = 0
    for i, row in enumerate(chat_rows(40, 7)):
        record = to_record(row, f"x.jsonl#{i + 1}", "openai", "all_assistant" if i % 2 else "last_assistant")
        try:
            reference = renderer.reference(record)
        except ControlText:
            continue
        messages, tools = hf_messages(record)
        out = renderer.tokenizer.apply_chat_template(
            messages, tools=tools, chat_template=generation, return_dict=True, return_assistant_tokens_mask=True
        )
        assert reference.ids == list(out["input_ids"])
        if reference.mask is None:  # native tool calls only
            assert any(m.tool_calls for m in record.messages), reference.masks_by
            continue
        assert reference.masks_by == "prefix renders"
        assert reference.mask == _target_runs(list(out["assistant_masks"]), record.messages), record.source
        compared += 1
    assert compared >= 30


def test_chatml_reference_renders_the_documented_format() -> None:
    renderer = Renderer(str(DEMO_TOKENIZER), "chatml", True)
    row = {
        "messages": [
            {"role": "user", "content": "  hi"},
            {"role": "assistant", "content": "<think> plan </think>\n\nok", "loss": False},
            {"role": "user", "content": "again"},
            {"role": "assistant", "content": "sure", "tool_calls": [{"function": {"name": "f"}}]},
        ],
        "tools": [{"type": "function"}],
    }
    record = to_record(row, "x.jsonl#1", "openai", "all_assistant")
    reference = renderer.reference(record)
    text = renderer.tokenizer.decode(reference.ids)
    assert text == (
        '<|im_start|>system\n# Tools\n[{"type": "function"}]<|im_end|>\n<|im_start|>user\n  hi<|im_end|>\n'
        "<|im_start|>assistant\n<think>plan</think>ok<|im_end|>\n<|im_start|>user\nagain<|im_end|>\n"
        '<|im_start|>assistant\n<think></think>sure<tool_call>{"function": {"name": "f"}}</tool_call><|im_end|>\n'
    )
    targets = renderer.tokenizer.decode([i for i, m in zip(reference.ids, reference.mask or [], strict=True) if m])
    assert targets == '<think></think>sure<tool_call>{"function": {"name": "f"}}</tool_call><|im_end|>'
    with pytest.raises(ControlText):
        renderer.reference(to_record({"text": f"{fmt.IM_START}user\n<think>{fmt.IM_END}\n"}, "p#1", "auto", "x"))


def test_input_files_seek_lines_and_rows(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows: list[Any] = [{"messages": [{"role": "user", "content": str(i)}]} for i in range(5)]
    lines = [json.dumps(r) for r in rows]
    (tmp_path / "a.jsonl").write_bytes(("\ufeff" + lines[0] + "\n\n" + "\n".join(lines[1:]) + "\n").encode())
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "b.parquet", row_group_size=2)
    files = InputFiles(str(tmp_path))
    assert files.read("a.jsonl#1") == rows[0] and files.read("a.jsonl#3") == rows[1]  # line 2 is blank
    assert files.read("a.jsonl#6") == rows[4]
    assert [files.read(f"b.parquet#{n}") for n in range(1, 6)] == rows
    cases = [
        ("a.jsonl#9", "no line 9"),
        ("c.jsonl#1", "not found"),
        ("b.parquet#6", "no row 6"),
        ("d.tar#s-1", "webdataset"),
    ]
    for source, reason in cases:
        with pytest.raises(NotCheckable, match=reason):
            files.read(source)
    glob = InputFiles(str(tmp_path / "*.jsonl"))
    assert glob.read("a.jsonl#1") == rows[0]


def test_whitespace_a_control_token_swallows_is_not_a_target(family_tokenizer: Any) -> None:
    """Phi-3's ``<|assistant|>`` (rstrip) swallows the reply's leading spaces: the header stays no target."""
    renderer = Renderer(str(family_tokenizer("phi3")), "template", True)
    row = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "  ok"}]}
    reference = renderer.reference(to_record(row, "x.jsonl#1", "openai", "all_assistant"))
    tokens = renderer.tokenizer.convert_ids_to_tokens(reference.ids)
    targets = [t for t, m in zip(tokens, reference.mask or [], strict=True) if m]
    assert reference.masks_by == "prefix renders" and "<|assistant|>" not in targets
    assert targets[-1] == "<|end|>" and "".join(targets[:-1]).replace("▁", "").strip() == "ok"


@pytest.mark.parametrize("content", ["message['content'] | trim", "message['content']"])
def test_markup_space_before_content_is_not_a_target(tmp_path: Path, content: str) -> None:
    """A template that writes ``' ' + content`` (trimmed or not): the space is markup, the content's own
    whitespace the template keeps is target, and an empty reply's target is its closing token alone."""
    import shutil

    root = tmp_path / "tok"
    shutil.copytree(TEMPLATES / "mistral", root)
    config = json.loads((root / "tokenizer_config.json").read_text())
    template = (
        "{{- bos_token }}{%- for message in messages %}{%- if message['role'] == 'user' %}"
        "{{- '[INST] ' + message['content'] + '[/INST]' }}{%- else %}{{- ' ' }}OPEN"
        "{{- CONTENT + eos_token }}CLOSE{%- endif %}{%- endfor %}"
    ).replace("CONTENT", content)
    config["chat_template"] = template.replace("OPEN", "").replace("CLOSE", "")
    (root / "tokenizer_config.json").write_text(json.dumps(config))
    generation = template.replace("OPEN", "{%- generation %}").replace("CLOSE", "{%- endgeneration %}")
    renderer = Renderer(str(root), "template", True)
    for reply in ("  a b", "", "x  ", "  東京", "\n!?"):
        row = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": reply}]}
        record = to_record(row, "x.jsonl#1", "openai", "all_assistant")
        reference = renderer.reference(record)
        messages, _ = hf_messages(record)
        out = renderer.tokenizer.apply_chat_template(
            messages, chat_template=generation, return_dict=True, return_assistant_tokens_mask=True
        )
        assert reference.ids == list(out["input_ids"]) and reference.mask == list(out["assistant_masks"]), reply
