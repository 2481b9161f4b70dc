"""Conformance through the CLI: ~150 varied records (tests/e2e/conformance_records.py) cooked in ONE
batch per tokenizer family, every packed sequence compared with Hugging Face.

For each family: one JSONL of all records, ``cook run --workers 0`` (``packing.overflow: reject``,
``seq_len`` 4096), the shards read back, and each packed sequence (its ``source`` names its record)
compared with references computed from THAT record alone:

- ids: ``apply_chat_template(messages, tools=tools or None, tokenize=True)`` (template mode), or the
  same with ``CHATML_TEMPLATE``, a Jinja rendering of cook's documented ChatML format (chatml mode);
- mask: the family's ``{% generation %}`` template with ``return_assistant_tokens_mask=True``
  (tests/assets/templates/*/generation_template.jinja, ``CHATML_TEMPLATE``), else an independent
  prefix-render reference (``prefix_mask``: docs/chat_formats.md's target rule).

Documented exceptions are counted, not compared: records whose text holds one of the tokenizer's
special-token strings (``forged``: cook encodes them as text by design, HF parses them) and records
HF's template refuses (``hf_raises``: cook must reject them with ``template_error``) or drops a
message of (``dropped``: cook rejects them with ``template_error``, or packs them and is compared).
Everything else must be packed with exact ids and masks, no sequence may hold another record's
ids or text, and the manifest must add up (``records_in = sources_packed + records_rejected``).

One family: ``pytest tests/e2e/test_conformance.py -k qwen``. Environment knobs:
``COOK_CONFORMANCE_REPORT=DIR`` writes each family's summary as ``DIR/<family>.json``;
``COOK_CONFORMANCE_KINDS=tool_calls,reasoning`` (or ``-forged,-long``) selects record kinds;
``COOK_CONFORMANCE_BACKEND=hf`` sets ``tokenizer.backend`` (default ``auto``). The ``real-*`` families
(128k-id vocabularies, built by tests/assets/real_tokenizers.py) are marked slow.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import tarfile
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from cook import format as fmt
from cook.cli.main import main
from cook.runner.worker import TOKENIZE_BATCH
from tests.conftest import DEMO_TOKENIZER, REPO, pipeline_dict, write_jsonl
from tests.e2e.conformance_records import KINDS, Record, records

TEMPLATES = REPO / "tests" / "assets" / "templates"
SP_TOKENIZER = REPO / "tests" / "assets" / "sp_tokenizer"
SEQ_LEN = 4096
INPUT_NAME = "conformance.jsonl"
SHOWN = 3  # mismatching records shown per family (and failure type)
FRAGMENT = 32  # tokens of cook's sequence, from the first difference, looked for in other records' references
CHATML_TOKENS = ("<|im_start|>", "<|im_end|>", "<think>", "</think>")

# cook's ChatML format (docs/chat_formats.md, cook/tokenize/chat_format.py) as a Jinja template:
# tools appended to the first system turn (or a leading system turn), assistant thinking normalized
# to one <think>...</think> block (reasoning_content, else inline text up to the first </think>),
# native tool_calls as <tool_call>{json}</tool_call> text after the content (cook/cookers/openai.py).
CHATML_TEMPLATE = (
    "{%- set ns = namespace(first=true) -%}"
    "{%- if tools -%}{%- if messages[0]['role'] != 'system' -%}"
    "{{- '<|im_start|>system\\n# Tools\\n' + (tools | tojson) + '<|im_end|>\\n' -}}"
    "{%- endif -%}{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- set body = namespace(text='', reasoning='', answer='') -%}"
    "{%- if message['content'] is string -%}{%- set body.text = message['content'] -%}{%- endif -%}"
    "{%- if message['role'] == 'assistant' and message['tool_calls'] -%}"
    "{%- for call in message['tool_calls'] -%}"
    "{%- set body.text = body.text + '<tool_call>' + (call | tojson) + '</tool_call>' -%}"
    "{%- endfor -%}{%- endif -%}"
    "{%- if loop.first and message['role'] == 'system' and tools -%}"
    "{%- set body.text = body.text + '\\n\\n# Tools\\n' + (tools | tojson) -%}{%- endif -%}"
    "{%- if message['role'] == 'assistant' -%}"
    "{%- if message['reasoning_content'] is string and message['reasoning_content'] -%}"
    "{%- set body.reasoning = message['reasoning_content'] -%}{%- set body.answer = body.text -%}"
    "{%- elif '</think>' in body.text -%}"
    "{%- set before = body.text.split('</think>', 1)[0] -%}"
    "{%- set body.answer = body.text.split('</think>', 1)[1] -%}"
    "{%- if '<think>' in before -%}{%- set body.reasoning = before.split('<think>', 1)[1] -%}"
    "{%- else -%}{%- set body.reasoning = before -%}{%- endif -%}"
    "{%- else -%}{%- set body.answer = body.text -%}{%- endif -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- generation -%}"
    "{{- '<think>' + body.reasoning.strip() + '</think>' + body.answer.lstrip() + '<|im_end|>' -}}"
    "{%- endgeneration -%}"
    "{{- '\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + body.text + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
)


# ---------------------------------------------------------------- families
@dataclass(frozen=True)
class Family:
    """One tokenizer and chat format. ``locate(request, tmp)`` gives the tokenizer directory (it may
    build it) or raises ``LookupError`` with the reason to skip."""

    id: str
    chat_format: str
    locate: Callable[[pytest.FixtureRequest, Path], Path]


def _fixed(path: Path) -> Callable[[pytest.FixtureRequest, Path], Path]:
    return lambda _request, _tmp: path


def _helper(kind: str, name: str) -> Callable[[pytest.FixtureRequest, Path], Path]:
    """A tokenizer from the helpers other engineers add: the conftest fixture ``<kind>_tokenizer``
    (``fixture(name) -> Path``, cached as it decides), else ``tests.assets.<kind>_tokenizers.build(name, out)``."""

    def locate(request: pytest.FixtureRequest, tmp: Path) -> Path:
        try:
            helper = request.getfixturevalue(f"{kind}_tokenizer")
        except pytest.FixtureLookupError:
            helper = None
        if helper is None:
            try:
                module = importlib.import_module(f"tests.assets.{kind}_tokenizers")
            except ImportError as err:
                raise LookupError(f"tests/assets/{kind}_tokenizers.py is not there yet ({err})") from None
            helper = lambda n: module.build(n, tmp / kind)  # noqa: E731
        try:
            return Path(helper(name))
        except (LookupError, OSError, ValueError, ImportError) as err:  # the helper's own "not available"
            raise LookupError(f"{kind} tokenizer {name!r} is not available: {type(err).__name__}: {err}") from None

    return locate


REAL = ("llama3.1", "mistral-nemo", "mixtral", "mistral-v3", "mistral-v7")
FAMILY = ("qwen2.5", "phi3", "phi4", "gemma2", "deepseek-r1", "smollm2", "nemotron3-nano", "nemotron-super")
CHATML_FAMILY = ("nemotron3-nano",)  # the family tokenizers with all four ChatML tokens special
FAMILIES = (
    *(Family(f"template-{n}", "template", _fixed(TEMPLATES / n)) for n in ("llama3", "mistral", "gemma", "phi3")),
    Family("chatml-demo", "chatml", _fixed(DEMO_TOKENIZER)),
    Family("chatml-sp", "chatml", _fixed(SP_TOKENIZER)),
    *(Family(f"real-{n}", "template", _helper("real", n)) for n in REAL),
    *(Family(f"family-{n}", "template", _helper("family", n)) for n in FAMILY),
    *(Family(f"chatml-family-{n}", "chatml", _helper("family", n)) for n in CHATML_FAMILY),
)


# ---------------------------------------------------------------- references (Hugging Face)
def _special_strings(hf: Any) -> list[str]:
    """The tokenizer's special added tokens (the strings only markup may produce), longest first."""
    tokens = {t.content for t in hf.added_tokens_decoder.values() if t.special}
    return sorted(tokens, key=len, reverse=True)


