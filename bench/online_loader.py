"""The online path the reader replaces, and the bare Energon loader it is held against.

    raw WebDataset (one sample = the record's ``json`` + its media members)
      -OnlineTaskEncoder-> per sample in the loader: cooker -> decode + patchify media -> tokenize
      -> fit; Energon's packing buffer: cook's pack plan -> build_pack -> PackedSample; batch ->
      the same ``PackedBatch`` cook's reader yields

This is what an online SFT loader does at training time, built from cook's own stage functions
(``cook.cookers``, ``cook.media.process_media``, ``cook.tokenize.tokenize_batch``, ``fit_sample``,
``plan_window``, ``build_pack``) so the comparison is about *when* the work happens, not about whose
code does it. It tokenizes with the Hugging Face tokenizer, as online SFT loaders do: cook's ``hf``
backend, the ``tokenizers`` fast tokenizer behind ``transformers.AutoTokenizer`` (``encode_batch``),
never cook's default ``auto`` (gigatoken), which is a cook-time speed-up. ``CrudeTaskEncoder`` is the floor: Energon reading the cooked shards and handing each
sample's raw member bytes through, nothing decoded.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import torch
from megatron.energon import Batch, Cooker, DefaultTaskEncoder, Sample, basic_sample_keys, edataclass, stateless

from cook.config import PipelineConfig
from cook.cookers import COOKERS
from cook.media import process_media
from cook.packing.packer import build_pack, fit_sample, plan_window
from cook.reader.batch import PackedBatch, collate_packs
from cook.reader.pack import PackedSample
from cook.sources.media_store import MediaStore
from cook.tokenize import ChatTokenizer, tokenize_batch
from cook.types import RawRecord, TokenizedSample

RAW_SUBFLAVOR = {"raw": "openai"}
ONLINE_TOKENIZER_BACKEND = "hf"  # what online loaders use: the Hugging Face (tokenizers) fast tokenizer


@edataclass
class CookedRecord(Sample):
    sample: TokenizedSample


@edataclass
class CrudeSample(Sample):
    members: dict[str, bytes]


@edataclass
class CrudeBatch(Batch):
    members: list[dict[str, bytes]]


def _tensor(array: Any) -> torch.Tensor | None:
    return None if array is None else torch.from_numpy(array)


class OnlineTaskEncoder(DefaultTaskEncoder[CookedRecord, PackedSample, PackedBatch, PackedBatch]):
    """Tokenize, decode/patchify and pack at load time (use with ``packing_buffer_size``)."""

    decoder = None

    def __init__(self, config: PipelineConfig) -> None:
        super().__init__()
        self.config = config
        self.tokenizer = ChatTokenizer(config.tokenizer.path, ONLINE_TOKENIZER_BACKEND)
        self.cooker = COOKERS["openai"]
        self.store = MediaStore(media_root=None, stores=[], max_media_bytes=config.media.max_media_bytes)
        self.cookers = (Cooker(self.cook_record, has_subflavors=RAW_SUBFLAVOR),)

    @stateless
    def cook_record(self, crude: dict[str, Any]) -> CookedRecord:
        members = {k: bytes(v) for k, v in crude.items() if not k.startswith("__") and k != "json"}
        raw = RawRecord(
            source=str(crude["__key__"]), fields=json.loads(bytes(crude["json"])), origin="", members=members
        )
        conversation = self.cooker(raw)
        media = tuple(
            process_media(ref, self.store.resolve(ref.ref, raw.members, ""), self.config.media)
            for ref in conversation.media
        )
        (tokenized,) = tokenize_batch(self.tokenizer, [conversation], [media], self.config.tokenizer)
        return CookedRecord(**basic_sample_keys(crude), sample=fit_sample(tokenized.sample(), self.config.packing))

    @stateless
    def select_samples_to_pack(self, samples: list[CookedRecord]) -> list[list[CookedRecord]]:
        lengths = [s.sample.length for s in samples]
        order, bounds = plan_window(lengths, [s.sample.n_patches for s in samples], self.config.packing)
        return [[samples[i] for i in order[a:b].tolist()] for a, b in itertools.pairwise(bounds.tolist())]

    @stateless
    def pack_selected_samples(self, samples: list[CookedRecord]) -> PackedSample:
        pack = build_pack([s.sample for s in samples], self.tokenizer.pad_id, self.config.packing.pad_multiple)
        return PackedSample(
            __key__=",".join(s.__key__ for s in samples),
            __restore_key__=(),
            __subflavors__=None,
            __sources__=None,
            input_ids=torch.from_numpy(pack.input_ids.astype("int64")),
            target_mask=torch.from_numpy(pack.loss_mask != 0),
            cu_seqlens=torch.from_numpy(pack.cu_seqlens),
            cu_seqlens_padded=torch.from_numpy(pack.cu_seqlens_padded),
            pixel_patches=_tensor(pack.pixel_patches),
            media_sizes=_tensor(pack.media_sizes),
            audio_features=_tensor(pack.audio_features),
            audio_lengths=_tensor(pack.audio_lengths),
            sources=tuple(s.source for s in pack.sequences),
            target_tokens=sum(s.targets for s in pack.sequences),
        )

    @stateless
    def batch(self, samples: list[PackedSample]) -> PackedBatch:
        return collate_packs(samples)

    def encode_batch(self, batch: PackedBatch) -> PackedBatch:
        return batch


@stateless
def _crude(crude: dict[str, Any]) -> CrudeSample:
    return CrudeSample(**basic_sample_keys(crude), members={k: v for k, v in crude.items() if not k.startswith("__")})


class CrudeTaskEncoder(DefaultTaskEncoder[CrudeSample, CrudeSample, CrudeBatch, CrudeBatch]):
    """Energon over the cooked shards, nothing decoded: each sample's members as raw bytes."""

    decoder = None
    cookers = (Cooker(_crude, has_subflavors={"cook": "packed_v1"}),)

    @stateless
    def batch(self, samples: list[CrudeSample]) -> CrudeBatch:
        return CrudeBatch(
            __key__=[s.__key__ for s in samples],
            __restore_key__=(),
            __subflavors__=None,
            __sources__=None,
            members=[s.members for s in samples],
        )

    def encode_batch(self, batch: CrudeBatch) -> CrudeBatch:
        return batch


