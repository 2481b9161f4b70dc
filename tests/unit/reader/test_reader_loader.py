"""Reader through megatron.energon on a dataset cooked in-process: exact training arrays for every
pack, nothing unpickled, and save_state_rank / restore_state_rank resuming at the same pack with 0
and 2 loader workers."""

from __future__ import annotations

import gc
import pickle
from pathlib import Path

import pytest
import torch.utils.data._utils
from megatron.energon import WorkerConfig

from cook import format as fmt
from cook.reader import IGNORE_INDEX, PackedBatch, make_loader

from .reader_data import conversations, cook_jsonl, stored_packs


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # 24 short conversations -> 8 packs of 3 sequences in 3 shards; pad_multiple 16 leaves padding.
    return cook_jsonl(tmp_path_factory.mktemp("reader"), conversations(24), seq_len=128, shard_size=3, pad_multiple=16)


def _loader(dataset: Path, workers: int, batch_size: int = 1, **kwargs: object):
    config = WorkerConfig(rank=0, world_size=1, num_workers=workers)
    return make_loader(dataset, batch_size=batch_size, worker_config=config, **kwargs)  # type: ignore[arg-type]


def _expected(members: dict[str, bytes]) -> tuple[list[int], list[float], list[int], list[bool]]:
    """labels, loss mask, position ids, padding, by the definition, one token at a time."""
    ids, stored = fmt.load_npy(members[fmt.INPUT_IDS]), fmt.load_npy(members[fmt.LOSS_MASK])
    cu, cu_padded = fmt.load_npy(members[fmt.CU_SEQLENS]), fmt.load_npy(members[fmt.CU_SEQLENS_PADDED])
    labels, mask, positions, padding = [], [], [], []
    for i in range(len(cu) - 1):
        start, length = int(cu_padded[i]), int(cu[i + 1] - cu[i])
        for t in range(start, int(cu_padded[i + 1])):
            inside = t + 1 < start + length
            labels.append(int(ids[t + 1]) if inside else IGNORE_INDEX)
            mask.append(float(stored[t + 1]) if inside else 0.0)
            positions.append(t - start)
            padding.append(t >= start + length)
    return labels, mask, positions, padding


def test_every_pack_exact(dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the reader unpickled something")

    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, refuse)
    stored = stored_packs(dataset)
    seen = set()
    for batch in _loader(dataset, workers=0, repeat=False):
        assert isinstance(batch, PackedBatch)
        (key,) = batch.__key__
        members = stored[key]
        labels, mask, positions, padding = _expected(members)
        assert batch.input_ids[0].tolist() == fmt.load_npy(members[fmt.INPUT_IDS]).tolist()
        assert batch.labels[0].tolist() == labels
        assert batch.loss_mask[0].tolist() == mask
        assert batch.position_ids[0].tolist() == positions
        assert batch.padding_mask[0].tolist() == padding
        assert batch.cu_seqlens.tolist() == fmt.load_npy(members[fmt.CU_SEQLENS]).tolist()
        assert batch.cu_seqlens_padded.tolist() == fmt.load_npy(members[fmt.CU_SEQLENS_PADDED]).tolist()
        params = batch.packed_seq_params
        assert params.qkv_format == "thd" and params.cu_seqlens_q_padded.tolist() == batch.cu_seqlens_padded.tolist()
        assert batch.target_tokens == sum(mask) == fmt.load_npy(members[fmt.LOSS_MASK]).sum()
        seen.add(key)
    assert seen == set(stored) and any(any(_expected(m)[3]) for m in stored.values())


@pytest.mark.parametrize("workers", [0, pytest.param(2, marks=pytest.mark.slow)])
def test_state_resumes_at_the_same_pack(dataset: Path, workers: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Energon's loader workers take torch's full join timeout (5 s each) to stop once the loader is
    # collected; a short timeout keeps the test fast (torch then terminates them, as it would anyway).
    monkeypatch.setattr(torch.utils.data._utils, "MP_STATUS_CHECK_INTERVAL", 0.2)
    kwargs = {"batch_size": 2, "shuffle_buffer_size": 4, "max_samples_per_sequence": 2}
    first = _loader(dataset, workers, **kwargs)
    batches = iter(first)
    for _ in range(3):
        next(batches)
    state = first.save_state_rank()
    expected = [next(batches).__key__ for _ in range(5)]
    del batches, first

    resumed = _loader(dataset, workers, **kwargs)
    resumed.restore_state_rank(state)
    again = iter(resumed)
    assert [next(again).__key__ for _ in range(5)] == expected
    assert all(len(keys) == 2 for keys in expected)
    del again, resumed
    gc.collect()  # stop the workers now, under the short timeout