def _record_texts(row: dict[str, Any], chatml: bool = False) -> list[str]:
    """The record's data texts as they reach the tokenizer. ChatML mode normalizes an assistant's thinking
    first (its ``<think>``/``</think>`` become markup), so the texts are the reasoning and the answer."""
    texts: list[str] = []
    for message in row["messages"]:
        content = message.get("content") if isinstance(message.get("content"), str) else ""
        calls = message.get("tool_calls") or []
        if chatml and message["role"] == "assistant":
            # cook's own <tool_call> wrapper is markup, not data: "\0" stands in for it
            text = content + "".join(f"\0{json.dumps(c, ensure_ascii=False)}\0" for c in calls)
            reasoning = message.get("reasoning_content")
            if isinstance(reasoning, str) and reasoning:
                texts += [reasoning, text]
            elif "</think>" in text:
                head, _, answer = text.partition("</think>")
                texts += [head.partition("<think>")[2] if "<think>" in head else head, answer]
            else:
                texts.append(text)
            continue
        texts.append(content)
        if isinstance(message.get("reasoning_content"), str):
            texts.append(message["reasoning_content"])
        if calls:
            texts.append(json.dumps(calls, ensure_ascii=False))
    return texts


def _render(hf: Any, messages: list[dict[str, Any]], tools: Any, template: str | None, gen: bool = False) -> str:
    return hf.apply_chat_template(
        messages, tools=tools, chat_template=template, tokenize=False, add_generation_prompt=gen
    )


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _stripped(message: dict[str, Any]) -> dict[str, Any]:
    out = dict(message)
    for key in ("content", "reasoning_content"):
        if isinstance(out.get(key), str):
            out[key] = out[key].strip()
    return out


