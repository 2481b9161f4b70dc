"""Tokenizer backends: data text -> ids, with HF ``encode_special_tokens`` semantics, one batch per call.

    choose_encoder(requested, tokenizer_json, reference) -> (Encoder, BackendChoice)

``hf`` is the ``tokenizers`` library (the reference). ``gigatoken`` is a SIMD BPE encoder for both
byte-level BPE (GPT-2 / Llama-3 / Qwen style) and SentencePiece-style BPE with byte fallback
(Llama-2 / Mistral style). It is loaded from a copy of ``tokenizer.json`` whose *special* added tokens
are removed: an encoder that does not know ``<|im_start|>`` as a token can only spell it as text,
which is what HF's ``encode_special_tokens=True`` does. Non-special added tokens stay, because HF
still extracts those.

A fast backend is used only after a self-check: the probe set below (and, per job, a sample of the
first unit's texts) encoded by both backends must give the same ids. ``auto`` falls back to ``hf``
with one line on stderr; naming the fast backend explicitly makes a failed check a ``ConfigError``
that quotes the first differing string.

gigatoken keeps a pretoken cache that grows with every distinct word it has seen; ``reset()``
rebuilds the encoder (a few ms) so a worker can bound it per unit.
"""

from __future__ import annotations

import itertools
import json
import sys
from dataclasses import asdict, dataclass
from importlib import metadata
from typing import Any, Literal, Protocol

import numpy as np

from cook.errors import ConfigError
from cook.format import CONTROL_TOKENS

BackendName = Literal["auto", "hf", "gigatoken"]
FAST_BACKEND = "gigatoken"
SAMPLE_TEXTS = 512  # texts of the first unit compared by the self-check

PROBES: tuple[str, ...] = (
    "",
    " ",
    "  ",
    "\n",
    "\n\n\n",
    "\t\t  \n \r\n\r\n",
    "   leading and trailing   ",
    "Hello, world! It's a test; isn't it? (yes) [no] {maybe}",
    "0 1 12 123 1234 12345 123456789012345678901234567890 3.14159 -42 1e10 0x1F",
    "naïve café résumé Ångström façade Straße ÆØÅ",
    "e\u0301 A\u030a ﬁ ｆｕｌｌｗｉｄｔｈ ① ℌ ǅ ß İ",  # what a normalizer (NFC, NFKC, lowercase) would change
    "Ελληνικά Русский текст עברית العربية हिन्दी ภาษาไทย",
    "日本語のテキストと漢字、中文文本，한국어 텍스트",
    "😀👍🏽👨‍👩‍👧‍👦🏳️‍🌈 🇯🇵 ❤️‍🔥",
    "\u200b\u200c\u200d\ufeff\u00a0\u2028\u2029\u3000",
    "\x00\x01\x1f\x7f",
    "a" * 3000,
    "supercalifragilisticexpialidocious" * 40,
    "🙂" * 500,
    "x" + " " * 400 + "y",
    "def f(x):\n    return {'k': [1, 2, 3]}  # comment\n",
    "https://example.com/path?q=1&r=two#frag user@example.org",
    "<|im_start|>user\nforged<|im_end|>\n<think>no</think><image><img></img>",
    "<<|im_start|>> <|im_start <im_start|> <|pad|> <unk> <s> </s> <0x41>",
    "▁leading▁metaspace ▁ ▁▁",
    *CONTROL_TOKENS,
    *(f"a{token}b" for token in CONTROL_TOKENS),
)


FlatIds = tuple[np.ndarray, np.ndarray]  # ids int32 [N], offsets int64 [len(texts) + 1]: text i is ids[o[i]:o[i+1]]


def flat_from_lists(rows: list[list[int]]) -> FlatIds:
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)  # int64 [T + 1]
    np.cumsum([len(r) for r in rows], out=offsets[1:])
    ids = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int32, count=int(offsets[-1]))  # int32 [N]
    return ids, offsets


class Encoder(Protocol):
    """Data text -> ids, never producing a special token."""

    name: BackendName
    version: str

    def encode_batch(self, texts: list[str]) -> list[list[int]]: ...

    def encode_flat(self, texts: list[str]) -> FlatIds: ...

    def reset(self, force: bool = False) -> None: ...


class HFEncoder:
    """``tokenizers.Tokenizer`` with ``encode_special_tokens`` set; the reference backend."""

    name: BackendName = "hf"

    def __init__(self, backend: Any) -> None:
        self._backend = backend
        self.version = metadata.version("tokenizers")

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return [e.ids for e in self._backend.encode_batch_fast(texts, add_special_tokens=False)]

    def encode_flat(self, texts: list[str]) -> FlatIds:
        return flat_from_lists(self.encode_batch(texts))

    def reset(self, force: bool = False) -> None:
        """Nothing grows per text in ``tokenizers``' BPE beyond its bounded cache."""


def without_special_added_tokens(tokenizer_json: str) -> str:
    data = json.loads(tokenizer_json)
    data["added_tokens"] = [t for t in data.get("added_tokens") or [] if not t.get("special")]
    return json.dumps(data, ensure_ascii=False)


RESET_CHARS = 8_000_000  # text through gigatoken between two rebuilds: its cache then holds ~100 MiB at worst


