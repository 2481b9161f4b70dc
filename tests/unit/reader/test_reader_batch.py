"""Reader: a pack's stored arrays -> labels, label-aligned loss mask, position ids, boundaries and
PackedSeqParams, exactly; several packs -> one THD stream; media; on-device normalization; errors."""

from __future__ import annotations

import dataclasses
import io
import pickle
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest
import torch

import cook.reader.batch as batch_module
from cook import format as fmt
from cook.reader import IGNORE_INDEX, PackFormatError, collate_packs, decode_pack, normalize_patches, to_device

from .reader_data import crude_pack

# The worked example of cook/reader/batch.py: pad_multiple=4, sequences of 5 and 3 tokens.
SEQ_A = ([11, 12, 13, 14, 15], [0, 0, 1, 1, 1])
SEQ_B = ([21, 22, 23], [0, 1, 1])
SEQ_C = ([31, 32, 33, 34, 35, 36], [0, 0, 0, 1, 1, 1])
X = IGNORE_INDEX


def test_worked_example_exact() -> None:
    batch = collate_packs([decode_pack(crude_pack([SEQ_A, SEQ_B], pad_multiple=4))])
    assert batch.input_ids.tolist() == [[11, 12, 13, 14, 15, 0, 0, 0, 21, 22, 23, 0]]
    assert batch.labels.tolist() == [[12, 13, 14, 15, X, X, X, X, 22, 23, X, X]]
    assert batch.loss_mask.tolist() == [[0, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0]]
    assert batch.position_ids.tolist() == [[0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3]]
    assert batch.padding_mask.tolist() == [[False] * 5 + [True] * 3 + [False] * 3 + [True]]
    assert batch.cu_seqlens.tolist() == [0, 5, 8] and batch.cu_seqlens_padded.tolist() == [0, 8, 12]
    assert batch.max_seqlen == 8 and batch.target_tokens == 5 == int(batch.loss_mask.sum())
    assert batch.__key__ == ["pack-000000000"] and batch.cu_packs.tolist() == [0, 12]
    assert batch.input_ids.dtype == batch.labels.dtype == batch.position_ids.dtype == torch.int64
    assert batch.loss_mask.dtype == torch.float32 and batch.cu_seqlens.dtype == torch.int32


def test_packs_concatenate_into_one_stream_with_offsets() -> None:
    first = decode_pack(crude_pack([SEQ_A, SEQ_B], pad_multiple=4, key="pack-000000000"))
    second = decode_pack(crude_pack([SEQ_C], pad_multiple=4, key="pack-000000001"))
    batch = collate_packs([first, second])
    assert batch.num_tokens == 20 and batch.input_ids.shape == (1, 20)
    assert batch.cu_seqlens.tolist() == [0, 5, 8, 14]
    assert batch.cu_seqlens_padded.tolist() == [0, 8, 12, 20]
    assert batch.cu_packs.tolist() == [0, 12, 20]
    assert batch.labels[0, 12:].tolist() == [32, 33, 34, 35, 36, X, X, X]
    assert batch.loss_mask[0, 12:].tolist() == [0, 0, 1, 1, 1, 0, 0, 0]
    assert batch.position_ids[0, 12:].tolist() == list(range(8))
    assert batch.target_tokens == 5 + 3 and batch.max_seqlen == 8
    params = batch.packed_seq_params
    assert params.qkv_format == "thd"
    assert params.cu_seqlens_q is batch.cu_seqlens and params.cu_seqlens_kv is batch.cu_seqlens
    assert params.cu_seqlens_q_padded is batch.cu_seqlens_padded
    assert params.cu_seqlens_kv_padded is batch.cu_seqlens_padded
    assert params.max_seqlen_q == params.max_seqlen_kv == 8


def test_loss_mask_counts_the_stored_targets() -> None:
    rng = np.random.default_rng(0)
    sequences = []
    for length in (1, 2, 7, 9, 16):
        mask = rng.integers(0, 2, length).tolist()
        mask[0] = 0
        sequences.append((rng.integers(1, 100, length).tolist(), mask))
    sample = decode_pack(crude_pack(sequences, pad_multiple=8))
    batch = collate_packs([sample])
    assert batch.target_tokens == sample.target_tokens == sum(sum(m) for _, m in sequences)
    for start, end in zip(batch.cu_seqlens_padded[:-1].tolist(), batch.cu_seqlens_padded[1:].tolist(), strict=True):
        assert batch.position_ids[0, start] == 0 and batch.labels[0, end - 1] == IGNORE_INDEX