def closing_token(hf: Any, template: str | None) -> str | None:
    """The special token the template writes right after an assistant's content (``<|eot_id|>``,
    ``</s>``, ``<end_of_turn>``, ``<|end|>``, ``<|im_end|>``, ...), from a probe render."""
    messages = [{"role": "user", "content": "probe question"}, {"role": "assistant", "content": "probe answer"}]
    try:
        text = _render(hf, messages, None, template)
    except Exception:  # a template that refuses the probe: no closing token known
        return None
    at = text.rfind("probe answer")
    if at < 0:
        return None
    rest = text[at + len("probe answer") :].lstrip()
    return next((token for token in _special_strings(hf) if rest.startswith(token)), None)


def _token_spans(hf: Any, text: str, offsets: list[tuple[int, int]], ids: list[int]) -> list[tuple[int, int]]:
    """Each token's characters; a special token's are its own string only (HF's offsets of an
    lstrip/rstrip token also cover the whitespace it swallowed, which is not the token's)."""
    special = {i: t.content for i, t in hf.added_tokens_decoder.items() if t.special}
    out = []
    for (s, e), token_id in zip(offsets, ids, strict=True):
        literal = special.get(token_id)
        at = text.find(literal, s, e) if literal else -1
        out.append((at, at + len(literal)) if literal and at >= 0 else (s, e))
    return out


def _tool_call_start(
    hf: Any, messages: list[dict[str, Any]], i: int, tools: Any, template: str | None, text: str, head: int
) -> int | None:
    """Where the template's markup of message i's tool calls starts (its first non-whitespace
    character): the first difference from a render without them; None when the template prints
    none of them, or refuses the conversation without them."""
    plain = list(messages)
    plain[i] = {k: v for k, v in messages[i].items() if k != "tool_calls"}
    try:
        other = _render(hf, plain, tools, template)
    except Exception:  # e.g. an alternation check that counts a turn with calls differently: up to turn i
        try:
            upto = _render(hf, messages[: i + 1], tools, template)
            d = _common_prefix(upto, _render(hf, plain[: i + 1], tools, template))
        except Exception:
            return None
        d += len(upto[d:]) - len(upto[d:].lstrip())
        at = text.find(upto[d : d + 32], head) if d < len(upto) else -1  # the same markup in the whole render
        return at if at >= 0 else None
    d = _common_prefix(text, other)
    if d >= len(text) or d < head:
        return None
    return d + len(text[d:]) - len(text[d:].lstrip())


