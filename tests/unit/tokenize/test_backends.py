"""Issue 14: the fast tokenizer backend gives the hf backend's ids, id for id, on both tokenizer
families (byte-level BPE: the demo tokenizer; SentencePiece-style BPE with byte fallback: the sp
tokenizer), and ``auto`` falls back to hf, saying why in one stderr line, when it cannot be used."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cook.config import config_from_dict
from cook.errors import ConfigError
from cook.format import CONTROL_TOKENS
from cook.runner.plan import plan_units
from cook.runner.worker import first_unit_texts
from cook.tokenize import backends
from cook.tokenize.tokenizer import ChatTokenizer
from tests.adversarial.corpus import build_corpus
from tests.conftest import DEMO_DATA, DEMO_TOKENIZER, REPO

SP_TOKENIZER = REPO / "tests" / "assets" / "sp_tokenizer"
TOKENIZERS = {"demo": DEMO_TOKENIZER, "sp": SP_TOKENIZER}

gigatoken = pytest.importorskip("gigatoken", reason="gigatoken (the fast backend) is not installed")


@pytest.fixture(scope="module", params=sorted(TOKENIZERS))
def pair(request: pytest.FixtureRequest) -> tuple[ChatTokenizer, ChatTokenizer]:
    """(hf, gigatoken) ChatTokenizers of one tokenizer directory."""
    path = str(TOKENIZERS[request.param])
    fast = ChatTokenizer(path, "gigatoken")
    assert fast.backend.name == "gigatoken" and fast.backend.self_check == "passed"
    return ChatTokenizer(path, "hf"), fast


def _texts_of(input_path: Path, **input_keys: object) -> list[str]:
    config = config_from_dict(
        {"input": {"path": str(input_path), **input_keys}, "tokenizer": {"path": str(DEMO_TOKENIZER)}}
    )
    texts = [t for unit in plan_units(config.input) for t in first_unit_texts(config, unit, limit=10**9)]
    assert len(texts) > 20, "the sample helper found no text: the comparison below would be vacuous"
    return texts


def _assert_same_ids(hf: ChatTokenizer, fast: ChatTokenizer, texts: list[str]) -> None:
    want, got = hf.encode_texts(texts), fast.encode_texts(texts)
    for text, a, b in zip(texts, want, got, strict=True):
        assert list(b) == list(a), text


def test_demo_data_ids_match(pair: tuple[ChatTokenizer, ChatTokenizer]) -> None:
    _assert_same_ids(*pair, _texts_of(DEMO_DATA))


def test_adversarial_corpus_ids_match(pair: tuple[ChatTokenizer, ChatTokenizer], tmp_path: Path) -> None:
    build_corpus(tmp_path)
    _assert_same_ids(*pair, _texts_of(tmp_path / "data", max_record_bytes=2_000_000))


def test_probe_strings_and_control_tokens_match(pair: tuple[ChatTokenizer, ChatTokenizer]) -> None:
    hf, fast = pair
    _assert_same_ids(hf, fast, list(backends.PROBES))
    control = set(hf.control_ids.values())
    for ids in fast.encode_texts(list(CONTROL_TOKENS)):
        assert not control & set(ids)  # data text never becomes a control token


PIECES = st.sampled_from(
    [
        *CONTROL_TOKENS,
        "<|pad|>",
        "<pad>",
        "<0x41>",
        "▁",
        " ",
        "  ",
        "\n",
        "\t",
        "\r\n",
        "\u3000",
        "\u00a0",
        "\u200d",
        "😀",
        "👍🏽",
        "🇯🇵",
        "日本語",
        "中文",
        "한국어",
        "é",
        "e\u0301",
        "Straße",
        "0",
        "123",
        "3.14",
        "the",
        " answer",
        "Hello",
        "ing",
        "'s",
        "://",
        "{",
        "}",
    ]
)
FUZZ_TEXT = st.one_of(
    st.lists(PIECES, max_size=30).map("".join),
    st.text(max_size=60),
    st.lists(st.one_of(PIECES, st.text(max_size=5)), max_size=20).map("".join),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(FUZZ_TEXT, min_size=1, max_size=8))
def test_fuzz_ids_match(pair: tuple[ChatTokenizer, ChatTokenizer], texts: list[str]) -> None:
    _assert_same_ids(*pair, texts)


def test_reset_keeps_ids(pair: tuple[ChatTokenizer, ChatTokenizer]) -> None:
    hf, fast = pair
    texts = ["reset the pretoken cache", "日本語 😀", "a" * 700]
    before = fast.encode_texts(texts)
    fast.reset_backend_cache(force=True)
    assert fast.encode_texts(texts) == before == hf.encode_texts(texts)


def test_encoder_rebuilds_only_after_reset_chars(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker asks for a reset after every unit; the encoder is rebuilt (its cache dropped) only
    once RESET_CHARS have gone through it since the last rebuild, or when forced."""
    encoder = backends.GigatokenEncoder((DEMO_TOKENIZER / "tokenizer.json").read_text())
    monkeypatch.setattr(backends, "RESET_CHARS", 20)
    first = encoder._tokenizer
    encoder.encode_batch(["0123456789"])
    encoder.reset()
    assert encoder._tokenizer is first  # 10 chars < 20
    encoder.encode_flat(["0123456789"])
    encoder.reset()
    second = encoder._tokenizer
    assert second is not first  # 20 chars: rebuilt, and the count starts again
    encoder.reset()
    assert encoder._tokenizer is second
    encoder.reset(force=True)
    assert encoder._tokenizer is not second


