"""``cook.validate.stats.summarize``: the typed ``StatsSummary`` of hand-made stats, and its ``to_dict`` as
``cook stats --json`` prints it. The JSON strings were printed by the dict-returning ``summarize`` this
type replaced (plus the truncation, ``stored_fill`` and ``--global-batch-size`` keys ``cook stats`` added to it, and the
``video`` and ``video_share`` media keys, and ``stored_bytes``): key order and ``0`` against ``0.0`` included."""

from __future__ import annotations

import json
from collections import Counter

from cook import format as fmt
from cook.dataset_stats import Histogram, MediaTokens, StepsPerEpoch, StoredBytes
from cook.validate.stats import DatasetStats, summarize

STATS = DatasetStats(
    seq_len=1024,
    counts=fmt.Counts(records_in=12, target_tokens=1234, truncated_sequences=2, truncated_tokens=37),
    pack_tokens=[1000, 1024, 512],
    true_tokens=[900, 1000, 500],
    sources_per_pack=[3, 5, 1],
    seq_lengths=[100, 200, 600, 50, 150, 200, 300, 300, 500],
    image_tokens=120,
    video_tokens=240,
    audio_tokens=13,
    stored_bytes=Counter({"image": 138240, "video": 92160, "audio": 26000, "text": 20270}),
    rejects=Counter({"too_long": 1, "bad_json": 2, "bad_role": 1}),
)
STATS_JSON = (
    '{"packs": 3, "sources": 9, "seq_len": 1024, "records_in": 12, "tokens": 2400, "padded_tokens": 2536, '
    '"padding_tokens": 136, "packing_efficiency": 0.78125, "stored_fill": 0.9463722397476341, '
    '"fill": {"min": 0.5, "median": 0.9765625, '
    '"p90": 0.9953125, "max": 1.0, "mean": 0.8255208333333334, "histogram": {"edges": [0.0, 0.1, 0.2, 0.3, 0.4, '
    '0.5, 0.6, 0.7, 0.8, 0.9, 1.0], "counts": [0, 0, 0, 0, 0, 1, 0, 0, 0, 2]}}, "sequence_length": {"min": 50.0, '
    '"median": 200.0, "p90": 520.0, "max": 600.0, "mean": 266.6666666666667, "histogram": {"edges": [0.0, 64.0, '
    "128.0, 192.0, 256.0, 320.0, 384.0, 448.0, 512.0, 576.0, 640.0, 704.0, 768.0, 832.0, 896.0, 960.0, 1024.0], "
    '"counts": [1, 1, 1, 2, 2, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0]}}, "sources_per_pack": {"min": 1.0, "median": 3.0, '
    '"p90": 4.6, "max": 5.0, "mean": 3.0, "histogram": {"edges": [0.5, 1.5, 2.5, 3.5, 4.5, 5.5], "counts": [1, 0, '
    '1, 0, 1]}}, "media_tokens": {"image": 120, "video": 240, "audio": 13, "image_share": 0.05, '
    '"video_share": 0.1, "audio_share": 0.005416666666666667}, "stored_bytes": {"image": 138240, "video": 92160, '
    '"audio": 26000, "text": 20270, "image_per_token": 1152.0, "video_per_token": 384.0, "audio_per_token": 2000.0, '
    '"text_per_token": 10.0}, "rejects": {"bad_json": 2, "bad_role": 1, "too_long": 1}, "truncated_sequences": 2, '
    '"truncated_tokens": 37, "global_batch_size": 2, "steps_per_epoch": 1, "target_tokens_per_step": 823}'
)
EMPTY_JSON = (
    '{"packs": 0, "sources": 0, "seq_len": 256, "records_in": 2, "tokens": 0, "padded_tokens": 0, '
    '"padding_tokens": 0, "packing_efficiency": 0.0, "stored_fill": 0.0, "fill": {"min": 0, "median": 0, "p90": 0, "max": 0, "mean": 0, '
    '"histogram": {"edges": [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0], "counts": [0, 0, 0, 0, 0, 0, 0, '
    '0, 0, 0]}}, "sequence_length": {"min": 0, "median": 0, "p90": 0, "max": 0, "mean": 0, "histogram": {"edges": '
    "[0.0, 16.0, 32.0, 48.0, 64.0, 80.0, 96.0, 112.0, 128.0, 144.0, 160.0, 176.0, 192.0, 208.0, 224.0, 240.0, "
    '256.0], "counts": [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]}}, "sources_per_pack": {"min": 0, '
    '"median": 0, "p90": 0, "max": 0, "mean": 0, "histogram": {"edges": [0.5, 1.5], "counts": [0]}}, '
    '"media_tokens": {"image": 0, "video": 0, "audio": 0, "image_share": 0.0, "video_share": 0.0, "audio_share": '
    '0.0}, "stored_bytes": {"image": 0, "video": 0, "audio": 0, "text": 0, "image_per_token": 0.0, '
    '"video_per_token": 0.0, "audio_per_token": 0.0, "text_per_token": 0.0}, "rejects": {"bad_json": 2}, "truncated_sequences": 0, "truncated_tokens": 0}'
)


def test_summary_is_typed() -> None:
    summary = summarize(STATS, global_batch_size=2)
    assert (summary.packs, summary.sources, summary.tokens, summary.padding_tokens) == (3, 9, 2400, 136)
    assert summary.packing_efficiency == 2400 / (3 * 1024) and summary.stored_fill == 2400 / 2536
    assert summary.fill.histogram == Histogram(
        edges=(0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0), counts=(0, 0, 0, 0, 0, 1, 0, 0, 0, 2)
    )
    assert (summary.sources_per_pack.min, summary.sources_per_pack.median, summary.sources_per_pack.max) == (1, 3, 5)
    assert summary.media_tokens == MediaTokens(
        image=120, video=240, audio=13, image_share=0.05, video_share=0.1, audio_share=13 / 2400
    )
    assert summary.media_tokens.line() == "image 120 (5.0%), video 240 (10.0%), audio 13 (0.5%)"
    assert summary.stored_bytes == StoredBytes(138240, 92160, 26000, 20270, 1152.0, 384.0, 2000.0, 10.0)
    assert summary.stored_bytes.line() == (
        "image 1,152.0 B (0.1 MB), video 384.0 B (0.1 MB), audio 2,000.0 B (0.0 MB), text 10.0 B (0.0 MB)"
    )
    assert list(summary.rejects.items()) == [("bad_json", 2), ("bad_role", 1), ("too_long", 1)]
    assert (summary.truncated_sequences, summary.truncated_tokens) == (2, 37)
    assert summary.steps == StepsPerEpoch(global_batch_size=2, steps_per_epoch=1, target_tokens_per_step=823)
    assert summarize(STATS).steps is None


def test_json_is_what_cook_stats_printed_before() -> None:
    assert json.dumps(summarize(STATS, global_batch_size=2).to_dict()) == STATS_JSON
    without_steps = json.loads(STATS_JSON)
    for key in ("global_batch_size", "steps_per_epoch", "target_tokens_per_step"):
        del without_steps[key]
    assert json.dumps(summarize(STATS).to_dict()) == json.dumps(without_steps)


def test_json_of_a_dataset_without_packs() -> None:
    empty = DatasetStats(seq_len=256, counts=fmt.Counts(records_in=2), rejects=Counter({"bad_json": 2}))
    assert json.dumps(summarize(empty).to_dict()) == EMPTY_JSON
