"""``--workers`` of ``cook run`` and ``cook repack``: ``auto`` or an integer >= 0; anything else is a
one-line usage error (exit 2) before any work."""

from __future__ import annotations

import pytest

from cook.cli.main import main


@pytest.mark.parametrize("command", ["run", "repack"])
@pytest.mark.parametrize(
    ("value", "message"), [("-1", "must be >= 0"), ("two", "expected auto or an integer, got 'two'")]
)
def test_bad_workers_is_one_usage_line(
    command: str, value: str, message: str, capsys: pytest.CaptureFixture[str], tmp_path
) -> None:
    args = [command, str(tmp_path / "src"), "--workers", value]
    if command == "repack":
        args += ["--output", str(tmp_path / "out")]
    assert main(args) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("cook: error: usage:") and message in err[0], err
    assert not (tmp_path / "out").exists()