def prefix_mask(hf: Any, row: dict[str, Any], template: str | None, ids: list[int]) -> list[int]:
    """The assistant-token mask from renders of the record (docs/chat_formats.md's target rule), for
    templates without a ``{% generation %}`` variant. In the whole render, per assistant message i:

    - its header ends where the render of ``messages[:i]`` with the generation prompt stops agreeing
      with the whole render; its parts (reasoning, content) are found after it, in order;
    - the target characters run from its first part's first character to its last part's last one,
      with the edge whitespace the template keeps of them (a render with message i's parts stripped
      tells how much: the same markup, fewer characters), then the family's closing token
      (``closing_token``) when only whitespace lies between; for a turn with tool calls, everything
      from its first part (or the first character after the header) to the closing token; for an
      empty or whitespace-only reply the template prints nothing of, its closing token alone (as a
      ``{% generation %}`` template marks it).

    A token is a target iff one of its characters is a target character (HF offsets, as
    ``return_assistant_tokens_mask`` uses). Raises ``AssertionError`` where the render does not line
    up (reported as "no mask reference", never passed)."""
    messages, tools = row["messages"], row.get("tools") or None
    text = _render(hf, messages, tools, template)
    encoded = hf(text, add_special_tokens=False, return_offsets_mapping=True)
    assert list(encoded["input_ids"]) == ids, "the rendered text does not encode to apply_chat_template's ids"
    closing = closing_token(hf, template)
    spans: list[tuple[int, int]] = []
    cursor = 0  # past the last message found in the render (a system message may move: not counted)
    for i, message in enumerate(messages):
        cores = [
            message[key].strip()
            for key in ("reasoning_content", "content")
            if isinstance(message.get(key), str) and message[key].strip()
        ]
        if message["role"] != "assistant":
            at = text.find(cores[-1], cursor) if cores and message["role"] != "system" else -1
            cursor = at + len(cores[-1]) if at >= 0 else cursor
            continue
        assert i > 0, "an assistant message first"
        head = max(cursor, _common_prefix(_render(hf, messages[:i], tools, template, gen=True), text))
        bare_messages = list(messages)
        bare_messages[i] = _stripped(message)
        bare = _render(hf, bare_messages, tools, template)
        found: list[tuple[int, int, int, int]] = []  # (start, end) in text and in bare
        at, at_bare = head, head
        split_lead = 0  # the answer of a template that drops inline thinking keeps its own leading whitespace
        for core in cores:
            # a template that drops inline thinking (``content.split('</think>')[-1]``) prints the answer
            answer = core.rsplit("</think>", 1)[-1]
            for candidate in (core, answer.strip()):
                p, q = text.find(candidate, at), bare.find(candidate, at_bare)
                if candidate and p >= 0 and q >= 0:
                    if candidate is not core and not found:
                        lead = answer[: len(answer) - len(answer.lstrip())]
                        split_lead = next(
                            (n for n in range(len(lead), 0, -1) if text[max(head, p - n) : p] == lead[-n:]), 0
                        )
                    found.append((p, p + len(candidate), q, q + len(candidate)))
                    at, at_bare = p + len(candidate), q + len(candidate)
                    break  # else: a part the template does not print
        calls = _tool_call_start(hf, messages, i, tools, template, text, head) if message.get("tool_calls") else None
        if found:
            # the same markup before the first part in both renders: it ends at q; text has p - q more
            # characters there (the kept leading whitespace); after the last part, the rest of the
            # length difference is its kept trailing whitespace
            start = found[0][2] - split_lead
            _, e, _, f = found[-1]
            end = e + (len(text) - len(bare)) - (e - f)
            if calls is not None and calls < start:
                start = calls
        elif calls is not None:
            start = end = calls
        elif len(text) > len(bare) and _common_prefix(text, bare) >= head:
            # whitespace-only content the template keeps: it is the target (the bare render has none)
            start = _common_prefix(text, bare)
            end = start + len(text) - len(bare)
        else:
            start = end = head + len(text[head:]) - len(text[head:].lstrip())
        close = text.find(closing, end) if closing else -1
        turn = [(start, end)]
        blank = not found and calls is None and start == end  # an empty reply: its closing token alone
        if close >= 0 and (message.get("tool_calls") or blank or not text[end:close].strip()):
            turn = (
                [(start, close + len(closing))]
                if message.get("tool_calls")
                else [(start, end), (close, close + len(closing))]
            )  # type: ignore[arg-type]
        spans += turn
        cursor = max(b for _, b in turn)
    chars = _token_spans(hf, text, encoded["offset_mapping"], ids)
    return [int(any(a < e and s < b for a, b in spans if a < b)) for s, e in chars]


@dataclass
class Reference:
    ids: list[int] | None = None
    mask: list[int] | None = None
    error: str | None = None  # HF raised
    mask_error: str | None = None
    forged: bool = False
    dropped: bool = False


def reference(
    hf: Any,
    row: dict[str, Any],
    template: str | None,
    generation: str | None,
    specials: list[str],
    chatml: bool = False,
) -> Reference:
    ref = Reference()
    ref.forged = any(s in text for text in _record_texts(row, chatml) for s in specials)
    tools = row.get("tools") or None
    try:
        ref.ids = list(
            hf.apply_chat_template(
                row["messages"], tools=tools, chat_template=template, tokenize=True, return_dict=False
            )
        )
        rendered = _render(hf, row["messages"], tools, template)
    except Exception as err:  # any failure of the template: "HF refuses this record"
        ref.error = f"{type(err).__name__}: {err}"
        return ref
    cores = Counter(m["content"].strip() for m in row["messages"] if isinstance(m.get("content"), str))
    ref.dropped = any(core and rendered.count(core) < n for core, n in cores.items())
    try:
        if generation is not None:
            out = hf.apply_chat_template(
                row["messages"],
                tools=tools,
                chat_template=generation,
                tokenize=True,
                return_dict=True,
                return_assistant_tokens_mask=True,
            )
            assert list(out["input_ids"]) == ref.ids, "the generation template renders other ids"
            ref.mask = [int(m) for m in out["assistant_masks"]]
        else:
            ref.mask = prefix_mask(hf, row, template, ref.ids)
    except Exception as err:  # reported as "no mask reference", never silently passed
        ref.mask_error = f"{type(err).__name__}: {err}"
    return ref


