"""End to end on the training side: cook a tiny JSONL in-process -> read every pack with cook.reader
through megatron.energon -> two SFT steps of the MoE decoder on CPU; and the gpu_check script's CPU
fallback on the same dataset."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import yaml
from megatron.energon import WorkerConfig

from cook import format as fmt
from cook.cli.main import main
from cook.reader import make_loader, to_device
from cook.train import ModelConfig, MoEDecoder, TrainConfig, gpu_check, sft_step
from tests.conftest import pipeline_dict, write_jsonl
from tests.e2e.energon_load import load_all_packs

ROWS = [
    {
        "messages": [
            {"role": "user", "content": f"Question {i}: " + "why " * (i % 7)},
            {"role": "assistant", "content": f"<think>step {i}</think>Answer {i}. " + "because " * (i % 11)},
        ]
    }
    for i in range(20)
]


pytestmark = pytest.mark.usefixtures("torch_one_thread")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("reader_train")
    write_jsonl(tmp / "raw.jsonl", ROWS)
    data = pipeline_dict(str(tmp / "raw.jsonl"), str(tmp / "out"), packing={"seq_len": 192, "pad_multiple": 8})
    (tmp / "pipeline.yaml").write_text(yaml.safe_dump(data))
    assert main(["run", str(tmp / "pipeline.yaml"), "--workers", "0", "--quiet"]) == 0
    return tmp / "out"


def test_read_every_pack_and_train_two_steps(dataset: Path) -> None:
    manifest = json.loads((dataset / fmt.MANIFEST_NAME).read_text())
    packs = manifest["counts"]["packs"]
    worker_config = WorkerConfig(rank=0, world_size=1, num_workers=0)
    batches = [
        to_device(b, "cpu") for b in make_loader(dataset, batch_size=2, worker_config=worker_config, repeat=False)
    ]
    keys = [key for b in batches for key in b.__key__]
    assert sorted(keys) == [fmt.pack_key(i) for i in range(packs)] and len(batches) >= 2

    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=manifest["tokenizer"]["vocab_size"],
        hidden_size=32,
        num_heads=2,
        ffn_hidden_size=64,
        max_positions=manifest["pipeline"]["packing"]["seq_len"],
    )
    model = MoEDecoder(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    half = len(batches) // 2
    results = [sft_step(model, optimizer, step, TrainConfig()) for step in (batches[:half], batches[half:])]

    members = load_all_packs(str(dataset), packs)
    meta_targets = {key: sum(s["targets"] for s in json.loads(m[fmt.META])["sequences"]) for key, m in members.items()}
    for result, step in zip(results, (batches[:half], batches[half:]), strict=True):
        assert result.global_target_tokens == sum(meta_targets[k] for b in step for k in b.__key__)
        assert result.tokens == sum(b.num_tokens for b in step) == sum(b.input_ids.shape[1] for b in step)
        assert math.isfinite(result.lm_loss) and math.isfinite(result.aux_loss) and result.aux_loss > 0
    assert sum(r.global_target_tokens for r in results) == manifest["counts"]["target_tokens"]
    assert sum(r.tokens for r in results) == manifest["counts"]["tokens"] + manifest["counts"]["padding_tokens"]
    with torch.no_grad():
        logits = model.forward_batch(batches[0]).logits
    assert logits.shape == (batches[0].num_tokens, config.vocab_size)


@pytest.mark.parametrize("precision", [[], ["--bf16"]], ids=["float32", "bf16-autocast"])
def test_gpu_check_falls_back_to_cpu(dataset: Path, precision: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    argv = [str(dataset), "--device", "cpu", "--steps", "1", "--warmup", "0", "--hidden", "32", "--batch-size", "1"]
    assert gpu_check.main(argv + precision) == 0
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert figures["device"] == "cpu" and figures["steps"] == 1
    assert figures["tokens_per_s"] > 0 and math.isfinite(figures["loss"])
    assert figures["aux_loss_legacy"] >= figures["aux_loss_supervised"] > 0
