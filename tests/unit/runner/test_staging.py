"""The staging store gives back every field of every sample, as read-only views of the stage file."""

from pathlib import Path

import numpy as np
import pytest

from cook.errors import RejectReason
from cook.runner.output_dir import stage_dir
from cook.runner.staging import DiskStore, MemoryStore
from cook.runner.units import PackPlan, Rejects, UnitDone, UnitSummary, WindowTask, heavy_sample
from cook.types import MediaItem, PlaceholderBlock, RejectRecord, TokenizedSample


def _samples() -> list[TokenizedSample]:
    block = (PlaceholderBlock("<img>", "<image>", 1, "</img>"),)
    image = MediaItem("image", block, patches=np.full((4, 768), 7, np.uint8), size=(1, 32, 32), visual_kind="image")
    audio = MediaItem(
        "audio",
        block,
        audio_features=np.arange(2 * 5 * 128, dtype=np.float16).reshape(2, 5, 128),
        audio_lengths=np.array([5, 3], np.int32),
    )
    return [
        TokenizedSample("a.jsonl#1", np.arange(5, dtype=np.int32), np.array([0, 0, 1, 1, 0], np.uint8)),
        TokenizedSample(
            "b.tar#ключ", np.arange(3, dtype=np.int32), np.array([0, 1, 1], np.uint8), (image, audio), 2, True, 9
        ),
        TokenizedSample("c#3", np.zeros(1, np.int32), np.ones(1, np.uint8)),
    ]


def _summary(unit: int, samples: list[TokenizedSample]) -> UnitSummary:
    rejects = (RejectRecord("a.jsonl#2", RejectReason.BAD_JSON, "x\ny"),)
    lengths = np.array([s.length for s in samples], np.int32)
    n_patches = np.array([s.n_patches for s in samples], np.int32)
    return UnitSummary(unit, len(samples) + 1, rejects, lengths, n_patches, any(heavy_sample(s) for s in samples))


@pytest.mark.parametrize("kind", ["disk", "memory"])
def test_samples_round_trip(kind: str, tmp_path: Path) -> None:
    store = DiskStore(str(tmp_path)) if kind == "disk" else MemoryStore()
    samples = _samples()
    store.put(_summary(3, samples), samples)
    back = store.get(3)
    for got, want in zip(back, samples, strict=True):
        assert (got.source, got.truncated, got.truncated_tokens) == (want.source, want.truncated, want.truncated_tokens)
        assert got.input_ids.dtype == np.int32 and got.loss_mask.dtype == np.uint8
        assert got.input_ids.tolist() == want.input_ids.tolist() and got.loss_mask.tolist() == want.loss_mask.tolist()
        assert [(m.kind, m.visual_kind, m.size, m.n_patches) for m in got.media] == [
            (m.kind, m.visual_kind, m.size, m.n_patches) for m in want.media
        ]
    image, audio = back[1].media
    assert (image.patches == 7).all() and image.patches.shape == (4, 768)
    assert (audio.audio_features == samples[1].media[1].audio_features).all()
    assert audio.audio_lengths.tolist() == [5, 3]
    store.drop(3)
    with pytest.raises((KeyError, FileNotFoundError)):
        DiskStore(str(tmp_path)).get(3) if kind == "disk" else store.get(3)


def test_disk_summary_survives_the_process_and_drop_removes_it(tmp_path: Path) -> None:
    samples = _samples()
    summary = _summary(5, samples)
    DiskStore(str(tmp_path)).put(summary, samples)
    again = DiskStore(str(tmp_path)).summary(5)
    assert again is not None
    assert again == summary.done() == UnitDone(5, 4, Rejects.of(summary.rejects), 3, 9)
    lengths, n_patches, heavy = DiskStore(str(tmp_path)).lengths(5)
    assert lengths.tolist() == [5, 3, 1] and n_patches.tolist() == [0, 4, 0] and heavy
    assert DiskStore(str(tmp_path)).summary(6) is None
    DiskStore(str(tmp_path)).drop(5)
    assert DiskStore(str(tmp_path)).summary(5) is None
    assert list(Path(stage_dir(str(tmp_path))).iterdir()) == []