# ---------------------------------------------------------------- cook and read back
def cook(tmp: Path, tokenizer: Path, chat_format: str, rows: list[dict[str, Any]]) -> Path:
    (tmp / "in").mkdir()
    write_jsonl(tmp / "in" / INPUT_NAME, rows)
    data = pipeline_dict(
        str(tmp / "in" / INPUT_NAME),
        str(tmp / "out"),
        tokenizer={
            "path": str(tokenizer),
            "chat_format": chat_format,
            "backend": os.environ.get("COOK_CONFORMANCE_BACKEND", "auto"),
        },
        packing={"seq_len": SEQ_LEN, "pad_multiple": 8, "buffer_size": "all", "overflow": "reject"},
        output={"shard_size": 64},
    )
    data["cooker"] = "openai"
    (tmp / "p.yaml").write_text(yaml.safe_dump(data))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):  # the run's summary table: shown only when the run fails
        code = main(["run", str(tmp / "p.yaml"), "--workers", "0", "--quiet"])
    assert code == 0, f"cook run exited {code}:\n{printed.getvalue()}"
    return tmp / "out"


def read_sequences(out: Path) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Every packed sequence as (source, ids, mask), read from the shards' tar members."""
    sequences = []
    for shard in sorted(out.glob(fmt.SHARD_PREFIX + "*.tar")):
        members: dict[str, dict[str, bytes]] = defaultdict(dict)
        with tarfile.open(shard) as tar:
            for info in tar.getmembers():
                key, _, member = info.name.partition(".")
                handle = tar.extractfile(info)
                assert handle is not None
                members[key][member] = handle.read()
        for key in sorted(members):
            pack = members[key]
            ids = np.load(io.BytesIO(pack[fmt.INPUT_IDS]), allow_pickle=False)
            mask = np.load(io.BytesIO(pack[fmt.LOSS_MASK]), allow_pickle=False)
            bounds = np.load(io.BytesIO(pack[fmt.CU_SEQLENS]), allow_pickle=False)
            starts = np.load(io.BytesIO(pack[fmt.CU_SEQLENS_PADDED]), allow_pickle=False)
            meta = json.loads(pack[fmt.META])
            for i, seq in enumerate(meta["sequences"]):
                a, n = int(starts[i]), int(bounds[i + 1] - bounds[i])
                sequences.append((seq["source"], ids[a : a + n], mask[a : a + n]))
    return sequences


# ---------------------------------------------------------------- comparison
@dataclass
class Tally:
    n: int = 0
    packed: int = 0
    rejected: int = 0
    exceptions: int = 0
    ids_ok: int = 0
    mask_ok: int = 0
    failed: int = 0


@dataclass
class Report:
    family: str
    commit: str = ""
    backend: str = ""
    mask_reference: str = ""
    records_in: int = 0
    packed: int = 0
    rejected: Counter = field(default_factory=Counter)
    exceptions: Counter = field(default_factory=Counter)
    compared: int = 0
    ids_exact: int = 0
    masks_exact: int = 0
    mask_compared: int = 0
    cross_record: list[str] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    kinds: dict[str, Tally] = field(default_factory=lambda: {k: Tally() for k in KINDS})
    accounting: list[str] = field(default_factory=list)

    def fail(self, kind: str, source: str, what: str, detail: str) -> None:
        self.kinds[kind].failed += 1
        self.failures.append({"source": source, "kind": kind, "what": what, "detail": detail})

    def table(self) -> str:
        lines = [
            f"[{self.family}] commit {self.commit}, backend {self.backend}, mask reference {self.mask_reference}\n"
            f"  records in {self.records_in}, "
            f"packed {self.packed}, rejected {sum(self.rejected.values())} {dict(self.rejected)}; "
            f"exceptions {dict(self.exceptions)}; compared {self.compared}: ids exact {self.ids_exact}, "
            f"masks exact {self.masks_exact}/{self.mask_compared}; cross-record {len(self.cross_record)}",
            f"  {'kind':<13}{'n':>4}{'packed':>8}{'rej':>5}{'exc':>5}{'ids_ok':>8}{'mask_ok':>8}{'fail':>6}",
        ]
        for kind, t in self.kinds.items():
            if t.n:
                lines.append(
                    f"  {kind:<13}{t.n:>4}{t.packed:>8}{t.rejected:>5}{t.exceptions:>5}"
                    f"{t.ids_ok:>8}{t.mask_ok:>8}{t.failed:>6}"
                )
        lines += [f"  ACCOUNTING: {a}" for a in self.accounting]
        lines += [f"  CROSS-RECORD: {c}" for c in self.cross_record[:SHOWN]]
        by_what = Counter(f["what"] for f in self.failures)
        if by_what:
            lines.append(f"  failures by type: {dict(by_what)}")
        shown: Counter = Counter()
        for f in self.failures:  # the first SHOWN of each failure type
            if shown[f["what"]] < SHOWN:
                shown[f["what"]] += 1
                lines.append(f"  {f['source']} ({f['kind']}) {f['what']}: {f['detail']}")
        return "\n".join(lines)


