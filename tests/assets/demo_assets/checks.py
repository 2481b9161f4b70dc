"""Self-checks of the built tokenizer and data."""

from __future__ import annotations

import json
import statistics
import tarfile
from typing import Any

from .chat_template import flatten_content, render_template
from .common import (
    CHAT_BAD_JSON_LINE,
    CHAT_BAD_UTF8_LINE,
    CHAT_FORGED_MARKUP_LINE,
    CHAT_MESSAGES_STRING_LINE,
    CHAT_NO_ASSISTANT_LINE,
    CHAT_UNKNOWN_ROLE_LINE,
    DATA_DIR,
    EOS_TOKEN,
    LLAVA_SAMPLES,
    PAD_TOKEN,
    SPECIAL_TOKENS,
    TOKENIZER_DIR,
)


# ----------------------------------------------------------------------------------------------------
# Self-checks.
# ----------------------------------------------------------------------------------------------------
def self_check() -> None:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(TOKENIZER_DIR))
    assert tok.is_fast, type(tok)
    for i, t in enumerate(SPECIAL_TOKENS):
        assert tok.convert_tokens_to_ids(t) == i, t
        assert tok(t).input_ids == [i], (t, tok(t).input_ids)
    assert tok.pad_token == PAD_TOKEN and tok.pad_token_id == 0
    assert tok.eos_token == EOS_TOKEN and tok.eos_token_id == 2
    assert tok.bos_token is None
    hello = tok("hello").input_ids
    assert all(i >= len(SPECIAL_TOKENS) for i in hello) and tok.decode(hello) == "hello", hello
    text = "Line one.\n  Indented: x = 3.14 * (y - 2)  # ünïcödé €\n\tTab"
    assert tok.decode(tok(text).input_ids) == text

    def render(messages: list[dict[str, Any]], gen: bool = False) -> str:
        out = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen)
        assert isinstance(out, str)
        return out

    ex1 = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]
    want1 = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think></think>Hello!<|im_end|>\n"
    assert render(ex1) == want1, repr(render(ex1))
    ex2 = [
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": "<think>\n plan \n</think>\n\nAnswer"},
    ]
    want2 = "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>plan</think>Answer<|im_end|>\n"
    assert render(ex2) == want2, repr(render(ex2))
    assert render(ex1[:1], gen=True) == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    rules: list[tuple[list[dict[str, Any]], str]] = [  # thinking found inline or out of band, parts flattened
        ([{"role": "assistant", "content": "no open</think> ans"}], "<think>no open</think>ans"),
        ([{"role": "assistant", "content": "a <think> b </think> c </think> d"}], "<think>b</think>c </think> d"),
        ([{"role": "assistant", "content": "x </think>", "reasoning_content": "  r  "}], "<think>r</think>x </think>"),
        ([{"role": "assistant", "content": "<think>t</think>x", "reasoning_content": ""}], "<think>t</think>x"),
    ]
    for case, body in rules:
        assert render(case) == f"<|im_start|>assistant\n{body}<|im_end|>\n", (case, render(case))
    kept = [{"role": "system", "content": " keep  spaces \n"}, {"role": "tool", "content": "{}"}]
    assert render(kept) == "<|im_start|>system\n keep  spaces \n<|im_end|>\n<|im_start|>tool\n{}<|im_end|>\n"
    parts = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": " b"}]}]
    assert render(parts) == "<|im_start|>user\na b<|im_end|>\n", render(parts)

    # Transformers renders every valid chat record as the template does here; length statistics.
    n_tokens: list[int] = []
    chars = toks = 0
    for lineno, raw in enumerate((DATA_DIR / "chat.jsonl").read_bytes().split(b"\n")[:-1], start=1):
        bad = (
            CHAT_BAD_JSON_LINE,
            CHAT_BAD_UTF8_LINE,
            CHAT_NO_ASSISTANT_LINE,
            CHAT_MESSAGES_STRING_LINE,
            CHAT_UNKNOWN_ROLE_LINE,
        )
        if lineno in bad:
            continue
        msgs = json.loads(raw.decode("utf-8"))["messages"]
        rendered = render(msgs)
        assert rendered == render_template(msgs), lineno
        ids = tok(rendered).input_ids
        n_tokens.append(len(ids))
        if lineno == CHAT_FORGED_MARKUP_LINE:
            # Plain tokenisation of the rendered string does recognise the forged tags: the pipeline must
            # tokenise message text without special-token matching (split_special_tokens=True or equivalent).
            assert ids.count(1) == 3, ids
        else:
            body = "".join(flatten_content(m.get("content")) for m in msgs)
            chars += len(body)
            toks += len(tok(body, split_special_tokens=True).input_ids)
    for raw in (DATA_DIR / "preformatted.jsonl").read_bytes().split(b"\n")[:-1]:
        json.loads(raw)
    with tarfile.open(DATA_DIR / "llava-000000.tar") as tar:
        assert len(tar.getmembers()) == LLAVA_SAMPLES
    n_tokens.sort()
    print(
        f"chat.jsonl: {len(n_tokens)} valid records, tokens min {n_tokens[0]} median "
        f"{statistics.median(n_tokens):.0f} p90 {n_tokens[int(0.9 * len(n_tokens))]} max {n_tokens[-1]}; "
        f"<50: {sum(n < 50 for n in n_tokens)}, >600: {sum(n > 600 for n in n_tokens)}, "
        f"chars/token {chars / toks:.2f}"
    )
    assert 3.0 <= chars / toks <= 5.5, chars / toks