def _media_pack(key: str, patches: int, sizes: list[list[int]], frames: int, lengths: list[int]) -> dict:
    rng = np.random.default_rng(patches)
    return crude_pack(
        [SEQ_A],
        pad_multiple=4,
        key=key,
        **{
            fmt.PIXEL_PATCHES: rng.integers(0, 256, (patches, fmt.PATCH_VALUES), dtype=np.uint8),
            fmt.MEDIA_SIZES: np.array(sizes, dtype=np.int32),
            fmt.AUDIO_FEATURES: rng.standard_normal((len(lengths), frames, fmt.MEL_BINS)).astype(np.float16),
            fmt.AUDIO_LENGTHS: np.array(lengths, dtype=np.int32),
        },
    )


def test_media_concatenate_and_normalize_after_the_copy() -> None:
    crudes = [_media_pack("pack-1", 4, [[1, 32, 32]], 10, [7]), _media_pack("pack-2", 8, [[2, 32, 32]], 6, [6, 3])]
    batch = collate_packs([decode_pack(c) for c in crudes])
    patches = np.concatenate([fmt.load_npy(c[fmt.PIXEL_PATCHES]) for c in crudes])
    assert batch.pixel_patches is not None and batch.pixel_patches.dtype == torch.uint8
    assert np.array_equal(batch.pixel_patches.numpy(), patches) and batch.pixel_values is None
    assert batch.media_sizes is not None and batch.media_sizes.tolist() == [[1, 32, 32], [2, 32, 32]]
    assert batch.audio_features is not None and batch.audio_features.shape == (3, 10, fmt.MEL_BINS)
    assert batch.audio_features.dtype == torch.float16 and not batch.audio_features[1:, 6:].any()
    assert batch.audio_lengths is not None and batch.audio_lengths.tolist() == [7, 6, 3]

    moved = to_device(batch, "cpu")
    assert moved.pixel_patches is not None and moved.pixel_patches.dtype == torch.uint8
    assert moved.pixel_values is not None and moved.pixel_values.shape == (12, 3, 16, 16)
    mean = np.array(fmt.CLIP_MEAN).reshape(1, 3, 1, 1)
    std = np.array(fmt.CLIP_STD).reshape(1, 3, 1, 1)
    expected = (patches.reshape(12, 3, 16, 16).astype(np.float64) / 255 - mean) / std
    assert moved.pixel_values.dtype == torch.float32
    np.testing.assert_allclose(moved.pixel_values.numpy(), expected, atol=1e-5)
    np.testing.assert_allclose(moved.pixel_values.flatten(1).numpy(), expected.reshape(12, 768), atol=1e-5)
    assert torch.equal(moved.labels, batch.labels) and moved.packed_seq_params.max_seqlen_q == 8


