"""Shared fixtures. All test data is generated here or by the tests; assets/ holds only the demo
tokenizer and the demo dataset (built by tests/assets/build_demo_assets.py)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parents[1]
DEMO_TOKENIZER = REPO / "tests" / "assets" / "demo_tokenizer"
DEMO_DATA = REPO / "tests" / "assets" / "demo_data"

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
# A shell starts a background job (``.ci/run &``, ``nohup``) with SIGINT ignored, and an ignored
# signal stays ignored in every process it starts: the `cook run` children of the Ctrl-C tests would
# never see the interrupt they are sent. With Python's own handler here, they start with the default.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# No timed assertions: Hypothesis's default 200 ms deadline per example fails property tests on a
# loaded machine (two xdist workers beside other jobs), not on wrong behaviour.
settings.register_profile("cook", deadline=None)
settings.load_profile("cook")


@pytest.fixture(scope="session")
def tokenizer_path() -> str:
    return str(DEMO_TOKENIZER)


@pytest.fixture(scope="session")
def chat_tokenizer(tokenizer_path: str):
    from cook.tokenize import ChatTokenizer

    return ChatTokenizer(tokenizer_path)


@pytest.fixture(scope="session")
def hf_tokenizer(tokenizer_path: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tokenizer_path)


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    """Rows that are ``bytes`` are written verbatim (for malformed lines)."""
    with open(path, "wb") as handle:
        for row in rows:
            data = row if isinstance(row, bytes) else json.dumps(row).encode()
            handle.write(data + b"\n")
    return path


def pipeline_dict(input_path: str, out_dir: str, **sections: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = {
        "input": {"path": input_path},
        "tokenizer": {"path": str(DEMO_TOKENIZER)},
        "packing": {"seq_len": 1024, "pad_multiple": 8, "buffer_size": "all"},
        "output": {"dir": out_dir, "shard_size": 4},
        "ray": {"num_actors": 2, "cpus_per_actor": 0.5},
    }
    for name, values in sections.items():
        data.setdefault(name, {}).update(values) if isinstance(values, dict) else data.__setitem__(name, values)
    return data


@pytest.fixture(scope="session")
def ray_session():
    """One embedded local Ray for the tests that need it, shut down at the end."""
    import ray

    from cook.runner.ray_connect import start_ray, stop_ray

    started = start_ray(None, num_cpus=2)
    yield ray
    if started:
        stop_ray()  # and its watchdog


@pytest.fixture(scope="module")
def torch_one_thread():
    """Tiny models: one intra-op thread is faster than two contending ones on a busy 2-core machine."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def family_tokenizer(tmp_path_factory: pytest.TempPathFactory):
    """``family_tokenizer(name) -> Path``: the small tokenizer directory of a real model family (its real
    pipeline, added tokens and chat template; see tests/assets/family_tokenizers.py), built once per
    session under the pytest base temp dir."""
    from tests.assets.family_tokenizers import build

    root = tmp_path_factory.mktemp("family_tokenizers")
    built: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in built:
            built[name] = build(name, root)
        return built[name]

    return get


@pytest.fixture(scope="session")
def real_tokenizer(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """``real_tokenizer(name) -> Path``: a real model vocabulary (shipped in a PyPI package of the test
    extra) converted to a Hugging Face tokenizer directory with the model's real chat template; names in
    ``tests.assets.real_tokenizers.REAL_FAMILIES``. Built on first use into pytest's cache directory
    (``.pytest_cache/d/real_tokenizers``; kept across sessions, rebuilt when the builder or its inputs
    change), or under the session's base temp dir with ``-p no:cacheprovider``; COOK_REAL_TOKENIZERS=DIR
    puts them elsewhere."""
    from tests.assets.real_tokenizers import build

    cache = getattr(request.config, "cache", None)
    if os.environ.get("COOK_REAL_TOKENIZERS"):
        root = Path(os.environ["COOK_REAL_TOKENIZERS"])
    elif cache is not None:
        root = Path(cache.mkdir("real_tokenizers"))
    else:
        root = tmp_path_factory.getbasetemp() / "real_tokenizers"
    built: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in built:
            built[name] = build(name, root)
        return built[name]

    return get