class GigatokenEncoder:
    """gigatoken on the tokenizer without its special added tokens; single-threaded (one per worker)."""

    name: BackendName = "gigatoken"

    def __init__(self, tokenizer_json: str) -> None:
        import awkward  # noqa: F401
        import gigatoken

        # gigatoken imports awkward on its first encode_batch and, when that import fails (an
        # interrupt landing in it), returns plain lists instead; importing it here keeps a Ctrl-C
        # during start-up a KeyboardInterrupt.
        self._json = without_special_added_tokens(tokenizer_json)
        self._load = gigatoken.Tokenizer.from_json
        self.version = metadata.version("gigatoken")
        self._tokenizer = self._load(self._json)
        self._chars = 0  # encoded since the last rebuild

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        self._chars += sum(map(len, texts))
        return self._tokenizer.encode_batch_list(texts, parallel=False)

    def encode_flat(self, texts: list[str]) -> FlatIds:
        """One flat id buffer and its offsets, straight from gigatoken's awkward result (no per-text
        Python lists: 5x cheaper than ``encode_batch`` on the demo chats)."""
        if not texts:
            return np.zeros(0, dtype=np.int32), np.zeros(1, dtype=np.int64)
        self._chars += sum(map(len, texts))
        result = self._tokenizer.encode_batch(texts, parallel=False)
        if isinstance(result, list):  # gigatoken's fallback when awkward is unusable
            return flat_from_lists(result)
        layout = result.layout
        offsets = np.asarray(layout.offsets, dtype=np.int64)  # int64 [T + 1]
        ids = np.asarray(layout.content.data)[offsets[0] : offsets[-1]]  # uint32 [N]
        return ids.view(np.int32), offsets - offsets[0]

    def reset(self, force: bool = False) -> None:
        """Drop the pretoken cache (it grows with every distinct word) by rebuilding the encoder, once
        ``RESET_CHARS`` have been encoded since the last rebuild (or when forced): a rebuild is not free,
        so it is not done after every unit (docs/SCALING.md)."""
        if force or self._chars >= RESET_CHARS:
            self._tokenizer = self._load(self._json)
            self._chars = 0


@dataclass(frozen=True)
class BackendChoice:
    """What the manifest records under ``tokenizer_backend``."""

    requested: str
    name: BackendName
    version: str
    self_check: str  # "passed" | "failed" | "unsupported" | "not_run"
    strings_checked: int
    reason: str  # why the fast backend is not used ("" when it is, or when hf was asked for)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def first_mismatch(reference: Encoder, candidate: Encoder, texts: list[str]) -> str | None:
    """The first text whose ids differ between the two encoders, or None."""
    for text, want, got in zip(texts, reference.encode_batch(texts), candidate.encode_batch(texts), strict=True):
        if list(want) != list(got):
            return text
    return None


def _short(text: str) -> str:
    return repr(text if len(text) <= 100 else text[:97] + "...")


def _load_fast(tokenizer_json: str) -> tuple[Encoder | None, str]:
    try:
        return GigatokenEncoder(tokenizer_json), ""
    except ImportError:
        return None, f"{FAST_BACKEND} is not installed (pip install 'gigatoken>=0.10,<0.11')"
    except (ValueError, TypeError, KeyError, RuntimeError) as err:  # the loader rejects the tokenizer.json
        return None, f"{FAST_BACKEND} does not support this tokenizer ({str(err).splitlines()[0][:120]})"


def choose_encoder(
    requested: str, tokenizer_json: str, reference: HFEncoder, extra_probes: tuple[str, ...] = ()
) -> tuple[Encoder, BackendChoice]:
    """Pick the encoder for ``tokenizer.backend``; ``auto`` falls back to hf with one stderr line."""
    if requested == "hf":
        return reference, BackendChoice("hf", "hf", reference.version, "not_run", 0, "")
    fast, reason = _load_fast(tokenizer_json)
    added = [str(t["content"]) for t in json.loads(tokenizer_json).get("added_tokens") or []]
    texts = [*PROBES, *added, *(f" {t}x" for t in added), *extra_probes]
    if fast is None:
        return _fallback(requested, reference, "unsupported", 0, reason)
    differing = first_mismatch(reference, fast, texts)
    if differing is not None:
        why = f"{FAST_BACKEND} self-check failed: ids differ from hf on the probe string {_short(differing)}"
        return _fallback(requested, reference, "failed", len(texts), why)
    return fast, BackendChoice(requested, fast.name, fast.version, "passed", len(texts), "")


def _fallback(
    requested: str, reference: HFEncoder, result: str, checked: int, reason: str
) -> tuple[Encoder, BackendChoice]:
    if requested != "auto":
        raise ConfigError(f"tokenizer.backend: {requested!r} cannot be used: {reason}; set tokenizer.backend: hf")
    print(f"cook: tokenizer.backend auto uses hf: {reason}", file=sys.stderr)
    return reference, BackendChoice(requested, "hf", reference.version, result, checked, reason)


def check_sample(
    choice: BackendChoice, reference: Encoder, fast: Encoder, texts: list[str]
) -> tuple[Encoder, BackendChoice]:
    """The second half of the self-check: the job's own first-unit texts, once, before any shard."""
    if fast is reference or not texts:
        return fast, choice
    sample = texts[:SAMPLE_TEXTS]
    differing = first_mismatch(reference, fast, sample)
    checked = choice.strings_checked + len(sample)
    if differing is None:
        return fast, BackendChoice(choice.requested, fast.name, fast.version, "passed", checked, "")
    why = f"{FAST_BACKEND} self-check failed: ids differ from hf on the first unit's text {_short(differing)}"
    assert isinstance(reference, HFEncoder)
    return _fallback(choice.requested, reference, "failed", checked, why)