def test_encode_flat_takes_gigatokens_list_fallback() -> None:
    """gigatoken returns plain lists when it cannot use awkward (an interrupted import did that and
    exited 1 instead of 130); encode_flat gives the same flat ids either way."""
    encoder = backends.GigatokenEncoder((DEMO_TOKENIZER / "tokenizer.json").read_text())
    texts = ["hello world", "", "日本語 😀"]
    want_ids, want_offsets = encoder.encode_flat(texts)

    class ListsOnly:
        def __init__(self, inner: object) -> None:
            self.inner = inner

        def encode_batch(self, texts: list[str], parallel: bool) -> list[list[int]]:
            return self.inner.encode_batch_list(texts, parallel=parallel)  # type: ignore[attr-defined]

    encoder._tokenizer = ListsOnly(encoder._tokenizer)
    ids, offsets = encoder.encode_flat(texts)
    assert ids.tolist() == want_ids.tolist() and offsets.tolist() == want_offsets.tolist()


def test_sp_tokenizer_has_byte_fallback() -> None:
    tok = ChatTokenizer(str(SP_TOKENIZER), "hf")
    vocab = tok._backend.get_vocab(with_added_tokens=False)
    assert [vocab[f"<0x{b:02X}>"] for b in range(256)] == list(range(4, 260))
    (ids,) = tok.encode_texts(["😀"])  # not in the trained alphabet: its four UTF-8 bytes
    assert ids[-4:] == [4 + b for b in "😀".encode()]
    assert tok.decode(ids).strip() == "😀"


# ---- auto falls back, explicit fails -----------------------------------------------------------


def _corrupt_on(monkeypatch: pytest.MonkeyPatch, needle: str) -> None:
    """Make the fast backend get one id wrong for any text containing ``needle``."""
    real = backends.GigatokenEncoder.encode_batch

    def wrong(self: backends.GigatokenEncoder, texts: list[str]) -> list[list[int]]:
        return [[*ids, 7] if needle in text else ids for text, ids in zip(texts, real(self, texts), strict=True)]

    monkeypatch.setattr(backends.GigatokenEncoder, "encode_batch", wrong)


def test_probe_mismatch_auto_falls_back(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    _corrupt_on(monkeypatch, "日本語")
    tok = ChatTokenizer(str(SP_TOKENIZER), "auto")
    assert (tok.backend.name, tok.backend.self_check) == ("hf", "failed")
    (line,) = capsys.readouterr().err.splitlines()
    assert "self-check failed" in line and "日本語" in line


def test_probe_mismatch_explicit_is_config_error_naming_the_string(monkeypatch: pytest.MonkeyPatch) -> None:
    _corrupt_on(monkeypatch, "日本語")
    with pytest.raises(ConfigError, match="probe string '日本語"):
        ChatTokenizer(str(DEMO_TOKENIZER), "gigatoken")


def test_first_unit_sample_is_checked(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    _corrupt_on(monkeypatch, "zebra crossing")  # in no probe string: only the job's own text finds it
    auto = ChatTokenizer(str(DEMO_TOKENIZER), "auto")
    assert auto.backend.name == "gigatoken"
    auto.check_sample(["fine text", "a zebra crossing here"])
    assert (auto.backend.name, auto.backend.self_check) == ("hf", "failed")
    assert "first unit's text 'a zebra crossing here'" in capsys.readouterr().err
    assert auto.encode_texts(["a zebra crossing here"]) == ChatTokenizer(str(DEMO_TOKENIZER)).encode_texts(
        ["a zebra crossing here"]
    )
    explicit = ChatTokenizer(str(DEMO_TOKENIZER), "gigatoken")
    with pytest.raises(ConfigError, match="first unit's text 'a zebra crossing here'"):
        explicit.check_sample(["a zebra crossing here"])


def test_hf_backend_runs_no_check() -> None:
    tok = ChatTokenizer(str(DEMO_TOKENIZER), "hf")
    assert tok.backend.to_dict() == {
        "requested": "hf",
        "name": "hf",
        "version": tok.backend.version,
        "self_check": "not_run",
        "strings_checked": 0,
        "reason": "",
    }


def _unflatten(flat: tuple) -> list[list[int]]:
    ids, offsets = flat
    assert ids.dtype == np.int32 and offsets.dtype == np.int64 and offsets[0] == 0 and offsets[-1] == len(ids)
    return [ids[a:b].tolist() for a, b in itertools.pairwise(offsets.tolist())]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(FUZZ_TEXT, max_size=8))
def test_flat_ids_match_lists(pair: tuple[ChatTokenizer, ChatTokenizer], texts: list[str]) -> None:
    hf, fast = pair
    want = hf.encode_texts(texts)
    assert _unflatten(fast.encode_flat(texts)) == want == _unflatten(hf.encode_flat(texts))


def _wordpiece_dir(root: Path) -> Path:
    """A tokenizer gigatoken does not support (WordPiece), with everything else cook needs."""
    import json

    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1, "##b": 2, "hi": 3}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens([*CONTROL_TOKENS, "<pad>"])
    root.mkdir()
    tok.save(str(root / "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "pad_token": "<pad>", "unk_token": "[UNK]"}
    (root / "tokenizer_config.json").write_text(json.dumps(config))
    return root


def test_unsupported_tokenizer_falls_back_or_fails(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = str(_wordpiece_dir(tmp_path / "wordpiece"))
    auto = ChatTokenizer(path, "auto")
    assert (auto.backend.name, auto.backend.self_check) == ("hf", "unsupported")
    (line,) = capsys.readouterr().err.splitlines()
    assert "does not support this tokenizer" in line and "WordPiece" in line
    with pytest.raises(ConfigError, match="does not support this tokenizer"):
        ChatTokenizer(path, "gigatoken")
