"""Issue 14: without gigatoken installed, ``auto`` falls back to hf with one stderr line and an
explicit ``gigatoken`` is a config error. Runs whether or not gigatoken is installed (the import is
made to fail)."""

from __future__ import annotations

import sys

import pytest

from cook.errors import ConfigError
from cook.tokenize.tokenizer import ChatTokenizer
from tests.conftest import DEMO_TOKENIZER


def _without_gigatoken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gigatoken", None)  # `import gigatoken` raises ImportError


def test_auto_falls_back_when_not_installed(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    _without_gigatoken(monkeypatch)
    tok = ChatTokenizer(str(DEMO_TOKENIZER), "auto")
    assert (tok.backend.name, tok.backend.self_check) == ("hf", "unsupported")
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "auto uses hf" in err[0] and "not installed" in err[0]
    assert tok.encode_texts(["still works"]) == ChatTokenizer(str(DEMO_TOKENIZER), "hf").encode_texts(["still works"])


def test_explicit_backend_not_installed_is_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _without_gigatoken(monkeypatch)
    with pytest.raises(ConfigError, match=r"tokenizer\.backend: 'gigatoken' cannot be used: .*not installed"):
        ChatTokenizer(str(DEMO_TOKENIZER), "gigatoken")