def _tokens(hf: Any, ids: list[int], at: int, before: int = 3, after: int = 5) -> str:
    window = ids[max(0, at - before) : at + after]
    return " ".join(repr(hf.decode([i])) for i in window) + (" ..." if at + after < len(ids) else " <end>")


def _first_diff(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def _contains(haystack: np.ndarray, needle: np.ndarray) -> bool:
    """Whether ``needle`` is a contiguous run of ``haystack`` (int32 arrays)."""
    if len(needle) == 0 or len(needle) > len(haystack):
        return False
    raw, sub = haystack.astype("<i4").tobytes(), needle.astype("<i4").tobytes()
    at = raw.find(sub)
    while at >= 0:
        if at % 4 == 0:
            return True
        at = raw.find(sub, at + 1)
    return False


def _unique_texts(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Message texts (30+ characters) that only one record holds: text -> record index."""
    owners: dict[str, set[int]] = defaultdict(set)
    for i, row in enumerate(rows):
        for m in row["messages"]:
            if isinstance(m.get("content"), str) and len(m["content"].strip()) >= 30:
                owners[m["content"].strip()].add(i)
    return {text: next(iter(who)) for text, who in owners.items() if len(who) == 1}


def check_family(family: Family, tokenizer: Path, tmp: Path, corpus: list[Record]) -> Report:
    from transformers import AutoTokenizer

    report = Report(family.id)
    report.commit = os.popen(f"git -C {REPO} rev-parse --short HEAD 2>/dev/null").read().strip()
    if os.popen(f"git -C {REPO} status --porcelain --untracked-files=no -- cook 2>/dev/null").read().strip():
        report.commit += "+dirty(cook)"
    hf = AutoTokenizer.from_pretrained(str(tokenizer))
    specials = _special_strings(hf)
    if family.chat_format == "chatml":
        missing = [t for t in CHATML_TOKENS if t not in specials]
        if missing:
            pytest.skip(f"{tokenizer.name} lacks the special ChatML token(s) {missing}")
        template, generation = CHATML_TEMPLATE, CHATML_TEMPLATE
    else:
        if not hf.chat_template:
            pytest.skip(f"{tokenizer} has no chat_template")
        template = None
        gen_file = tokenizer / "generation_template.jinja"
        generation = gen_file.read_text() if gen_file.is_file() else None
    rows = [r.row for r in corpus]
    assert len(rows) <= TOKENIZE_BATCH, "the corpus no longer fits one tokenize batch: records would not share a batch"
    refs = [reference(hf, row, template, generation, specials, family.chat_format == "chatml") for row in rows]

    out = cook(tmp, tokenizer, family.chat_format, rows)
    manifest = json.loads((out / fmt.MANIFEST_NAME).read_text())
    counts = manifest["counts"]
    backend = manifest.get("tokenizer_backend", "")
    report.backend = str(backend.get("name", backend) if isinstance(backend, dict) else backend)
    report.mask_reference = "{% generation %} template" if generation is not None else "prefix renders"
    rejects = [json.loads(line) for line in (out / fmt.REJECTS_NAME).read_text().splitlines() if line.strip()]
    sequences = read_sequences(out)

    def number(source: str) -> int:
        return int(source.rsplit("#", 1)[1]) - 1  # JSONL line numbers count from 1

    report.records_in = counts["records_in"]
    report.packed = len(sequences)
    if counts["records_in"] != len(rows):
        report.accounting.append(f"records_in {counts['records_in']} != {len(rows)} records written")
    if counts["records_in"] != counts["sources_packed"] + counts["records_rejected"]:
        report.accounting.append(
            f"records_in {counts['records_in']} != sources_packed {counts['sources_packed']} "
            f"+ records_rejected {counts['records_rejected']}"
        )
    if counts["sources_packed"] != len(sequences) or counts["records_rejected"] != len(rejects):
        report.accounting.append(
            f"manifest sources_packed {counts['sources_packed']}/records_rejected {counts['records_rejected']} "
            f"but {len(sequences)} sequences in the shards and {len(rejects)} rejects"
        )
    packed: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for source, ids, mask in sequences:
        k = number(source)
        if k in packed:
            report.accounting.append(f"{source} packed twice")
        packed[k] = (ids, mask)
    rejected = {number(r["source"]): r for r in rejects}
    for k in set(packed) & set(rejected):
        report.accounting.append(f"{INPUT_NAME}#{k + 1} both packed and rejected")
    for k in set(range(len(rows))) - set(packed) - set(rejected):
        report.accounting.append(f"{INPUT_NAME}#{k + 1} neither packed nor rejected")

    ref_arrays = {k: np.asarray(r.ids, dtype=np.int32) for k, r in enumerate(refs) if r.ids is not None}
    unique = _unique_texts(rows)
    for k, (record, ref) in enumerate(zip(corpus, refs, strict=True)):
        source, kind, tally = f"{INPUT_NAME}#{k + 1}", record.kind, report.kinds[record.kind]
        tally.n += 1
        got = packed.get(k)
        reject = rejected.get(k)
        if got is not None:
            tally.packed += 1
        if reject is not None:
            tally.rejected += 1
            report.rejected[reject["reason"]] += 1
        # no sequence holds another record's text (checked for every packed sequence, exceptions too)
        if got is not None:
            text = hf.decode(got[0].tolist(), skip_special_tokens=False)
            own = hf.decode(ref.ids, skip_special_tokens=False) if ref.ids is not None else ""
            leaks = [t for t, owner in unique.items() if owner != k and t in text and t not in own]
            if leaks:
                report.cross_record.append(f"{source} holds the text of another record: {leaks[0][:60]!r}")
        # documented exceptions
        if ref.forged:
            report.exceptions["forged"] += 1
            tally.exceptions += 1
            continue
        if ref.error is not None:
            if got is None and reject is not None and reject["reason"] == "template_error":
                report.exceptions["hf_raises"] += 1
                tally.exceptions += 1
            else:
                what = f"rejected {reject['reason']}" if reject else "packed"
                report.fail(
                    kind, source, "hf_raises_but_cook_" + what.split()[0], f"HF: {ref.error[:160]}; cook {what}"
                )
            continue
        if ref.dropped and got is None and reject is not None and reject["reason"] == "template_error":
            report.exceptions["dropped"] += 1
            tally.exceptions += 1
            continue
        assert ref.ids is not None
        if len(ref.ids) > SEQ_LEN:  # packing.overflow: reject
            if got is None and reject is not None and reject["reason"] == "too_long":
                report.exceptions["overflow"] += 1
                tally.exceptions += 1
            else:
                report.fail(kind, source, "overflow_not_rejected", f"{len(ref.ids)} > {SEQ_LEN} tokens: {reject}")
            continue
        if got is None:
            detail = f"{reject['reason']}: {str(reject.get('detail'))[:200]}" if reject else "missing"
            report.fail(kind, source, "rejected", detail)
            continue
        report.compared += 1
        ids, mask = got[0].tolist(), got[1].tolist()
        if ids != ref.ids:
            at = _first_diff(ids, ref.ids)
            others = [j for j, arr in ref_arrays.items() if j != k and len(arr) == len(ids) and arr.tolist() == ids]
            window = got[0][at : at + FRAGMENT]  # long enough not to match shared phrases of small vocabularies
            fragment = [
                j
                for j, arr in ref_arrays.items()
                if len(window) == FRAGMENT
                and j != k
                and not _contains(ref_arrays[k], window)
                and _contains(arr, window)
            ]
            if others or fragment:
                report.cross_record.append(
                    f"{source} ({kind}) ids {'equal' if others else 'hold a fragment of'} the reference of "
                    f"{INPUT_NAME}#{(others or fragment)[0] + 1} (first difference at {at})"
                )
            report.fail(
                kind,
                source,
                "ids",
                f"first difference at {at} of hf {len(ref.ids)}/cook {len(ids)}: "
                f"hf [{_tokens(hf, ref.ids, at)}] cook [{_tokens(hf, ids, at)}]",
            )
            continue
        tally.ids_ok += 1
        report.ids_exact += 1
        if ref.mask is None:
            report.fail(kind, source, "no_mask_reference", str(ref.mask_error)[:200])
            continue
        report.mask_compared += 1
        if mask != ref.mask:
            at = _first_diff(mask, ref.mask)
            report.fail(
                kind,
                source,
                "mask",
                f"first difference at {at} (token {hf.decode([ids[at]])!r}: hf {ref.mask[at]} cook {mask[at]}); "
                f"tokens [{_tokens(hf, ids, at)}] hf mask {ref.mask[max(0, at - 3) : at + 5]} "
                f"cook mask {mask[max(0, at - 3) : at + 5]}",
            )
            continue
        tally.mask_ok += 1
        report.masks_exact += 1
    return report


def _write_report(report: Report) -> None:
    folder = os.environ.get("COOK_CONFORMANCE_REPORT")
    if not folder:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    data = {
        "family": report.family,
        "commit": report.commit,
        "backend": report.backend,
        "mask_reference": report.mask_reference,
        "records_in": report.records_in,
        "packed": report.packed,
        "rejected": dict(report.rejected),
        "exceptions": dict(report.exceptions),
        "compared": report.compared,
        "ids_exact": report.ids_exact,
        "masks_exact": report.masks_exact,
        "mask_compared": report.mask_compared,
        "cross_record": report.cross_record,
        "accounting": report.accounting,
        "kinds": {k: vars(t) for k, t in report.kinds.items()},
        "failures": report.failures,
        "table": report.table(),
    }
    (Path(folder) / f"{report.family}.json").write_text(json.dumps(data, indent=1, ensure_ascii=False))


@pytest.fixture(scope="module")
def corpus() -> list[Record]:
    """The whole corpus, or the kinds in ``COOK_CONFORMANCE_KINDS`` (comma-separated; ``-name`` drops one)."""
    chosen = [k.strip() for k in os.environ.get("COOK_CONFORMANCE_KINDS", "").split(",") if k.strip()]
    keep = [k for k in chosen if not k.startswith("-")] or None
    return records(kinds=keep, exclude=[k[1:] for k in chosen if k.startswith("-")])


@pytest.fixture(scope="session")
def built_tokenizers(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the helper modules build their tokenizers (once per session, shared by both chat formats)."""
    return tmp_path_factory.mktemp("conformance-tokenizers")


# the real vocabularies (128k ids) cost cook ~4-7 s each to load (3 loads per run): slow
PARAMS = [pytest.param(f, id=f.id, marks=[pytest.mark.slow] if f.id.startswith("real-") else []) for f in FAMILIES]


@pytest.mark.parametrize("family", PARAMS)
def test_conformance(
    family: Family, corpus: list[Record], built_tokenizers: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    try:
        tokenizer = family.locate(request, built_tokenizers)
    except LookupError as err:
        pytest.skip(str(err))
    if not tokenizer.is_dir():
        pytest.skip(f"{tokenizer} is not a tokenizer directory")
    report = check_family(family, tokenizer, tmp_path, corpus)
    _write_report(report)
    exact = report.ids_exact == report.masks_exact == report.mask_compared == report.compared
    if report.accounting or report.cross_record or report.failures or not exact:
        pytest.fail("\n" + report.table(), pytrace=False)
    print(report.table())  # shown with -s / -rP


@pytest.mark.parametrize("name", ["llama3", "mistral", "gemma", "phi3"])
def test_prefix_reference_agrees_with_the_generation_templates(name: str) -> None:
    """The prefix-render mask (the reference for templates without ``{% generation %}``) equals
    ``return_assistant_tokens_mask`` where a generation template exists: the reference checks itself.
    (ChatML mode always has its generation template: its targets start at ``<think>``, markup.)"""
    from transformers import AutoTokenizer

    path = TEMPLATES / name
    hf = AutoTokenizer.from_pretrained(str(path))
    template = None
    generation = (path / "generation_template.jinja").read_text()
    specials = _special_strings(hf)
    checked, differ = 0, []
    for k, record in enumerate(records()):  # the whole corpus, whatever COOK_CONFORMANCE_KINDS says
        ref = reference(hf, record.row, template, generation, specials)
        if ref.forged or ref.error or ref.mask is None:
            continue
        assert ref.ids is not None
        mine = prefix_mask(hf, record.row, template, ref.ids)
        checked += 1
        if mine != ref.mask:
            at = _first_diff(mine, ref.mask)
            differ.append(
                f"#{k + 1} ({record.kind}) at {at} [{_tokens(hf, ref.ids, at)}] gen {ref.mask[at]} prefix {mine[at]}"
            )
    assert checked > 100 and not differ, "\n".join(differ[:10])


def test_the_corpus_is_deterministic_and_selectable() -> None:
    whole = records()
    assert json.dumps([r.row for r in whole]) == json.dumps([r.row for r in records()])
    assert len(whole) >= 150 and {r.kind for r in whole} == set(KINDS)
    only = records(kinds=["tool_calls", "nonnfc"])
    assert {r.kind for r in only} == {"tool_calls", "nonnfc"}
    assert [r.row for r in only if r.kind == "nonnfc"] == [r.row for r in whole if r.kind == "nonnfc"]
    assert "forged" not in {r.kind for r in records(exclude=["forged"])}
    shared = Counter(m["content"] for r in whole for m in r.row["messages"] if m["role"] == "system")
    assert max(shared.values()) >= 10  # the same system text across many records
    with pytest.raises(ValueError, match="unknown record kind"):
        records(kinds=["nope"])
