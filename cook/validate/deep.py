"""``--deep``: the dataset loads through megatron.energon (SPEC §8, §9) and hands out every pack, once,
byte for byte as the shards hold it.

The load uses Energon's own entry points (``get_train_dataset`` with ``repeat=False`` and no shuffle,
then ``get_loader``) with a crude-sample cooker registered for ``format.SUBFLAVOR`` and no decoder, so
members arrive as raw bytes: nothing is decoded or unpickled. Each pack's members are digested like
``scan.pack_digest`` and compared with the digests the shard scans computed.

The per-sequence placeholder decoding of ``--deep`` lives in ``placeholders.py`` (it runs inside the
shard scans); this is the only module of cook.validate that imports megatron.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections import Counter
from typing import Any

from cook import format as fmt
from cook.validate.problems import Code, Problem, problem
from cook.validate.scan import pack_digest

MAX_LISTED = 5
# Energon's loaders always ask torch's DataLoader for pinned memory, and torch warns on a machine without
# an accelerator that nothing will be pinned; the load here copies nothing to a device either way.
PIN_MEMORY_WARNING = r"'pin_memory' argument is set as true but no accelerator is found"


def _raw_members(sample: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in sample.items() if not name.startswith("__")}


def _task_encoder() -> Any:
    from megatron.energon import Cooker, DefaultTaskEncoder, stateless

    @stateless  # type: ignore[untyped-decorator]
    def raw_pack(sample: dict[str, Any]) -> dict[str, Any]:
        return {"__key__": sample["__key__"], **_raw_members(sample)}

    class RawPackEncoder(DefaultTaskEncoder):  # type: ignore[misc]
        decoder = None
        cookers = [Cooker(raw_pack, has_subflavors=dict(fmt.SUBFLAVOR))]  # noqa: RUF012

        def batch(self, samples: list[Any]) -> list[Any]:
            return samples

        def encode_batch(self, batch: Any) -> Any:
            return batch

    return RawPackEncoder()


def load_digests(root: str) -> Counter[tuple[str, str]]:
    """(key, members digest) of every sample one pass of Energon's train loader yields."""
    from megatron.energon import WorkerConfig, get_loader, get_train_dataset

    seen: Counter[tuple[str, str]] = Counter()
    with contextlib.redirect_stdout(sys.stderr), warnings.catch_warnings():  # stdout is reserved for --json
        warnings.filterwarnings("ignore", PIN_MEMORY_WARNING, UserWarning, r"torch\.utils\.data\.dataloader")
        dataset = get_train_dataset(
            root,
            batch_size=1,
            shuffle_buffer_size=None,
            max_samples_per_sequence=None,
            repeat=False,
            worker_config=WorkerConfig(rank=0, world_size=1, num_workers=0),
            task_encoder=_task_encoder(),
        )
        for batch in get_loader(dataset):
            for sample in batch:
                members = {name: bytes(value) for name, value in _raw_members(sample).items()}
                seen[(str(sample["__key__"]), pack_digest(members))] += 1
    return seen


def check_energon_load(root: str, expected: dict[str, str]) -> list[Problem]:
    """Energon yields exactly the packs of ``expected`` (key -> members digest), each once, unchanged."""
    try:
        seen = load_digests(root)
    except Exception as err:  # any failure to load is the finding itself, reported in full
        return [problem(Code.ENERGON_LOAD, f"megatron.energon failed to load the dataset: {type(err).__name__}: {err}")]
    problems = []
    keys = Counter(key for key, _ in seen.elements())
    twice = sorted(key for key, n in keys.items() if n > 1)
    missing = sorted(set(expected) - set(keys))
    unknown = sorted(set(keys) - set(expected))
    changed = sorted(key for key, digest in seen if key in expected and expected[key] != digest)
    for what, found in (
        ("yielded more than once", twice),
        ("not yielded", missing),
        ("yielded but not in the shards", unknown),
        ("yielded with different members", changed),
    ):
        if found:
            listed = ", ".join(found[:MAX_LISTED]) + (" ..." if len(found) > MAX_LISTED else "")
            problems.append(problem(Code.ENERGON_LOAD, f"{len(found)} packs {what} by Energon: {listed}", key=found[0]))
    return problems
