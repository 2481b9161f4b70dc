"""``cook.cli.preflight``: media paths, the tokenizer directory and the output directory are checked
before any work, all problems in one line, each naming its key; nothing is created."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from cook.cli.preflight import output_problems, preflight
from cook.config import config_from_dict
from cook.errors import ConfigError
from tests.conftest import DEMO_TOKENIZER


def _config(tmp_path: Path, **input_keys: object):
    return config_from_dict(
        {
            "input": {"path": str(tmp_path / "in.jsonl"), **input_keys},
            "tokenizer": {"path": str(DEMO_TOKENIZER)},
            "output": {"dir": str(tmp_path / "out")},
        }
    )


def test_a_good_config_passes_and_creates_nothing(tmp_path: Path) -> None:
    (tmp_path / "media").mkdir()
    with tarfile.open(tmp_path / "store.tar", "w") as tar:
        info = tarfile.TarInfo("a.jpg")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"jpg"))
    preflight(_config(tmp_path, media_root=str(tmp_path / "media"), media_stores=[str(tmp_path / "store.tar")]))
    assert sorted(os.listdir(tmp_path)) == ["media", "store.tar"]


def test_media_paths_are_checked_even_for_text(tmp_path: Path) -> None:
    (tmp_path / "a_file").write_text("x")
    config = _config(
        tmp_path, media_root=str(tmp_path / "nowhere"), media_stores=[str(tmp_path / "a_file"), "/no/store"]
    )
    with pytest.raises(ConfigError) as info:
        preflight(config)
    message = str(info.value)
    assert "\n" not in message
    assert f"input.media_root: {str(tmp_path / 'nowhere')!r} does not exist" in message
    assert "input.media_stores[1]: '/no/store' does not exist" in message
    assert (
        f"input.media_stores[0]: {str(tmp_path / 'a_file')!r} is neither a directory nor an uncompressed tar" in message
    )
    assert not (tmp_path / "out").exists()


def test_not_a_tokenizer_directory(tmp_path: Path) -> None:
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "vocab.txt").write_text("a\n")
    config = config_from_dict(
        {
            "input": {"path": "in.jsonl"},
            "tokenizer": {"path": str(tmp_path / "tok")},
            "output": {"dir": str(tmp_path / "out")},
        }
    )
    with pytest.raises(ConfigError) as info:
        preflight(config)
    assert str(info.value) == (
        f"tokenizer.path: {str(tmp_path / 'tok')!r} is not a tokenizer directory: "
        "no tokenizer.json / tokenizer_config.json"
    )
    assert not (tmp_path / "out").exists()


def test_an_unloadable_tokenizer_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "tokenizer.json").write_text("{not json")
    config = config_from_dict(
        {
            "input": {"path": "in.jsonl"},
            "tokenizer": {"path": str(tmp_path / "tok")},
            "output": {"dir": str(tmp_path / "out")},
        }
    )
    with pytest.raises(ConfigError, match=r"tokenizer\.path: "):
        preflight(config)
    assert not (tmp_path / "out").exists()


def test_output_directory(tmp_path: Path) -> None:
    assert output_problems(str(tmp_path / "new" / "deeper")) == []
    assert output_problems(str(tmp_path)) == []
    assert os.listdir(tmp_path) == []  # the probe leaves nothing behind
    (tmp_path / "file").write_text("x")
    assert output_problems(str(tmp_path / "file")) == [
        f"output.dir (--output): {str(tmp_path / 'file')!r} exists and is not a directory"
    ]
    (problem,) = output_problems(str(tmp_path / "file" / "sub"))
    assert "cannot be created" in problem and "is not a directory" in problem
    (problem,) = output_problems("/proc/x")
    assert problem.startswith("output.dir (--output): '/proc/x' cannot be created in '/proc'")
