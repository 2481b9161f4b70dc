"""``PackedSample``s of a micro-batch -> one ``PackedBatch``: a single THD token stream.

    [PackedSample] -collate_packs-> PackedBatch (CPU tensors; to_device moves it)

**Batching choice: concatenate, do not pad.** The packs of a micro-batch are laid end to end along
the token axis into ONE packed stream of ``T = Σ T_b`` tokens with batch dimension 1 (``[1, T]``),
and their boundaries are concatenated with offsets. This is exactly what Megatron's ``thd`` format
expects (micro-batch size 1 × packed; ``PackedSeqParams`` describe every sequence of the stream), no
compute or memory is spent on inter-pack padding, and since every stored sequence is already padded
to ``pad_multiple``, every sequence of the stream still starts at a multiple of it (context/tensor
parallel splits stay legal). Padding packs to a common ``T`` instead would add padding tokens that
the router would route and attention would compute, for no gain.

Per pack, the stored target-aligned mask becomes the label-aligned training form. Worked example,
``pad_multiple=4``, sequences ``a`` (5 tokens) and ``b`` (3 tokens), ``P`` = pad, ``-`` = ignored
(``IGNORE_INDEX``)::

    t                    0  1  2  3  4  5  6  7 | 8  9 10 11
    input_ids            a0 a1 a2 a3 a4 P  P  P | b0 b1 b2 P     T = 12
    stored loss_mask     0  0  1  1  1  0  0  0 | 0  1  1  0     token t is a target
    cu_seqlens           [0, 5, 8]        cu_seqlens_padded  [0, 8, 12]
    labels               a1 a2 a3 a4 -  -  -  - | b1 b2 -  -     labels[t] = input_ids[t+1] in the sequence
    loss_mask            0  1  1  1  0  0  0  0 | 1  1  0  0     loss_mask[t] = stored[t+1] in the sequence
    position_ids         0  1  2  3  4  5  6  7 | 0  1  2  3     restart at 0; padding continues counting
    padding_mask         F  F  F  F  F  T  T  T | F  F  F  T

``loss_mask.sum()`` equals the stored target count (3 + 2 = 5): every target token ``t+1`` is
predicted at position ``t``. Padding positions continue their sequence's count (they stay below the
padded length, so any position table sized ``seq_len`` covers them) and are never attended to by a
real token (they come after it, attention is causal). A second pack in the batch is shifted by the
tokens before it: ``cu_seqlens`` by the previous packs' real tokens, ``cu_seqlens_padded`` by their
``T``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from megatron.core.packed_seq_params import PackedSeqParams
from megatron.energon import Batch, edataclass

from cook import format as fmt
from cook.reader.pack import PackArrays, PackedSample

IGNORE_INDEX = -100  # torch.nn.functional.cross_entropy's default ignore_index
INLINE_BYTES = 1 << 20  # CPU tensors up to this size cross a worker boundary inside the pickle stream


def _to_wire(value: Any) -> Any:
    """A small CPU tensor -> its NumPy array (pickled inline); anything else unchanged."""
    small = isinstance(value, torch.Tensor) and value.device.type == "cpu" and value.nbytes <= INLINE_BYTES
    if not small or value.requires_grad:
        return value
    return value.numpy()


def _from_wire(cls: type[PackedBatch], state: dict[str, Any]) -> PackedBatch:
    """Unpickling: the arrays back as tensors over the unpickled memory (``torch.from_numpy``, no copy)."""
    return cls(**{k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in state.items()})


@edataclass
class PackedBatch(Batch):
    """A micro-batch: the packs of ``__key__`` as one THD stream of ``T`` tokens, batch dim 1.

    ``pixel_patches`` stay uint8 until ``to_device`` has copied them; ``pixel_values`` (float32,
    CLIP-normalized, ``[P, 3, 16, 16]``) is filled on the device by ``to_device``. Not frozen: Energon
    sets ``__restore_key__`` after batching.
    """

    input_ids: torch.Tensor  # int64 [1, T]
    labels: torch.Tensor  # int64 [1, T], IGNORE_INDEX at each sequence's last token and in padding
    loss_mask: torch.Tensor  # float32 [1, T], label-aligned: 1 where labels[t] is a target
    position_ids: torch.Tensor  # int64 [1, T], restart at 0 in every sequence
    padding_mask: torch.Tensor  # bool [1, T], True at padding tokens
    cu_seqlens: torch.Tensor  # int32 [N+1], true boundaries of all N sequences of the stream
    cu_seqlens_padded: torch.Tensor  # int32 [N+1], padded boundaries, last = T
    cu_packs: torch.Tensor  # int32 [B+1], where each pack starts in the stream
    max_seqlen: int  # longest padded sequence (>= longest true one)
    target_tokens: int  # loss_mask.sum(): the supervised tokens v of this micro-batch
    sequence_targets: torch.Tensor  # int32 [N], loss_mask summed per sequence (sample-level loss)
    pixel_patches: torch.Tensor | None = None  # uint8 [P, 768]
    pixel_values: torch.Tensor | None = None  # float32 [P, 3, 16, 16], set by to_device
    media_sizes: torch.Tensor | None = None  # int32 [M, 3]
    audio_features: torch.Tensor | None = None  # float16 [C, F, 128], F padded to the longest pack
    audio_lengths: torch.Tensor | None = None  # int32 [C]
    jpeg_data: torch.Tensor | None = None  # uint8 [B], decode="cuda": JPEG frames left to to_device
    jpeg_frames: torch.Tensor | None = None  # int64 [J, 5], PackedSample.jpeg_frames, rows over the batch

    @property
    def num_tokens(self) -> int:
        return int(self.input_ids.shape[1])

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickling, as a loader worker's batch is sent to the main process: the CPU tensors up to
        ``INLINE_BYTES`` travel as NumPy arrays inside the pickle stream (one copy each way) rather
        than torch's default of one shared-memory segment plus one file descriptor passed per tensor
        (nine per batch; docs/SCALING.md has bench_reader's figure); larger ones (media) keep
        torch's shared memory. Unpickled, they are tensors again, of the same dtypes and shapes."""
        state = {f.name: _to_wire(getattr(self, f.name)) for f in dataclasses.fields(self)}
        return (_from_wire, (type(self), state))

    @property
    def packed_seq_params(self) -> PackedSeqParams:
        """Megatron-Core's THD parameters, built from the stored boundaries (on this batch's device)."""
        return PackedSeqParams(
            qkv_format="thd",
            cu_seqlens_q=self.cu_seqlens,
            cu_seqlens_kv=self.cu_seqlens,
            cu_seqlens_q_padded=self.cu_seqlens_padded,
            cu_seqlens_kv_padded=self.cu_seqlens_padded,
            max_seqlen_q=self.max_seqlen,
            max_seqlen_kv=self.max_seqlen,
        )


