"""Issue 14, whole cooks: ``tokenizer.backend: hf`` and the default (``auto``) write byte-identical
shards on both test tokenizers; the manifest names the backend; the cook path never imports torch."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cook import format as fmt
from cook.cli.main import main
from cook.tokenize.backends import PROBES
from tests.conftest import DEMO_DATA, DEMO_TOKENIZER, REPO, pipeline_dict

SP_TOKENIZER = REPO / "tests" / "assets" / "sp_tokenizer"
TEXT_FILES = ("chat.jsonl", "preformatted.jsonl", "llava-000000.tar")


@pytest.fixture(scope="module")
def text_input(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("text")
    for name in TEXT_FILES:
        shutil.copy(DEMO_DATA / name, root / name)
    return root


def _cook(tmp: Path, raw: Path, tokenizer: Path, backend: str | None) -> Path:
    out = tmp / f"out-{tokenizer.name}-{backend}"
    tokenizer_keys = {"path": str(tokenizer)} | ({"backend": backend} if backend else {})
    data = pipeline_dict(
        str(raw), str(out), tokenizer=tokenizer_keys, packing={"seq_len": 4096, "buffer_size": 64}, cooker="auto"
    )
    (tmp / "p.yaml").write_text(yaml.safe_dump(data))
    assert main(["run", str(tmp / "p.yaml"), "--workers", "0", "--quiet"]) == 0
    return out


def _shards(out: Path) -> dict[str, bytes]:
    manifest = json.loads((out / fmt.MANIFEST_NAME).read_text())
    return {s["name"]: (out / s["name"]).read_bytes() for s in manifest["shards"]}


@pytest.mark.parametrize("tokenizer", [DEMO_TOKENIZER, SP_TOKENIZER], ids=["demo", "sp"])
def test_hf_and_default_shards_are_byte_identical(text_input: Path, tmp_path: Path, tokenizer: Path) -> None:
    pytest.importorskip("gigatoken")
    hf = _cook(tmp_path, text_input, tokenizer, "hf")
    default = _cook(tmp_path, text_input, tokenizer, None)
    hf_shards, default_shards = _shards(hf), _shards(default)
    assert len(hf_shards) >= 3 and hf_shards == default_shards
    assert (hf / fmt.REJECTS_NAME).read_bytes() == (default / fmt.REJECTS_NAME).read_bytes()
    backend = json.loads((default / fmt.MANIFEST_NAME).read_text())["tokenizer_backend"]
    assert (backend["requested"], backend["name"], backend["self_check"]) == ("auto", "gigatoken", "passed")
    assert backend["strings_checked"] > len(PROBES) + 100  # the probes and the first unit's texts
    assert json.loads((hf / fmt.MANIFEST_NAME).read_text())["tokenizer_backend"]["name"] == "hf"


WORKER_SCRIPT = """
import sys
from cook.config import config_from_dict
from cook.runner.plan import plan_units
from cook.runner.staging import MemoryStore
from cook.runner.units import ShardTask, WindowTask
from cook.runner.worker import CookWorker

config = config_from_dict({
    "input": {"path": sys.argv[1]}, "tokenizer": {"path": sys.argv[2]},
    "output": {"dir": sys.argv[3]}, "packing": {"seq_len": 4096},
})
worker = CookWorker(config, MemoryStore())
done = worker.cook_unit(plan_units(config.input)[0])
assert done.samples > 100, done
window = WindowTask(0, ((done.unit, 0, done.samples),))
assert worker.plan_window(window).packs > 0
worker.write_shard(ShardTask(0, 0, window, 0, 1))
heavy = sorted(m for m in ("torch", "transformers") if m in sys.modules)
print("HEAVY", heavy, worker.tokenizer.backend.name)
"""


def test_worker_cook_path_never_imports_torch(text_input: Path, tmp_path: Path) -> None:
    """Reading, cooking, tokenizing, packing and writing a shard in a fresh process: no torch, no
    transformers (the plain tokenizer directory is read with ``tokenizers`` alone)."""
    (tmp_path / "out").mkdir()
    args = [str(text_input / "chat.jsonl"), str(DEMO_TOKENIZER), str(tmp_path / "out")]
    done = subprocess.run(
        [sys.executable, "-c", WORKER_SCRIPT, *args], capture_output=True, text=True, check=False, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    assert "HEAVY []" in done.stdout, done.stdout


def test_explicit_backend_failing_its_check_exits_2(
    text_input: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A mismatch only the job's own text shows (no probe has it): exit 2, naming the string."""
    pytest.importorskip("gigatoken")
    from cook.tokenize import backends

    real = backends.GigatokenEncoder.encode_batch
    needle = "Historians"  # in the demo chats, in no probe string
    assert not any(needle in probe for probe in backends.PROBES)

    def wrong(self: backends.GigatokenEncoder, texts: list[str]) -> list[list[int]]:
        return [[*ids, 5] if needle in text else ids for text, ids in zip(texts, real(self, texts), strict=True)]

    monkeypatch.setattr(backends.GigatokenEncoder, "encode_batch", wrong)
    out = tmp_path / "out"
    data = pipeline_dict(str(text_input / "chat.jsonl"), str(out), tokenizer={"backend": "gigatoken"})
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(data))
    assert main(["run", str(tmp_path / "p.yaml"), "--workers", "0", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tokenizer.backend: 'gigatoken' cannot be used" in err[0]
    assert "first unit's text" in err[0] and needle in err[0]
    assert not (out / fmt.MANIFEST_NAME).exists()
