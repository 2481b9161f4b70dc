"""End to end with media: raw conversations with images, video (+ its sound) and audio -> ``cook run``
(in-process, ``--workers 0``) -> an Energon dataset loaded back through megatron.energon, where every
pack's placeholders agree with its stored media; bad media are rejected with their reason codes and
the run goes on. Two cooks: the bundled demo pipeline (dynamic images), and a generated dataset in
tiles mode."""

from __future__ import annotations

import io
import json
import tarfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml

from cook import format as fmt
from cook.cli.main import main
from tests.conftest import DEMO_DATA, DEMO_TOKENIZER, REPO, pipeline_dict, write_jsonl
from tests.e2e.energon_load import load_all_packs
from tests.unit.media.media_data import compressed_audio, png_header_only, rgb_bytes, sine, sound_bytes, video_bytes

Members = dict[str, bytes]
BAD_MEDIA = {  # source suffix -> reason, in both cooks
    "#sample-000005": "media_decode",  # corrupt JPEG
    "#sample-000006": "media_decode",  # truncated mp4
    "#sample-000007": "media_missing",  # a member that is not there
    "#sample-000008": "media_limit",  # a PNG header claiming 30000 x 30000
}


def _manifest(path: Path) -> dict:
    return json.loads((path / fmt.MANIFEST_NAME).read_text())


def _rejects(path: Path) -> dict[str, str]:
    lines = (path / fmt.REJECTS_NAME).read_text().splitlines()
    return {row["source"]: row["reason"] for row in map(json.loads, lines)}


def _packs(path: Path) -> dict[str, Members]:
    packs = load_all_packs(str(path), _manifest(path)["counts"]["packs"])
    assert sorted(packs) == [fmt.pack_key(i) for i in range(len(packs))]
    return packs


# ---------------------------------------------------------------- the demo pipeline
@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "out"
    sets = [f"input.path={DEMO_DATA}", f"input.media_root={DEMO_DATA / 'media'}", f"tokenizer.path={DEMO_TOKENIZER}"]
    sets += [
        "media.image.storage=raw",
        "media.video.storage=raw",
    ]  # the patches themselves (test_stored_frames: png/jpeg)
    argv = ["run", str(REPO / "pipelines" / "demo.yaml"), "--output", str(out), "--workers", "0", "--quiet"]
    assert main(argv + [arg for s in sets for arg in ("--set", s)]) == 0
    return out


# ---------------------------------------------------------------- a generated dataset, tiles mode
def _tar(path: Path, samples: list[tuple[str, dict, Members]]) -> None:
    with tarfile.open(path, "w") as tar:
        for key, body, media in samples:
            for name, data in [(f"{key}.json", json.dumps(body).encode()), *sorted(media.items())]:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def _llava(human: str, **media: object) -> dict:
    return {"conversations": [{"from": "human", "value": human}, {"from": "gpt", "value": "An answer."}], **media}


