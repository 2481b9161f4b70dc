"""Known step counts: packs per epoch per data-parallel rank (what Energon's loader really yields),
per-sequence target counts in the batch, and ``cook stats --global-batch-size``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from megatron.energon import WorkerConfig

from cook import format as fmt
from cook.cli.main import main
from cook.reader import collate_packs, decode_pack, make_loader, packs_per_epoch, steps_per_epoch, total_packs

from .reader_data import conversations, cook_jsonl, crude_pack


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # 30 conversations -> 9 packs in shards of 3: an epoch that does not split evenly.
    return cook_jsonl(tmp_path_factory.mktemp("epoch"), conversations(30), seq_len=128, shard_size=3)


@pytest.mark.parametrize(
    ("world_size", "workers"),
    [(1, 0), (2, 0), (3, 0), pytest.param(3, 2, marks=pytest.mark.slow), pytest.param(4, 1, marks=pytest.mark.slow)],
)
def test_packs_per_epoch_is_what_each_rank_reads(dataset: Path, world_size: int, workers: int) -> None:
    packs = total_packs(dataset)
    assert packs == 9
    shares = []
    for rank in range(world_size):
        config = WorkerConfig(rank=rank, world_size=world_size, num_workers=workers)
        keys = [k for b in make_loader(dataset, batch_size=1, worker_config=config, repeat=False) for k in b.__key__]
        assert len(keys) == packs_per_epoch(dataset, rank, world_size, workers)
        shares.append(set(keys))
    assert sum(len(s) for s in shares) == packs and set().union(*shares) == {fmt.pack_key(i) for i in range(packs)}


def test_steps_per_epoch() -> None:
    assert [steps_per_epoch(10, n) for n in (1, 3, 10, 11)] == [10, 3, 1, 0]
    with pytest.raises(ValueError, match="global_batch_size=0"):
        steps_per_epoch(10, 0)


def test_sequence_targets_per_sequence() -> None:
    # label-aligned targets: a sequence with targets at stored t=2,3,4 has 3; one with none has 0.
    seqs = [([1, 2, 3, 4, 5], [0, 0, 1, 1, 1]), ([6, 7, 8], [0, 0, 0]), ([9, 10, 11], [0, 1, 1])]
    batch = collate_packs([decode_pack(crude_pack(seqs[:2], 4)), decode_pack(crude_pack(seqs[2:], 4, key="pack-1"))])
    assert batch.sequence_targets.tolist() == [3, 0, 2] and batch.sequence_targets.dtype == torch.int32
    assert int(batch.sequence_targets.sum()) == batch.target_tokens == 5


def test_stats_global_batch_size(dataset: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", str(dataset), "--json", "--global-batch-size", "4"]) == 0
    stats = json.loads(capsys.readouterr().out)
    counts = json.loads((dataset / fmt.MANIFEST_NAME).read_text())["counts"]
    assert stats["steps_per_epoch"] == 2 == steps_per_epoch(total_packs(dataset), 4)
    assert stats["target_tokens_per_step"] == round(counts["target_tokens"] * 4 / counts["packs"])
    assert main(["stats", str(dataset), "--global-batch-size", "4"]) == 0
    out = capsys.readouterr().out
    assert "steps per epoch     2 at global batch size 4 (+ 1 packs left over)" in out
    assert f"target tokens/step  {stats['target_tokens_per_step']:,} (mean)" in out
