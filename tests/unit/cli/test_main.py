"""``cook.cli.main``: --version, a missing command, and Ctrl-C (one line, exit 130, no traceback)."""

from __future__ import annotations

import argparse

import pytest

from cook import __version__
from cook.cli import main as cli_main
from cook.cli.main import INTERRUPTED, main


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    captured = capsys.readouterr()
    assert captured.out == f"cook {__version__}\n" and captured.err == ""


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cook: error: usage:") and err.count("\n") == 1


def _interrupting_parser(command: str):
    def build() -> argparse.ArgumentParser:
        def handler(args: argparse.Namespace) -> int:
            raise KeyboardInterrupt

        parser = argparse.ArgumentParser()
        parser.set_defaults(handler=handler, command=command, version=False)
        return parser

    return build


@pytest.mark.parametrize(("command", "line"), [("run", INTERRUPTED), ("stats", "interrupted")])
def test_ctrl_c_is_one_line_and_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str, line: str
) -> None:
    monkeypatch.setattr(cli_main, "build_parser", _interrupting_parser(command))
    assert main([]) == 130
    captured = capsys.readouterr()
    assert captured.err == line + "\n" and captured.out == ""
    assert INTERRUPTED == "interrupted: rerun the same command to resume"