def test_batch_crosses_a_worker_boundary_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pickle a loader worker sends: every field back with the same values, dtypes and shapes;
    small tensors inline as NumPy arrays (no torch storage in the stream), large ones via torch."""
    crudes = [_media_pack("pack-1", 4, [[1, 32, 32]], 10, [7]), _media_pack("pack-2", 8, [[2, 32, 32]], 6, [6, 3])]
    batch = collate_packs([decode_pack(c) for c in crudes])
    assert batch.pixel_patches is not None
    monkeypatch.setattr(batch_module, "INLINE_BYTES", batch.pixel_patches.nbytes - 1)  # patches: too large
    _, (_, state) = batch.__reduce__()
    assert isinstance(state["pixel_patches"], torch.Tensor) and isinstance(state["labels"], np.ndarray)
    back = pickle.loads(ForkingPickler.dumps(batch))
    for field in dataclasses.fields(batch):
        before, after = getattr(batch, field.name), getattr(back, field.name)
        if isinstance(before, torch.Tensor):
            assert after.dtype == before.dtype and after.shape == before.shape and torch.equal(after, before)
            assert after.numpy().flags.writeable
        else:
            assert after == before, field.name
    assert back.packed_seq_params.cu_seqlens_q_padded.tolist() == batch.cu_seqlens_padded.tolist()


def test_normalize_patches_channels() -> None:
    patches = torch.zeros(1, 768, dtype=torch.uint8)
    patches[0, 256:512] = 255  # channel 1 (C x 16 x 16 layout)
    values = normalize_patches(patches)
    assert values[0, 0].unique().tolist() == pytest.approx([-fmt.CLIP_MEAN[0] / fmt.CLIP_STD[0]])
    assert values[0, 1].unique().tolist() == pytest.approx([(1 - fmt.CLIP_MEAN[1]) / fmt.CLIP_STD[1]])


def _object_array_bytes() -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"evil": 1}], dtype=object), allow_pickle=True)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("member", "data", "message"),
    [
        (fmt.INPUT_IDS, _object_array_bytes(), "not a plain .npy array"),
        (fmt.INPUT_IDS, fmt.npy_bytes(np.zeros(12, dtype=np.float32)), "expected int32"),
        (fmt.PIXEL_PATCHES, fmt.npy_bytes(np.zeros((2, 700), dtype=np.uint8)), "trailing dims [768]"),
        (fmt.CU_SEQLENS, fmt.npy_bytes(np.array([0, 5, 13], dtype=np.int32)), "do not describe 12 tokens"),
        (fmt.LOSS_MASK, fmt.npy_bytes(np.zeros(11, dtype=np.uint8)), "has 11 tokens"),
        (fmt.META, None, "missing members ['meta.json']"),
    ],
)
def test_malformed_packs_are_refused(member: str, data: bytes | None, message: str) -> None:
    crude = crude_pack([SEQ_A, SEQ_B], pad_multiple=4, key="pack-000000007")
    if data is None:
        del crude[member]
    else:
        crude[member] = data
    with pytest.raises(PackFormatError, match="pack-000000007") as error:
        decode_pack(crude)
    assert message in str(error.value)


@pytest.mark.parametrize(
    ("cu", "cu_padded"),
    [
        ([1, 5, 8], [0, 8, 12]),  # true boundaries do not start at 0
        ([0, 5, 8], [4, 8, 12]),  # padded boundaries do not start at 0
        ([0, 5, 8], [0, 8, 11]),  # padded boundaries do not end at the 12 tokens
        ([0, 5, 5], [0, 8, 12]),  # an empty sequence
        ([0, 9, 12], [0, 8, 12]),  # a sequence longer than its padded length
        ([0, 5, 8], [0, 8, 10, 12]),  # boundary arrays of different lengths
        ([0], [0]),  # no sequence at all
    ],
)
def test_inconsistent_boundaries_are_refused(cu: list[int], cu_padded: list[int]) -> None:
    crude = crude_pack([SEQ_A, SEQ_B], pad_multiple=4, key="pack-000000008")  # 12 tokens: [0, 8, 12]
    crude[fmt.CU_SEQLENS] = fmt.npy_bytes(np.array(cu, dtype=np.int32))
    crude[fmt.CU_SEQLENS_PADDED] = fmt.npy_bytes(np.array(cu_padded, dtype=np.int32))
    with pytest.raises(PackFormatError, match="pack-000000008") as error:
        decode_pack(crude)
    assert f"{cu} and {fmt.CU_SEQLENS_PADDED} {cu_padded} do not describe 12 tokens" in str(error.value)


def test_a_replaced_pack_is_collated_from_its_new_tensors() -> None:
    """``decode_pack`` keeps NumPy views for collation; ``dataclasses.replace`` must not carry them over."""
    sample = decode_pack(crude_pack([SEQ_A, SEQ_B], pad_multiple=4))
    assert sample.arrays is not None and sample.arrays[0].ctypes.data == sample.input_ids.data_ptr()
    swapped = dataclasses.replace(sample, input_ids=sample.input_ids + 100)
    assert swapped.arrays is None
    labels = collate_packs([swapped]).labels[0].tolist()
    assert labels[:4] == [112, 113, 114, 115] and labels[8:10] == [122, 123]