def test_staged_unit_indexes_like_a_list(tmp_path: Path) -> None:
    store, samples = DiskStore(str(tmp_path)), _samples()
    store.put(_summary(2, samples), samples)
    back = store.get(2)
    assert len(back) == 3 and back[-1].source == "c#3" and [s.source for s in back[1:]] == ["b.tar#ключ", "c#3"]
    with pytest.raises(IndexError):
        back[3]
    with pytest.raises(IndexError):
        back[-4]


def test_staged_views_are_read_only(tmp_path: Path) -> None:
    samples = _samples()
    store = DiskStore(str(tmp_path))
    store.put(_summary(0, samples), samples)
    ids = store.get(0)[0].input_ids
    with pytest.raises(ValueError):
        ids[0] = 1


def test_an_empty_unit_stages(tmp_path: Path) -> None:
    store = DiskStore(str(tmp_path))
    store.put(_summary(1, []), [])
    assert list(store.get(1)) == []


@pytest.mark.parametrize("kind", ["disk", "memory"])
def test_take_gives_the_samples_at_refs_in_order(kind: str, tmp_path: Path) -> None:
    """``take(refs)`` equals ``get(unit)[position]`` for each ref: any order, units interleaved,
    repeats, media and truncation included."""
    store = DiskStore(str(tmp_path)) if kind == "disk" else MemoryStore()
    samples = _samples()
    for unit in (0, 1, 2):
        store.put(_summary(unit, samples), samples)
    refs = np.array([[2, 1], [0, 0], [1, 2], [2, 1], [0, 1], [1, 0], [2, 0]], np.int64)
    taken = store.take(refs)
    want = [store.get(unit)[position] for unit, position in refs.tolist()]
    assert [s.source for s in taken] == [s.source for s in want] == [samples[p].source for p in refs[:, 1]]
    for got, ref in zip(taken, want, strict=True):
        assert got.input_ids.tolist() == ref.input_ids.tolist() and got.loss_mask.tolist() == ref.loss_mask.tolist()
        assert (got.truncated, got.truncated_tokens, got.media_end) == (
            ref.truncated,
            ref.truncated_tokens,
            ref.media_end,
        )
        assert [(m.kind, m.size, m.n_patches) for m in got.media] == [(m.kind, m.size, m.n_patches) for m in ref.media]
    assert taken[0].truncated and taken[0].truncated_tokens == 9 and (taken[0].media[0].patches == 7).all()
    assert store.take(np.zeros((0, 2), np.int64)) == []


def test_a_source_with_a_lone_surrogate_stages(tmp_path: Path) -> None:
    """A source from an undecodable file name (``os.fsdecode`` gives lone surrogates) is one orjson
    refuses: the header falls back to escaped JSON and reads back the same."""
    samples = [*_samples(), TokenizedSample("caf\udce9.jsonl#4", np.arange(2, dtype=np.int32), np.ones(2, np.uint8))]
    store = DiskStore(str(tmp_path))
    store.put(_summary(0, samples), samples)
    assert [s.source for s in DiskStore(str(tmp_path)).get(0)] == [s.source for s in samples]


@pytest.mark.parametrize("kind", ["disk", "memory"])
def test_a_window_plan_round_trips_and_is_only_its_windows(kind: str, tmp_path: Path) -> None:
    store = DiskStore(str(tmp_path)) if kind == "disk" else MemoryStore()
    window = WindowTask(3, ((1, 2, 4), (2, 0, 1)))
    plan = PackPlan(np.array([[2, 0], [1, 3], [1, 2]], np.int64), np.array([0, 2, 3], np.int64))
    assert store.plan(window) is None
    store.put_plan(window, plan)
    fresh = DiskStore(str(tmp_path)) if kind == "disk" else store  # another worker reads the staged plan
    back = fresh.plan(window)
    assert back is not None and back.refs.tolist() == plan.refs.tolist() and back.bounds.tolist() == [0, 2, 3]
    refs, bounds = back.packs_in(1, 2)
    assert refs.tolist() == [[1, 2]] and bounds.tolist() == [0, 1]
    assert fresh.plan(WindowTask(3, ((1, 2, 5),))) is None  # the same number, another window: not its plan
    fresh.drop_plan(3)
    assert fresh.plan(window) is None
    if kind == "disk":
        assert list(Path(stage_dir(str(tmp_path))).iterdir()) == []