def _image(width: int, height: int, fmt_name: str = "PNG", seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    return rgb_bytes(rng.integers(0, 256, (height, width, 3), dtype=np.uint8), fmt_name)


def _openai_rows() -> list[dict]:
    look = {"type": "text", "text": "Look:"}
    two_images = [look, {"type": "image", "image": "wide.jpg"}, {"type": "image", "image": "dot.png"}]
    video_then_audio = [
        {"role": "user", "content": [{"type": "video", "video": "clip.mp4"}, look]},
        {"role": "assistant", "content": "A video with sound."},
        {"role": "user", "content": [{"type": "audio", "audio": "voice.mp3"}]},
        {"role": "assistant", "content": "A voice."},
    ]
    return [
        {"messages": [{"role": "user", "content": two_images}, {"role": "assistant", "content": "Two images."}]},
        {"messages": video_then_audio},
        {"audio_filepath": "/nowhere/long.flac", "text": "forty five seconds of a tone"},  # basename fallback
        {"audio_filepath": "voice.mp3", "text": "a short tone"},
    ]


def _llava_samples() -> list[tuple[str, dict, Members]]:
    """Good samples (members, a bare-extension ref, a media_root file) and the four bad media."""
    short_wav = sound_bytes(sine(440.0, 0.05, 16_000), 16_000)
    return [
        # a JPEG member, then tall.png from media_root (no .png member, so no extension match)
        ("sample-000001", _llava("<image> and <image>", images=["sample-000001.jpg", "tall.png"]),
         {"sample-000001.jpg": _image(300, 200, "JPEG", seed=3)}),
        ("sample-000002", _llava("<video><audio>", video="mp4", audio="sample-000002.wav"),
         {"sample-000002.mp4": video_bytes(seconds=2.0, fps=8), "sample-000002.wav": short_wav}),
        ("sample-000005", _llava("<image>", image="sample-000005.jpg"),
         {"sample-000005.jpg": _image(64, 64, "JPEG")[:300]}),
        ("sample-000006", _llava("<video>", video="sample-000006.mp4"),
         {"sample-000006.mp4": video_bytes(seconds=3.0)[:900]}),
        ("sample-000007", _llava("<image>", image="sample-000007.jpg"), {}),
        ("sample-000008", _llava("<image>", image="sample-000008.png"),
         {"sample-000008.png": png_header_only(30_000, 30_000)}),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def tiles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("raw_tiles")
    media = root / "media"
    media.mkdir()
    (media / "wide.jpg").write_bytes(_image(1024, 512, "JPEG"))
    (media / "tall.png").write_bytes(_image(97, 311, seed=1))
    (media / "dot.png").write_bytes(_image(1, 1, seed=2))
    (media / "clip.mp4").write_bytes(video_bytes(seconds=3.0, fps=10, audio=True))
    (media / "long.flac").write_bytes(sound_bytes(sine(300.0, 45.0, 16_000), 16_000, "FLAC"))  # two clips
    (media / "voice.mp3").write_bytes(compressed_audio(sine(500.0, 1.5, 16_000), 16_000))
    write_jsonl(root / "a.jsonl", _openai_rows())
    _tar(root / "b.tar", _llava_samples())
    data = pipeline_dict(
        str(root),
        str(root / "out"),
        input={"media_root": str(media)},
        media={"image": {"mode": "tiles", "max_tiles": 6}, "video": {"target_patches": 64, "use_audio": True}},
        packing={"seq_len": 4096, "pad_multiple": 64},
    )
    (root / "p.yaml").write_text(yaml.safe_dump(data))
    assert main(["run", str(root / "p.yaml"), "--workers", "0", "--quiet"]) == 0
    return root / "out"


# ---------------------------------------------------------------- the per-pack invariant
def _embeddings(kind: str, frames: int, height_px: int, width_px: int) -> int:
    if kind == "video":
        return fmt.video_embeddings(frames, height_px, width_px)
    if kind == "tiles":
        return fmt.tiles_embeddings(frames)
    assert kind == "image" and frames == 1
    return fmt.image_embeddings(height_px, width_px)


def _blocks(kind: str, frames: int) -> int:
    """``<img>`` blocks of one visual item: one per pair of frames for a video, else one."""
    return frames // fmt.TEMPORAL_PATCH if kind == "video" else 1


def check_pack(members: Members, ids: dict[str, int]) -> Counter[str]:
    """Placeholders agree with the stored media, per sequence and per pack; returns the media kinds seen."""
    input_ids = fmt.load_npy(members[fmt.INPUT_IDS])
    starts = fmt.load_npy(members[fmt.CU_SEQLENS_PADDED])
    sequences = json.loads(members[fmt.META])["sequences"]
    kinds = [kind for seq in sequences for kind in seq["media"]]
    visual = [kind for kind in kinds if kind != "audio"]
    n_audio = kinds.count("audio")
    assert (fmt.PIXEL_PATCHES in members) == (fmt.MEDIA_SIZES in members) == bool(visual)
    assert (fmt.AUDIO_FEATURES in members) == (fmt.AUDIO_LENGTHS in members) == bool(n_audio)
    sizes = fmt.load_npy(members[fmt.MEDIA_SIZES]).tolist() if visual else []
    lengths = fmt.load_npy(members[fmt.AUDIO_LENGTHS]) if n_audio else np.zeros(0, np.int32)
    assert len(sizes) == len(visual)
    if visual:
        patches = fmt.load_npy(members[fmt.PIXEL_PATCHES])
        assert patches.dtype == np.uint8 and patches.shape[1] == fmt.PATCH_VALUES
        assert patches.shape[0] == sum(f * (h // 16) * (w // 16) for f, h, w in sizes)
    if n_audio:
        features = fmt.load_npy(members[fmt.AUDIO_FEATURES])
        assert features.dtype == np.float16 and lengths.dtype == np.int32
        assert features.shape[0] == lengths.shape[0] >= n_audio and features.shape[1:] == (lengths.max(), 128)
    count = {token: int(np.count_nonzero(input_ids == ids[token])) for token in fmt.CONTROL_TOKENS}
    expected = sum(_embeddings(kind, *size) for kind, size in zip(visual, sizes, strict=True))
    assert count[fmt.IMAGE_TOKEN] == expected
    assert (
        count[fmt.IMG_START]
        == count[fmt.IMG_END]
        == sum(_blocks(kind, size[0]) for kind, size in zip(visual, sizes, strict=True))
    )
    assert count[fmt.AUDIO_TOKEN] == sum(fmt.audio_clip_tokens(int(n) * fmt.AUDIO_HOP) for n in lengths)
    assert count[fmt.AUDIO_START] == count[fmt.AUDIO_END] == n_audio
    rows = iter(zip(visual, sizes, strict=True))
    for i, seq in enumerate(sequences):  # and per sequence, consuming media_sizes rows in order
        own = input_ids[starts[i] : starts[i] + seq["length"]]
        want = sum(_embeddings(kind, *size) for kind, size in (next(rows) for k in seq["media"] if k != "audio"))
        assert int(np.count_nonzero(own == ids[fmt.IMAGE_TOKEN])) == want, seq["source"]
    return Counter(kinds)


def _check_all(path: Path, hf_tokenizer) -> tuple[Counter[str], list[str]]:
    ids = {token: hf_tokenizer.convert_tokens_to_ids(token) for token in fmt.CONTROL_TOKENS}
    seen: Counter[str] = Counter()
    sources: list[str] = []
    for members in _packs(path).values():
        seen += check_pack(members, ids)
        sources += [seq["source"] for seq in json.loads(members[fmt.META])["sequences"]]
    return seen, sources


# ---------------------------------------------------------------- tests
def test_demo_rejects_bad_media_and_goes_on(demo: Path) -> None:
    counts = _manifest(demo)["counts"]
    assert counts["records_in"] == counts["sources_packed"] + counts["records_rejected"] == 371
    rejects = {source.split("/")[-1]: reason for source, reason in _rejects(demo).items()}
    media_rejects = {k: v for k, v in rejects.items() if k.startswith("llava-media-")}
    assert media_rejects == {f"llava-media-000000.tar{key}": reason for key, reason in BAD_MEDIA.items()}
    assert _manifest(demo)["rejects_by_reason"] == {
        "bad_json": 2,
        "bad_markup": 1,
        "bad_role": 1,
        "bad_type": 1,
        "bad_utf8": 1,
        "no_target": 2,
        "media_decode": 2,
        "media_limit": 1,
        "media_missing": 1,
    }


def test_demo_packs_agree_with_their_media(demo: Path, hf_tokenizer) -> None:
    seen, sources = _check_all(demo, hf_tokenizer)
    assert seen == Counter({"image": 10, "audio": 9, "video": 2})  # each video brings its sound
    assert len(sources) == len(set(sources)) == _manifest(demo)["counts"]["sources_packed"]
    names = {source.split("/")[-1] for source in sources}
    assert {f"chat-media.jsonl#{i}" for i in range(1, 7)} <= names
    assert {f"granary.jsonl#{i}" for i in range(1, 5)} <= names  # #3 via the basename fallback
    assert {f"llava-media-000000.tar#sample-{i:06d}" for i in (0, 1, 2, 3, 4, 9)} <= names


def test_tiles_rejects_bad_media_and_goes_on(tiles: Path) -> None:
    counts = _manifest(tiles)["counts"]
    assert counts["records_in"] == counts["sources_packed"] + counts["records_rejected"] == 10
    assert {source.split("/")[-1]: r for source, r in _rejects(tiles).items()} == {
        f"b.tar{key}": reason for key, reason in BAD_MEDIA.items()
    }


def test_tiles_packs_agree_with_their_media(tiles: Path, hf_tokenizer) -> None:
    seen, sources = _check_all(tiles, hf_tokenizer)
    assert seen == Counter({"tiles": 4, "video": 2, "audio": 5})  # sample-000002.mp4 has no sound track
    assert len(sources) == 6
    sizes = []
    for members in _packs(tiles).values():
        if fmt.MEDIA_SIZES in members:
            sizes += [tuple(row) for row in fmt.load_npy(members[fmt.MEDIA_SIZES]).tolist()]
    # tiles (max 6): 1024x512 -> 2x1 + thumbnail, 1x1 -> 1, 97x311 -> 1x3 + thumbnail, 300x200 -> 3x2 + thumbnail;
    # videos: 8 frames of 64x48 on a 64-patch grid (6 x 10)
    assert sorted(sizes) == [(1, 512, 512), (3, 512, 512), (4, 512, 512), (7, 512, 512), (8, 96, 160), (8, 96, 160)]