_ARANGE = np.arange(1 << 16)  # int64 0, 1, ...: token indices, sliced per stream (grown on demand)
_ARANGE.flags.writeable = False


def _token_index(tokens: int) -> np.ndarray:
    """int64 ``[0, 1, ..., tokens - 1]``: a view of a shared read-only array (no allocation per pack)."""
    global _ARANGE
    if tokens > len(_ARANGE):
        _ARANGE = np.arange(tokens)
        _ARANGE.flags.writeable = False
    return _ARANGE[:tokens]


def _stream_targets(
    ids: np.ndarray, mask: np.ndarray, cu: np.ndarray, cu_padded: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A token stream's stored arrays -> ``(labels, loss_mask, position_ids, padding_mask,
    sequence_targets)``: ``[T]`` each, plus int32 ``[N]``. A fixed number of vector ops over the whole
    stream, whatever the number of packs or sequences in it: per token, its position in its sequence
    and the position of its sequence's last real token decide everything."""
    tokens = ids.shape[0]
    bounds = cu_padded.astype(np.int64)  # int64 throughout: no mixed-type (casting) loops over the stream
    starts = bounds[:-1]
    padded = bounds[1:] - starts
    position_ids = _token_index(tokens) - starts.repeat(padded)
    last_real = (cu[1:] - cu[:-1] - 1).astype(np.int64).repeat(padded)  # per token: its sequence's last real position
    no_label = position_ids >= last_real  # the last real token and the padding predict nothing
    padding_mask = position_ids > last_real
    labels = np.empty(tokens, dtype=np.int64)
    labels[:-1] = ids[1:]
    labels[no_label] = IGNORE_INDEX  # always includes the stream's last token
    loss_mask = np.empty(tokens, dtype=np.float32)
    np.greater(mask[1:], no_label[:-1], out=loss_mask[:-1], casting="unsafe")  # target t+1, and t has a label
    loss_mask[-1] = 0.0
    sequence_targets = np.add.reduceat(loss_mask, starts).astype(np.int32)  # exact below 2**24
    return labels, loss_mask, position_ids, padding_mask, sequence_targets


def _cat(tensors: Sequence[torch.Tensor | None], pad_frames: bool = False) -> torch.Tensor | None:
    """The present tensors concatenated (``pad_frames``: audio features, F zero-padded to the longest);
    a single one is passed through uncopied (media are megabytes)."""
    present = [x for x in tensors if x is not None]
    if len(present) <= 1:
        return present[0] if present else None
    if pad_frames:
        frames = max(x.shape[1] for x in present)
        present = [F.pad(x, (0, 0, 0, frames - x.shape[1])) for x in present]
    return torch.cat(present)


