"""Tensor-parallel reading: TP rank 0 reads each ``PackedBatch``, the other TP ranks receive it.

    TP rank 0:      TensorParallelBroadcast(group, src).send(batch | None) -> batch
    other TP ranks: TensorParallelBroadcast(group, src).receive() -> PackedBatch | None (None: the end)

All ranks of a TP group must train on bitwise the same batch, so only TP rank 0 runs a loader and
broadcasts it (Megatron's ``get_batch_on_this_tp_rank`` does the same for GPT batches). A batch is
variable-length: ``T``, the number of sequences and the media differ from batch to batch, so each
broadcast starts with a fixed-size int64 header of the sizes, then:

1. one int64 buffer: input_ids, labels, position_ids, padding_mask, loss_mask (0/1), cu_seqlens,
   cu_seqlens_padded, cu_packs, sequence_targets, media_sizes, the media item ids, which of them are
   new, the cache ids to evict, audio_lengths;
2. one uint8 buffer: the metadata (keys, sources, restore key) as JSON;
3. one uint8 buffer with the patches of the **new** visual items only (at most one media broadcast
   per batch); 4. the audio features as their bytes (float16 copied bitwise; gloo has no int16);
5. with ``make_loader(decode="cuda")``: the batch's JPEG frames left to the device, as their bytes
   (``jpeg_data``; their ``jpeg_frames`` rows ride in the int64 buffer). Every TP rank then decodes
   them on its own GPU in ``to_device``: the compressed frames cross the group, not their patches.

**Media dedup.** The same image often recurs (a shared system image, a dataset that asks several
questions about one picture, the same pack read twice across epochs). The sender hashes every visual
item's patches (BLAKE2b-128) and keeps a FIFO cache of what the receivers hold (``cache_patches``
patches at most); an item already held travels as its id only. Receivers keep the same cache: the
sender names the ids to evict, so both sides always agree without a round trip. ``stats`` counts
patches sent and patches served from the cache. An item whose frames are JPEG bytes left to the device
(all of an item's frames share its medium's storage) is sent as those bytes every time, outside the
cache.

The other ranks then build ``PackedSeqParams`` from the received boundaries, identical to rank 0's.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from megatron.energon import SourceInfo
from megatron.energon.epathlib import EPath

from cook import format as fmt
from cook.reader.batch import PackedBatch, item_patches

HEADER = 15  # int64 fields: see send
HAS_PIXELS, HAS_SIZES = 1, 2  # header flags: pixel_patches, media_sizes are set
END = -1


@dataclass
class BroadcastStats:
    batches: int = 0
    patches_sent: int = 0  # rows of new visual items broadcast
    patches_cached: int = 0  # rows the receivers already held


def batch_fingerprint(batch: PackedBatch) -> str:
    """sha256 over every field of ``batch`` (tensors by dtype, shape and bytes): equal iff bitwise equal."""
    hasher = hashlib.sha256()
    for field in dataclasses.fields(batch):
        value = getattr(batch, field.name)
        if isinstance(value, torch.Tensor):
            data = value.detach().cpu().contiguous()
            hasher.update(f"{field.name}:{data.dtype}:{list(data.shape)}:".encode())
            hasher.update(data.view(torch.uint8).numpy().tobytes() if data.numel() else b"")
        else:
            hasher.update(f"{field.name}={value!r};".encode())
    return hasher.hexdigest()


def deferred_items(media_sizes: torch.Tensor, jpeg_frames: torch.Tensor | None) -> list[bool]:
    """Per visual item (a ``media_sizes`` row): whether its frames are JPEG bytes left to the device, i.e. a
    ``jpeg_frames`` row starts at the item's first patch row (an item's frames share one storage)."""
    starts = set() if jpeg_frames is None else set(jpeg_frames[:, 2].tolist())
    flags, row = [], 0
    for count in item_patches(media_sizes):
        flags.append(row in starts)
        row += count
    return flags


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _encode_sources(sources: tuple[SourceInfo, ...] | None) -> list[list[Any]] | None:
    if sources is None:
        return None
    return [[str(s.dataset_path), s.index, s.shard_name, list(s.file_names)] for s in sources]


def _decode_sources(rows: list[list[Any]] | None) -> tuple[SourceInfo, ...] | None:
    if rows is None:
        return None
    return tuple(
        SourceInfo(dataset_path=EPath(path), index=index, shard_name=shard, file_names=tuple(names))
        for path, index, shard, names in rows
    )


class TensorParallelBroadcast:
    """One per TP group and rank; ``src`` is the global rank of the group's TP rank 0."""

    def __init__(self, group: dist.ProcessGroup | None, src: int, cache_patches: int = 1 << 16) -> None:
        self.group, self.src, self.cache_patches = group, src, cache_patches
        self._ids: OrderedDict[bytes, tuple[int, int]] = OrderedDict()  # sender: digest -> (id, patches)
        self._held: dict[int, torch.Tensor] = {}  # receiver: id -> uint8 [p, 768]
        self._next_id = 0
        self.stats = BroadcastStats()

    def _bcast(self, tensor: torch.Tensor) -> torch.Tensor:
        dist.broadcast(tensor, src=self.src, group=self.group)
        return tensor

    # ---------------------------------------------------------------- sender (TP rank 0)
    def _plan_media(self, batch: PackedBatch) -> tuple[list[int], list[int], list[int], torch.Tensor | None]:
        """(item ids, new flags, evicted ids, new patches) for the batch's visual items held as patches (the
        others are JPEG bytes left to the device, sent as they are)."""
        if batch.media_sizes is None or batch.pixel_patches is None:
            return [], [], [], None
        ids, new, fresh = [], [], []
        offset = 0
        deferred = deferred_items(batch.media_sizes, batch.jpeg_frames)
        for count, left in zip(item_patches(batch.media_sizes), deferred, strict=True):
            if left:
                continue
            rows = batch.pixel_patches[offset : offset + count]
            offset += count
            digest = hashlib.blake2b(rows.numpy().tobytes(), digest_size=16).digest()
            known = digest in self._ids
            if known:
                self.stats.patches_cached += count
            else:
                self._ids[digest] = (self._next_id, count)
                self._next_id += 1
                fresh.append(rows)
                self.stats.patches_sent += count
            ids.append(self._ids[digest][0])
            new.append(int(not known))
        return ids, new, self._evict(set(ids)), torch.cat(fresh) if fresh else None

    def _evict(self, used: set[int]) -> list[int]:
        held = sum(count for _, count in self._ids.values())
        evicted = []
        for digest, (item, count) in list(self._ids.items()):
            if held <= self.cache_patches:
                break
            if item not in used:
                del self._ids[digest]
                held -= count
                evicted.append(item)
        return evicted

    def send(self, batch: PackedBatch | None) -> PackedBatch | None:
        """Broadcast ``batch`` (None: the end of the data) to the group; returns it unchanged."""
        if batch is None:
            self._bcast(torch.full((HEADER,), END, dtype=torch.int64))
            return None
        ids, new, evicted, fresh = self._plan_media(batch)
        meta = json.dumps(
            {
                "key": batch.__key__,
                "restore": batch.__restore_key__,
                "sub": batch.__subflavors__,
                "src": _encode_sources(batch.__sources__),
            }
        ).encode()
        audio, jpeg_data, jpeg_frames = batch.audio_features, batch.jpeg_data, batch.jpeg_frames
        if (jpeg_data is None) != (jpeg_frames is None):
            raise ValueError("a batch with jpeg_frames must carry jpeg_data, and the other way round")
        parts = [
            batch.input_ids[0], batch.labels[0], batch.position_ids[0], batch.padding_mask[0], batch.loss_mask[0],
            batch.cu_seqlens, batch.cu_seqlens_padded, batch.cu_packs, batch.sequence_targets,
            batch.media_sizes.flatten() if batch.media_sizes is not None else torch.zeros(0),
            torch.tensor(ids), torch.tensor(new), torch.tensor(evicted),
            batch.audio_lengths if batch.audio_lengths is not None else torch.zeros(0),
            jpeg_frames.flatten() if jpeg_frames is not None else torch.zeros(0),
        ]  # fmt: skip
        ints = torch.cat([p.to(torch.int64) for p in parts])
        media_rows = 0 if batch.media_sizes is None else batch.media_sizes.shape[0]
        n_jpeg, jpeg_bytes = (0, 0) if jpeg_frames is None or jpeg_data is None else (len(jpeg_frames), len(jpeg_data))
        header = [batch.num_tokens, len(batch.cu_seqlens), len(batch.cu_packs), media_rows, len(ids), len(evicted),
                  0 if fresh is None else fresh.shape[0], 0 if audio is None else audio.shape[0],
                  0 if audio is None else audio.shape[1], batch.max_seqlen, batch.target_tokens, len(meta),
                  HAS_PIXELS * (batch.pixel_patches is not None) + HAS_SIZES * (batch.media_sizes is not None),
                  n_jpeg, jpeg_bytes]  # fmt: skip
        self._bcast(torch.tensor(header, dtype=torch.int64))
        self._bcast(ints)
        self._bcast(torch.frombuffer(bytearray(meta), dtype=torch.uint8))
        if fresh is not None:
            self._bcast(fresh.contiguous())
        if audio is not None:
            self._bcast(audio.contiguous().view(torch.uint8))
        if n_jpeg:
            assert jpeg_data is not None
            self._bcast(jpeg_data.contiguous())
        self.stats.batches += 1
        return batch

    # ---------------------------------------------------------------- receivers
    def receive(self) -> PackedBatch | None:
        """The batch TP rank 0 sent (None at the end), bitwise equal to it."""
        header = self._bcast(torch.empty(HEADER, dtype=torch.int64)).tolist()
        if header[0] == END:
            return None
        (tokens, n_cu, n_packs, media_rows, items, n_evicted, n_fresh, clips, frames, max_seqlen, targets, n_meta,
         flags, n_jpeg, jpeg_bytes) = header  # fmt: skip
        sizes = [tokens] * 5 + [n_cu, n_cu, n_packs, n_cu - 1, 3 * media_rows, items, items, n_evicted, clips]
        ints = self._bcast(torch.empty(sum(sizes) + 5 * n_jpeg, dtype=torch.int64))
        (ids_, labels, positions, padding, mask, cu, cu_padded, cu_packs, seq_targets, media_sizes, item_ids, new,
         evicted, audio_lengths, jpeg_frames) = torch.split(ints, [*sizes, 5 * n_jpeg])  # fmt: skip
        meta = json.loads(bytes(self._bcast(torch.empty(n_meta, dtype=torch.uint8)).tolist()))
        fresh = self._bcast(torch.empty((n_fresh, fmt.PATCH_VALUES), dtype=torch.uint8)) if n_fresh else None
        audio = None
        if clips:
            audio = self._bcast(torch.empty((clips, frames, 2 * fmt.MEL_BINS), dtype=torch.uint8)).view(torch.float16)
        jpeg_data = self._bcast(torch.empty(jpeg_bytes, dtype=torch.uint8)) if n_jpeg else None
        jpeg_rows = jpeg_frames.view(-1, 5) if n_jpeg else None
        sizes_rows = media_sizes.view(-1, 3)
        counts = [
            c
            for c, left in zip(item_patches(sizes_rows), deferred_items(sizes_rows, jpeg_rows), strict=True)
            if not left
        ]
        pixels = self._store_media(counts, item_ids.tolist(), new.tolist(), evicted.tolist(), fresh)
        if flags & HAS_PIXELS and pixels is None:  # every item left to the device, or none at all
            pixels = torch.zeros((0, fmt.PATCH_VALUES), dtype=torch.uint8)
        self.stats.batches += 1
        return PackedBatch(
            __key__=meta["key"],
            __restore_key__=_tuples(meta["restore"]),
            __subflavors__=meta["sub"],
            __sources__=_decode_sources(meta["src"]),
            input_ids=ids_[None],
            labels=labels[None],
            loss_mask=mask.to(torch.float32)[None],
            position_ids=positions[None],
            padding_mask=padding.bool()[None],
            cu_seqlens=cu.to(torch.int32),
            cu_seqlens_padded=cu_padded.to(torch.int32),
            cu_packs=cu_packs.to(torch.int32),
            max_seqlen=max_seqlen,
            target_tokens=targets,
            sequence_targets=seq_targets.to(torch.int32),
            pixel_patches=pixels if flags & HAS_PIXELS else None,
            media_sizes=sizes_rows.to(torch.int32) if flags & HAS_SIZES else None,
            audio_features=audio,
            audio_lengths=audio_lengths.to(torch.int32) if clips else None,
            jpeg_data=jpeg_data,
            jpeg_frames=jpeg_rows,
        )

    def _store_media(
        self, counts: list[int], ids: list[int], new: list[int], evicted: list[int], fresh: torch.Tensor | None
    ) -> torch.Tensor | None:
        """The patches of the items held as patches (``counts``: each one's rows), new ones stored."""
        if not ids:
            return None
        offset = 0
        for item, is_new, count in zip(ids, new, counts, strict=True):
            if is_new:
                assert fresh is not None
                self._held[item] = fresh[offset : offset + count].clone()
                offset += count
                self.stats.patches_sent += count
            else:
                self.stats.patches_cached += count
        pixels = torch.cat([self._held[item] for item in ids])
        for item in evicted:
            del self._held[item]
        return pixels
