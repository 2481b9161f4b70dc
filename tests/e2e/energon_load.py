"""Load a cooked dataset back through megatron.energon with a minimal crude-sample cooker (raw bytes,
no decoder: nothing is unpickled)."""

from __future__ import annotations

from typing import Any

from megatron.energon import Cooker, DefaultTaskEncoder, WorkerConfig, get_loader, get_train_dataset, stateless

from cook import format as fmt


@stateless
def _raw_pack(sample: dict) -> dict:
    return {k: v for k, v in sample.items() if k == "__key__" or k in fmt.MEMBERS or fmt.parse_frame_member(k)}


class RawPackEncoder(DefaultTaskEncoder):
    decoder = None
    cookers = [Cooker(_raw_pack, has_subflavors=fmt.SUBFLAVOR)]  # noqa: RUF012

    def batch(self, samples: list[Any]) -> list[Any]:
        return samples

    def encode_batch(self, batch: Any) -> Any:
        return batch


def load_all_packs(path: str, expected: int) -> dict[str, dict[str, bytes]]:
    """Every pack by key, read through get_train_dataset + get_loader (one pass over ``expected`` packs)."""
    worker_config = WorkerConfig(rank=0, world_size=1, num_workers=0)
    dataset = get_train_dataset(
        path,
        batch_size=1,
        shuffle_buffer_size=None,
        max_samples_per_sequence=None,
        worker_config=worker_config,
        task_encoder=RawPackEncoder(),
    )
    packs: dict[str, dict[str, bytes]] = {}
    for batch in get_loader(dataset):
        for sample in batch:
            packs[sample["__key__"]] = {k: v for k, v in sample.items() if k != "__key__"}
        if len(packs) >= expected:
            break
    return packs