def _stream(samples: Sequence[PackedSample]) -> tuple[PackArrays, np.ndarray]:
    """The packs end to end: ``((input_ids, target_mask, cu_seqlens, cu_seqlens_padded), cu_packs)``,
    each pack's boundaries shifted by the packs before it."""
    true_cu = [s.cu_seqlens.numpy() for s in samples]
    padded_cu = [s.cu_seqlens_padded.numpy() for s in samples]
    real = np.cumsum([0] + [int(c[-1]) for c in true_cu], dtype=np.int32)
    cu_packs = np.cumsum([0] + [int(c[-1]) for c in padded_cu], dtype=np.int32)
    zero = np.zeros(1, dtype=np.int32)
    arrays = (
        np.concatenate([s.input_ids.numpy() for s in samples]),
        np.concatenate([s.target_mask.numpy() for s in samples]),
        np.concatenate([zero, *(c[1:] + r for c, r in zip(true_cu, real[:-1], strict=True))]),
        np.concatenate([zero, *(c[1:] + r for c, r in zip(padded_cu, cu_packs[:-1], strict=True))]),
    )
    return arrays, cu_packs


def collate_packs(samples: Sequence[PackedSample]) -> PackedBatch:
    """Concatenate the packs of a micro-batch into one THD stream (see the module docstring)."""
    return _collate_one(samples[0]) if len(samples) == 1 else _collate_stream(samples)


def _collate_stream(samples: Sequence[PackedSample]) -> PackedBatch:
    """Any number of packs: concatenated into one stream, then the stream's targets."""
    return _batch(samples, *_stream(samples))


def _collate_one(s: PackedSample) -> PackedBatch:
    """``collate_packs([s])``, the common micro-batch of one pack, with no stream to build: the batch
    holds the pack's own arrays (``input_ids`` as a ``[1, T]`` view), boundaries and media."""
    arrays = s.arrays or (s.input_ids.numpy(), s.target_mask.numpy(), s.cu_seqlens.numpy(), s.cu_seqlens_padded.numpy())
    return _batch([s], arrays, np.array([0, arrays[3][-1]], dtype=np.int32))


def _batch(samples: Sequence[PackedSample], arrays: PackArrays, cu_packs: np.ndarray) -> PackedBatch:
    """The batch of ``samples`` from their stream's stored arrays; the per-batch Python values come
    from one ``tolist()`` of the padded boundaries."""
    ids, _, cu, padded = arrays
    labels, loss_mask, position_ids, padding_mask, sequence_targets = _stream_targets(*arrays)
    bounds = padded.tolist()
    subflavors = [s.__subflavors__ for s in samples]
    sources = tuple(src for s in samples for src in (s.__sources__ or ()))
    return PackedBatch(
        __key__=[s.__key__ for s in samples],
        __restore_key__=(),
        __subflavors__=subflavors if any(x is not None for x in subflavors) else None,
        __sources__=sources or None,
        input_ids=torch.from_numpy(ids[None]),  # one pack: a view of its own tensor
        labels=torch.from_numpy(labels[None]),
        loss_mask=torch.from_numpy(loss_mask[None]),
        position_ids=torch.from_numpy(position_ids[None]),
        padding_mask=torch.from_numpy(padding_mask[None]),
        cu_seqlens=torch.from_numpy(cu),
        cu_seqlens_padded=torch.from_numpy(padded),
        cu_packs=torch.from_numpy(cu_packs),
        max_seqlen=max([b - a for a, b in pairwise(bounds)]),
        target_tokens=sum(sequence_targets.tolist()),
        sequence_targets=torch.from_numpy(sequence_targets),
        pixel_patches=_cat([s.pixel_patches for s in samples]),
        media_sizes=_cat([s.media_sizes for s in samples]),
        audio_features=_cat([s.audio_features for s in samples], pad_frames=True),
        audio_lengths=_cat([s.audio_lengths for s in samples]),
        jpeg_data=_cat([s.jpeg_data for s in samples]),
        jpeg_frames=_jpeg_frames(samples),
    )


def item_patches(media_sizes: torch.Tensor) -> list[int]:
    """Patches of each visual item: ``frames * (H/16) * (W/16)`` (every kind, SPEC §8)."""
    rows = media_sizes.tolist()
    return [f * fmt.frame_patches(h, w) for f, h, w in rows]


def _jpeg_frames(samples: Sequence[PackedSample]) -> torch.Tensor | None:
    """The packs' ``jpeg_frames`` rows, each pack's byte offsets and patch rows shifted by the packs before it."""
    if all(s.jpeg_frames is None for s in samples):
        return None
    shifted, data, rows = [], 0, 0
    for s in samples:
        if s.jpeg_frames is not None and s.jpeg_data is not None:
            shifted.append(s.jpeg_frames + torch.tensor([data, 0, rows, 0, 0]))
            data += int(s.jpeg_data.shape[0])
        if s.media_sizes is not None:
            rows += sum(item_patches(s.media_sizes))
    return torch.cat(shifted)
