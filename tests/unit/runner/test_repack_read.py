"""Sequences read back out of a written pack are the samples it was built from: ids, the target mask
(its first entry, which the writer zeroes, restored from meta.json), visual items with their patch
rows and sizes, audio items with their own clips and frames, the media end; packing them again gives
the same bytes."""

from __future__ import annotations

import numpy as np

from cook import format as fmt
from cook.config import PackingConfig
from cook.packing.packer import build_pack
from cook.runner.repack_read import read_sequences, repack_unit
from cook.runner.staging import DiskStore, PatchSpan
from cook.runner.units import SequenceReads, Unit
from cook.types import MediaItem, TokenizedSample
from cook.writer.shards import write_shard

AUDIO_ID, AUDIO_END_ID, IMG_END_ID, PAD_ID = 7, 8, 5, 0
CONTROL_IDS = {fmt.AUDIO_TOKEN: AUDIO_ID, fmt.AUDIO_END: AUDIO_END_ID, fmt.IMG_END: IMG_END_ID}


def _text(source: str, length: int, first_target: bool = False) -> TokenizedSample:
    mask = np.zeros(length, np.uint8)
    mask[length // 2 :] = 1
    mask[0] = first_target
    return TokenizedSample(source, np.arange(10, 10 + length, dtype=np.int32), mask)


def _image(source: str, frames: int, side_px: int, label: str) -> TokenizedSample:
    rows = frames * (side_px // 16) ** 2
    rng = np.random.default_rng(rows)
    item = MediaItem(
        "video" if label == "video" else "image",
        (),
        rng.integers(0, 256, (rows, 768), dtype=np.uint8),
        (frames, side_px, side_px),
        label,  # type: ignore[arg-type]
    )
    ids = np.array([1, 4, *[9] * (rows // 4), IMG_END_ID, 20, 21, 22], dtype=np.int32)
    mask = np.array([0] * (len(ids) - 2) + [1, 1], dtype=np.uint8)
    return TokenizedSample(source, ids, mask, (item,), media_end=len(ids) - 3)


def _audio_item(lengths: list[int], seed: int) -> MediaItem:
    rng = np.random.default_rng(seed)
    features = np.zeros((len(lengths), max(lengths), fmt.MEL_BINS), np.float16)
    for c, frames in enumerate(lengths):
        features[c, :frames] = rng.standard_normal((frames, fmt.MEL_BINS)).astype(np.float16)
    return MediaItem("audio", (), audio_features=features, audio_lengths=np.array(lengths, np.int32))


def _audio(source: str) -> TokenizedSample:
    """Two audio items: clips [3000, 1500] (375 + 188 tokens) and [100] (13 tokens)."""
    first, second = _audio_item([3000, 1500], 1), _audio_item([100], 2)
    ids = [1, 6, *[AUDIO_ID] * 563, AUDIO_END_ID, 6, *[AUDIO_ID] * 13, AUDIO_END_ID, 30, 31]
    mask = np.zeros(len(ids), np.uint8)
    mask[-2:] = 1
    return TokenizedSample(source, np.array(ids, np.int32), mask, (first, second), media_end=len(ids) - 2)


def _samples() -> list[TokenizedSample]:
    return [
        _text("a.jsonl#1", 13, first_target=True),
        _image("a.jsonl#2", 1, 64, "image"),
        _audio("b.tar#k1"),
        _image("b.tar#k2", 4, 32, "video"),
        _text("b.tar#k3", 5),
    ]


def _write(tmp_path, samples: list[TokenizedSample]) -> str:
    write_shard(str(tmp_path), 0, 0, [build_pack(samples, PAD_ID, 8)])
    return str(tmp_path / fmt.shard_name(0))


def _reads(shard: str, positions: list[int]) -> SequenceReads:
    n = len(positions)
    return SequenceReads((shard,), np.zeros(n, np.int32), np.zeros(n, np.int64), np.array(positions, np.int32))


def _members(samples: list[TokenizedSample]) -> dict[str, bytes]:
    pack = build_pack(samples, PAD_ID, 8)
    arrays = {
        fmt.INPUT_IDS: pack.input_ids,
        fmt.LOSS_MASK: pack.loss_mask,
        fmt.CU_SEQLENS: pack.cu_seqlens,
        fmt.PIXEL_PATCHES: pack.pixel_patches,
        fmt.MEDIA_SIZES: pack.media_sizes,
        fmt.AUDIO_FEATURES: pack.audio_features,
        fmt.AUDIO_LENGTHS: pack.audio_lengths,
    }
    members = {name: fmt.npy_bytes(array) for name, array in arrays.items() if array is not None}
    members["meta"] = repr([s.to_meta() for s in pack.sequences]).encode()
    return members


def test_sequences_come_back_as_they_were_built(tmp_path) -> None:
    samples = _samples()
    shard = _write(tmp_path, samples)
    order = [4, 2, 0, 3, 1]
    got, _ = read_sequences(_reads(shard, order), CONTROL_IDS)
    for sample, want in zip(got, [samples[i] for i in order], strict=True):
        assert sample.source == want.source and sample.media_end == want.media_end
        assert sample.input_ids.tolist() == want.input_ids.tolist()
        assert sample.loss_mask.tolist() == want.loss_mask.tolist()  # a.jsonl#1's first target too
        assert [m.visual_kind or m.kind for m in sample.media] == [m.visual_kind or m.kind for m in want.media]
        for item, original in zip(sample.media, want.media, strict=True):
            assert item.size == original.size and item.n_patches == original.n_patches
            if original.patches is not None:
                assert np.array_equal(item.patches, original.patches)
            if original.audio_features is not None:
                assert item.audio_features.shape == original.audio_features.shape
                assert np.array_equal(item.audio_features, original.audio_features)
                assert item.audio_lengths.tolist() == original.audio_lengths.tolist()
    assert _members(got) == _members([samples[i] for i in order])


def test_repack_unit_fits_each_sequence_to_the_new_seq_len(tmp_path) -> None:
    """At seq_len 64 the audio sample (584 tokens) does not fit, and
    truncating it would cut its media: it is rejected too_long; the rest fit as they are."""
    shard = _write(tmp_path, _samples())
    unit = Unit(3, shard, "cooked", (0, 5), reads=_reads(shard, [0, 1, 2, 3, 4]))
    summary, samples, _ = repack_unit(unit, PackingConfig(seq_len=64, pad_multiple=8), CONTROL_IDS)
    assert summary.unit == 3 and summary.records_in == 5
    assert [(r.source, r.reason.value) for r in summary.rejects] == [("b.tar#k1", "too_long")]
    assert [s.source for s in samples] == ["a.jsonl#1", "a.jsonl#2", "b.tar#k2", "b.tar#k3"]
    assert summary.lengths.tolist() == [13, 10, 10, 5] and summary.n_patches.tolist() == [0, 16, 16, 0]


def test_patch_rows_are_staged_as_references_into_the_source_shard(tmp_path) -> None:
    """A repack unit's visual items carry a PatchSpan; a DiskStore stages that reference instead of the
    rows, and the staged samples it gives back pack to the same bytes, their patches read from the source."""
    samples = _samples()
    shard = _write(tmp_path, samples)
    unit = Unit(0, shard, "cooked", (0, 5), reads=_reads(shard, [0, 1, 2, 3, 4]))
    summary, got, spans = repack_unit(unit, PackingConfig(seq_len=1024, pad_multiple=8), CONTROL_IDS)
    kinds = [tuple(type(span).__name__ for span in item_spans) for item_spans in spans]
    assert kinds == [(), ("PatchSpan",), ("NoneType", "NoneType"), ("PatchSpan",), ()]
    assert spans[1][0] == PatchSpan(shard, spans[1][0].offset, 16) and spans[3][0].rows == 16
    store = DiskStore(str(tmp_path / "out"))
    store.put(summary, got, spans)
    staged = list(store.get(0))
    assert _members(staged) == _members(samples)
    assert staged[1].media[0].patches.base is not None  # a view, not a copy
    stage = tmp_path / "out" / ".cook-progress" / "stage" / "unit-000000.stage"
    rows = [samples[i].media[0].patches.tobytes() for i in (1, 3)]
    assert not any(row in stage.read_bytes() for row in rows)
    store.put(summary, got)  # without spans: the rows themselves
    assert all(row in stage.read_bytes() for row in rows)