def write_raw_wds(rows: list[dict[str, Any]], media_dir: Path, out: Path, shard_size: int = 64) -> None:
    """Raw records as an Energon crude WebDataset: ``{key}.json`` plus each referenced media file as
    a member named by its basename, then Energon's own ``prepare`` and a ``dataset.yaml``."""
    import io
    import tarfile

    from megatron.energon.flavors.webdataset.base_webdataset import BaseWebdatasetFactory

    out.mkdir(parents=True, exist_ok=True)
    names = []
    for first in range(0, len(rows), shard_size):
        name = f"raw-{first // shard_size:06d}.tar"
        names.append(name)
        with tarfile.open(out / name, "w") as tar:
            for index, row in enumerate(rows[first : first + shard_size], start=first):
                key = f"sample-{index:09d}"
                members = {"json": json.dumps(row).encode()}
                for ref in _media_refs(row):
                    members[Path(ref).name] = (media_dir / Path(ref).name).read_bytes()
                for member, data in members.items():
                    info = tarfile.TarInfo(f"{key}.{member}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    BaseWebdatasetFactory.prepare_dataset(out, names, split_parts_ratio=[("train", 1.0)], shuffle_seed=None, workers=1)
    (out / ".nv-meta" / "dataset.yaml").write_text(
        "__module__: megatron.energon\n__class__: CrudeWebdataset\nsubflavors:\n  raw: openai\n"
    )


def _media_refs(row: dict[str, Any]) -> list[str]:
    refs = []
    for message in row.get("messages", []):
        content = message.get("content")
        for part in content if isinstance(content, list) else []:
            kind = part.get("type")
            value = part.get(kind)
            if kind == "image_url" and isinstance(value, dict):
                value = value.get("url")
            if kind in ("image", "image_url", "video", "audio") and isinstance(value, str):
                refs.append(value)
    return refs
