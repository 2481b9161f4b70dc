"""``cook run --workers auto`` (the default): in-process for a job of one work unit or under
``AUTO_RAY_MIN_BYTES`` of input, Ray otherwise, said on one stderr line; ``--workers N`` and a Ray
address are taken as given. No test here starts Ray: the choice is a function of the unit plan."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import yaml

from cook.cli.main import main
from cook.cli.run_cmd import AUTO_RAY_MIN_BYTES, ExecutorChoice, choose_executor, pick_workers
from cook.config import config_from_dict
from cook.runner.plan import plan_units
from tests.conftest import pipeline_dict, write_jsonl

ONE_UNIT = "cook: in-process (1 work unit; Ray starts only for jobs of 2+ units and 256 MiB or more)\n"


def _rows(n: int) -> list[dict]:
    return [
        {
            "messages": [
                {"role": "user", "content": f"question {i} " * (i % 7 + 1)},
                {"role": "assistant", "content": f"answer {i}"},
            ]
        }
        for i in range(n)
    ]


@pytest.fixture
def chats(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "chats.jsonl", _rows(120))


def test_one_unit_is_in_process_however_large() -> None:
    assert choose_executor(1, 10 * AUTO_RAY_MIN_BYTES, 2) == ExecutorChoice(0, ONE_UNIT[6:-1])
    assert choose_executor(0, 0, 2).workers == 0


def test_small_input_is_in_process() -> None:
    assert choose_executor(3, AUTO_RAY_MIN_BYTES - 1, 2) == ExecutorChoice(
        0, "in-process (3 work units, 256.0 MiB of input; Ray starts only for jobs of 256 MiB or more)"
    )


def test_large_multi_unit_input_is_ray_with_the_configured_actors() -> None:
    assert choose_executor(2, AUTO_RAY_MIN_BYTES, 4) == ExecutorChoice(
        4, "Ray (2 work units, 256.0 MiB of input; in-process below 2 units or 256 MiB)"
    )
    assert choose_executor(40, 1280 * 2**20, 2).workers == 2


def _config(chats: Path, tmp_path: Path, **ray: object):
    return config_from_dict(pipeline_dict(str(chats), str(tmp_path / "out"), ray={"num_actors": 3, **ray}))


def test_explicit_workers_and_addresses_are_taken_as_given(chats: Path, tmp_path: Path, capsys) -> None:
    config = _config(chats, tmp_path)
    assert pick_workers(0, config, quiet=False) == 0
    assert pick_workers(1, config, quiet=False) == 3  # --workers N reaches here as ray.num_actors (_overrides)
    assert pick_workers(2, config, quiet=False) == 3
    for address in ("127.0.0.1:6379", "auto", "local"):
        assert pick_workers("auto", _config(chats, tmp_path, address=address), quiet=False) == 3
    assert capsys.readouterr().err == ""  # the choice was the user's: nothing to explain
    assert pick_workers("auto", config, quiet=False) == 0
    assert capsys.readouterr().err == ONE_UNIT


def test_small_multi_unit_input_through_the_plan(chats: Path, tmp_path: Path, capsys) -> None:
    config = config_from_dict(pipeline_dict(str(chats), str(tmp_path / "out"), input={"unit_bytes": 2000}))
    assert pick_workers("auto", config, quiet=True) == 0
    assert capsys.readouterr().err == ""  # --quiet
    assert pick_workers("auto", config, quiet=False) == 0
    units = len(plan_units(config.input))
    assert units >= 2 and capsys.readouterr().err == (
        f"cook: in-process ({units} work units, {chats.stat().st_size / 2**20:.1f} MiB of input; "
        "Ray starts only for jobs of 256 MiB or more)\n"
    )


def _shards(out: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(out.glob("*.tar"))}


def _run(chats: Path, tmp_path: Path, name: str, *extra: str) -> int:
    data = pipeline_dict(str(chats), str(tmp_path / name), packing={"buffer_size": 16})
    (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(data))
    return main(["run", str(tmp_path / f"{name}.yaml"), "--json", *extra])


def test_auto_shards_are_byte_identical_to_workers_0(chats: Path, tmp_path: Path, capsys) -> None:
    assert _run(chats, tmp_path, "auto") == 0
    captured = capsys.readouterr()
    assert captured.err.startswith(ONE_UNIT) and json.loads(captured.out)["driver_received_bytes"] == 0
    assert _run(chats, tmp_path, "zero", "--workers", "0") == 0
    assert "in-process (" not in capsys.readouterr().err
    shards = _shards(tmp_path / "auto")
    assert len(shards) >= 2 and shards == _shards(tmp_path / "zero")


@pytest.mark.parametrize("value", ["many", "1.5", "-1"])
def test_a_bad_workers_value_is_exit_2(chats: Path, tmp_path: Path, value: str, capsys) -> None:
    assert _run(chats, tmp_path, "bad", "--workers", value) == 2
    assert not (tmp_path / "bad").exists()
