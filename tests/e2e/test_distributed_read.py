"""Distributed reading with real processes: torch.distributed on gloo, 4 CPU processes, DP=2 x TP=2.

Global rank r has TP rank r % 2 and DP rank r // 2 (TP fastest, as Megatron orders them). Each DP
rank's TP rank 0 reads its share of the packs through ``WorkerConfig(rank=dp, world_size=2)`` and
broadcasts every batch (``cook.reader.tp``); TP rank 1 receives it, and also reads the same share
itself as a reference. The data: conversations that ask about one of three images (so images recur
within and across batches) and a few with audio; two passes over the epoch.

Checked: the DP shares are disjoint and cover every pack exactly once per epoch, and match
``packs_per_epoch``; within each TP group every batch (tokens, masks, variable-length cu_seqlens,
PackedSeqParams, patches, media sizes, audio) is bitwise identical on both ranks and to the
reference; media go out once: the patches sent are exactly those of the distinct images the rank's
batches hold, everything else (repeats, the whole second pass) is served from the receivers' cache;
with a cache too small for them the batches stay equal (eviction itself: tests/unit/reader/test_tp.py).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from cook import format as fmt
from cook.cli.main import main
from tests.conftest import pipeline_dict, write_jsonl
from tests.unit.media.media_data import sine, sound_bytes

WORLD = 4
IMAGES = [(64, 64), (64, 128), (128, 128)]  # (H, W) -> 16, 32, 64 patches at min/max patches 16/64


def _rows(tmp: Path) -> list[dict]:
    paths = []
    for index, (height, width) in enumerate(IMAGES):
        rng = np.random.default_rng(index)
        path = tmp / f"image{index}.png"
        Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8)).save(path)
        paths.append(str(path))
    (tmp / "tone.wav").write_bytes(sound_bytes(sine(440.0, 1.0, 16_000), 16_000))
    rows = []
    for i in range(22):
        content: list[dict] = [{"type": "text", "text": f"Question {i}: what is shown? " + "why " * (i % 5)}]
        if i % 7 == 6:
            content.insert(0, {"type": "audio", "audio": str(tmp / "tone.wav")})
        else:
            content.insert(0, {"type": "image", "image": paths[i % 3]})
        if i % 5 == 0:  # the same image twice in one conversation
            content.append({"type": "image", "image": paths[i % 3]})
        rows.append(
            {"messages": [{"role": "user", "content": content}, {"role": "assistant", "content": f"Answer {i}."}]}
        )
    return rows


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("distributed")
    write_jsonl(tmp / "raw.jsonl", _rows(tmp))
    data = pipeline_dict(
        str(tmp / "raw.jsonl"),
        str(tmp / "out"),
        packing={"seq_len": 256, "pad_multiple": 8},
        output={"shard_size": 3},
        media={"image": {"min_patches": 16, "max_patches": 64}},
    )
    (tmp / "pipeline.yaml").write_text(yaml.safe_dump(data))
    assert main(["run", str(tmp / "pipeline.yaml"), "--workers", "0", "--quiet"]) == 0
    return tmp / "out"


def _item_digests(batch) -> list[tuple[str, int]]:
    from cook.reader.tp import item_patches

    if batch.media_sizes is None:
        return []
    out, offset = [], 0
    for count in item_patches(batch.media_sizes):
        out.append((hashlib.sha256(batch.pixel_patches[offset : offset + count].numpy().tobytes()).hexdigest(), count))
        offset += count
    return out


def _rank_main(rank: int, dataset: str, tmp: str) -> None:
    import torch
    import torch.distributed as dist
    from megatron.energon import WorkerConfig

    from cook.reader import make_loader
    from cook.reader.tp import TensorParallelBroadcast, batch_fingerprint

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{tmp}/rendezvous", rank=rank, world_size=WORLD)
    tp_groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    tp, dp = rank % 2, rank // 2
    broadcast = TensorParallelBroadcast(tp_groups[dp], src=2 * dp)
    config = WorkerConfig(rank=dp, world_size=2, num_workers=0)

    def read() -> list:
        return list(make_loader(dataset, batch_size=2, worker_config=config, repeat=False))

    batches = []
    for _ in range(2):  # two passes over the epoch: the second one is served from the media cache
        if tp == 0:
            for batch in read():
                batches.append(broadcast.send(batch))
            broadcast.send(None)
        else:
            while (batch := broadcast.receive()) is not None:
                batches.append(batch)
    small = TensorParallelBroadcast(tp_groups[dp], src=2 * dp, cache_patches=40)  # evicts as it goes
    evicting = []
    if tp == 0:
        evicting = [small.send(batch) for batch in read() * 2]
        small.send(None)
    else:
        while (batch := small.receive()) is not None:
            evicting.append(batch)
    reference = read() * 2 if tp == 1 else batches
    distinct: dict[str, int] = {}
    for batch in reference:
        distinct.update(_item_digests(batch))
    result = {
        "epoch_keys": [key for batch in batches[: len(batches) // 2] for key in batch.__key__],
        "fingerprints": [batch_fingerprint(b) for b in batches],
        "reference": [batch_fingerprint(b) for b in reference],
        "params": [
            [p.tolist() for p in (b.packed_seq_params.cu_seqlens_q, b.packed_seq_params.cu_seqlens_kv_padded)]
            for b in batches
        ],
        "evicting": [batch_fingerprint(b) for b in evicting],
        "evicting_sent": small.stats.patches_sent,
        "patches_sent": broadcast.stats.patches_sent,
        "patches_cached": broadcast.stats.patches_cached,
        "distinct_patches": sum(distinct.values()),
        "total_patches": sum(0 if b.pixel_patches is None else b.pixel_patches.shape[0] for b in reference),
        "audio_batches": sum(b.audio_features is not None for b in batches),
        "multi_sequence": any(len(b.cu_seqlens) > 3 for b in batches),
    }
    Path(tmp, f"rank{rank}.json").write_text(json.dumps(result))
    dist.barrier()
    dist.destroy_process_group()


@pytest.mark.slow  # four processes with torch.distributed: ~10 s
def test_dp2_tp2_read_and_broadcast(dataset: Path, tmp_path: Path) -> None:
    from cook.reader import packs_per_epoch

    context = multiprocessing.get_context("spawn")
    env = {"GLOO_SOCKET_IFNAME": os.environ.get("GLOO_SOCKET_IFNAME", "lo")}
    os.environ.update(env)
    processes = [context.Process(target=_rank_main, args=(r, str(dataset), str(tmp_path))) for r in range(WORLD)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=240)
    assert [p.exitcode for p in processes] == [0] * WORLD
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(WORLD)]

    packs = json.loads((dataset / fmt.MANIFEST_NAME).read_text())["counts"]["packs"]
    shares = [set(ranks[0]["epoch_keys"]), set(ranks[2]["epoch_keys"])]
    assert not shares[0] & shares[1]
    assert shares[0] | shares[1] == {fmt.pack_key(i) for i in range(packs)}
    assert [len(ranks[0]["epoch_keys"]), len(ranks[2]["epoch_keys"])] == [
        packs_per_epoch(dataset, d, 2) for d in (0, 1)
    ]
    assert all(len(set(r["epoch_keys"])) == len(r["epoch_keys"]) for r in ranks)

    for lead, peer in ((ranks[0], ranks[1]), (ranks[2], ranks[3])):
        assert lead["fingerprints"] == peer["fingerprints"] == peer["reference"]  # bitwise, and what it would read
        assert lead["params"] == peer["params"]
        assert lead["patches_sent"] == peer["patches_sent"] == peer["distinct_patches"] > 0
        assert lead["patches_cached"] == peer["patches_cached"] == peer["total_patches"] - peer["distinct_patches"]
        assert peer["patches_cached"] > peer["total_patches"] // 2  # the second pass resends nothing
        # a cache of 40 patches (less than one batch's items): batches stay bitwise the same
        assert lead["evicting"] == peer["evicting"] == peer["reference"]
        assert peer["evicting_sent"] >= peer["distinct_patches"]
    assert sum(r["audio_batches"] for r in ranks) > 0 and any(r["multi_sequence"] for r in ranks)
