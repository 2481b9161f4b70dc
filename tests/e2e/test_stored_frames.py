"""End to end, ``media.image.storage`` / ``media.video.storage`` raw | png | jpeg: the bundled demo
cooked once per mode (both media in it, ``--workers 0``), and once with png images and jpeg video
("mixed"), loaded back through ``make_loader``: png packs hold exactly raw's patches, jpeg packs within
its codec error, each frame in its medium's codec; a pack with frames is meta.json schema 2; every frame is a ``frame.<k>`` member at its grid size and no pack holds
``pixel_patches.npy``; validate passes (and ``--deep``); two actors write the same bytes; and photo-like
JPEGs at their own grid are stored near their source size."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import math
from pathlib import Path

import jsonschema
import numpy as np
import pytest
import torch
import yaml
from megatron.energon import WorkerConfig, get_savable_loader, get_train_dataset

from bench.bench_media import photo_jpeg
from cook import format as fmt
from cook.cli.main import main
from cook.config import config_from_dict
from cook.contract import ContractMismatch, frame_storage
from cook.errors import ConfigError
from cook.frames import encode_frame, frame_header, frame_sizes
from cook.packfiles import find_pack
from cook.reader import PackedBatch, make_loader, to_device
from cook.reader.loader import PackedTaskEncoder
from cook.runner.plan import plan_units
from cook.runner.worker import CookWorker
from tests.conftest import DEMO_DATA, DEMO_TOKENIZER, REPO, pipeline_dict, write_jsonl
from tests.e2e.energon_load import load_all_packs

MODES = ("raw", "png", "jpeg")
PHOTOS = 6  # photo-like JPEGs, 1280x800: their own grid (80 x 50 patches) in the default image settings


def _cook_demo(out: Path, storage: str, *extra: str, video: str | None = None) -> Path:
    sets = [
        f"input.path={DEMO_DATA}",
        f"input.media_root={DEMO_DATA / 'media'}",
        f"tokenizer.path={DEMO_TOKENIZER}",
        f"media.image.storage={storage}",
        f"media.video.storage={video or storage}",
    ]
    argv = ["run", str(REPO / "pipelines" / "demo.yaml"), "--output", str(out), "--workers", "0", "--quiet", *extra]
    assert main(argv + [arg for s in sets for arg in ("--set", s)]) == 0
    return out


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("stored")
    return {mode: _cook_demo(root / mode, mode) for mode in MODES} | {
        "mixed": _cook_demo(root / "mixed", "png", video="jpeg")
    }


def _patches_by_key(path: Path) -> dict[str, np.ndarray]:
    """Every pack's pixel_patches (uint8 [P, 768]) as the reader yields them, by pack key."""
    loader = make_loader(
        path, batch_size=1, worker_config=WorkerConfig(rank=0, world_size=1, num_workers=0), repeat=False
    )
    out = {}
    for batch in loader:
        if batch.pixel_patches is not None:
            out[batch.__key__[0]] = batch.pixel_patches.numpy()
    return out


def _manifest(path: Path) -> dict:
    return json.loads((path / fmt.MANIFEST_NAME).read_text())


def test_png_patches_equal_raw_and_jpeg_within_codec_error(demo: dict[str, Path]) -> None:
    raw, png, jpeg = (_patches_by_key(demo[mode]) for mode in MODES)
    assert raw and raw.keys() == png.keys() == jpeg.keys()
    for key, patches in raw.items():
        np.testing.assert_array_equal(png[key], patches)
    error = np.concatenate([np.abs(jpeg[k].astype(np.int16) - raw[k]).ravel() for k in raw])
    assert error.mean() <= 2.0, error.mean()


def test_frame_members_at_the_grid(demo: dict[str, Path]) -> None:
    for mode in ("png", "jpeg"):
        packs = load_all_packs(str(demo[mode]), _manifest(demo[mode])["counts"]["packs"])
        framed = 0
        for members in packs.values():
            assert fmt.PIXEL_PATCHES not in members
            if fmt.MEDIA_SIZES not in members:
                assert not any(fmt.parse_frame_member(name) for name in members)
                continue
            sizes = np.load(io.BytesIO(members[fmt.MEDIA_SIZES]))
            expected = [(int(h), int(w)) for f, h, w in sizes for _ in range(int(f))]
            frames = [members[fmt.frame_member(k, mode)] for k in range(len(expected))]
            assert len([n for n in members if fmt.parse_frame_member(n)]) == len(expected)
            assert [frame_header(data)[:2] for data in frames] == [(mode, "RGB")] * len(frames)
            assert [frame_header(data)[3:1:-1] for data in frames] == expected
            framed += len(frames)
        assert framed > 0


def _frame_kinds(members: dict) -> list[str]:
    """The medium ("image" | "video") of each visual frame of a pack, in frame order."""
    kinds = [k for s in json.loads(bytes(members[fmt.META]))["sequences"] for k in s["media"] if k != "audio"]
    counts = np.load(io.BytesIO(bytes(members[fmt.MEDIA_SIZES])))[:, 0].tolist()
    return ["video" if kind == "video" else "image" for kind, n in zip(kinds, counts, strict=True) for _ in range(n)]


def test_each_medium_stored_in_its_own_codec(demo: dict[str, Path]) -> None:
    """png images and jpeg video: images' patches equal raw's exactly, video frames within jpeg's error;
    the packs with frames are meta.json schema 2, the others (and every raw pack) schema 1."""
    packs = load_all_packs(str(demo["mixed"]), _manifest(demo["mixed"])["counts"]["packs"])
    raw_packs = load_all_packs(str(demo["raw"]), _manifest(demo["raw"])["counts"]["packs"])
    raw, mixed = _patches_by_key(demo["raw"]), _patches_by_key(demo["mixed"])
    assert raw.keys() == mixed.keys()
    seen = set()
    for key, members in packs.items():
        version = json.loads(bytes(members[fmt.META]))["schema_version"]
        assert json.loads(bytes(raw_packs[key][fmt.META]))["schema_version"] == fmt.SCHEMA_VERSION == 1
        if fmt.MEDIA_SIZES not in members:
            assert version == 1
            continue
        assert version == fmt.FRAME_SCHEMA_VERSION == 2
        kinds = _frame_kinds(members)
        codecs = {"image": "png", "video": "jpeg"}
        assert [fmt.parse_frame_member(n) for n in sorted(members, key=lambda n: (len(n), n)) if n[:6] == "frame."] == [
            (k, codecs[kind]) for k, kind in enumerate(kinds)
        ]
        sizes = np.load(io.BytesIO(bytes(members[fmt.MEDIA_SIZES])))
        rows = [(h // 16) * (w // 16) for f, h, w in sizes.tolist() for _ in range(f)]
        firsts = np.cumsum([0, *rows]).tolist()
        for k, kind in enumerate(kinds):
            got, want = mixed[key][firsts[k] : firsts[k + 1]], raw[key][firsts[k] : firsts[k + 1]]
            if kind == "image":
                np.testing.assert_array_equal(got, want)
            else:
                assert np.abs(got.astype(np.int16) - want).mean() <= 2.0
            seen.add(kind)
    assert seen == {"image", "video"}


@pytest.mark.parametrize("mode", ["jpeg", "mixed"])
def test_frames_are_the_encode_of_the_raw_cooks_patches(demo: dict[str, Path], mode: str) -> None:
    """The worker encodes each item's frames before staging it: every frame member is byte for byte
    ``encode_frame`` of the raw cook's patches for that frame in its medium's storage, what encoding
    the pack's patches at write time gives."""
    packs = load_all_packs(str(demo[mode]), _manifest(demo[mode])["counts"]["packs"])
    raw = _patches_by_key(demo["raw"])
    storages = {"image": "png" if mode == "mixed" else "jpeg", "video": "jpeg"}
    frames = 0
    for key, members in packs.items():
        if fmt.MEDIA_SIZES not in members:
            continue
        sizes = np.load(io.BytesIO(bytes(members[fmt.MEDIA_SIZES])))
        first = 0
        for k, ((frame_h, frame_w), kind) in enumerate(zip(frame_sizes(sizes), _frame_kinds(members), strict=True)):
            count = fmt.frame_patches(frame_h, frame_w)
            want = encode_frame(raw[key][first : first + count], frame_h, frame_w, frame_storage(storages[kind]))
            assert bytes(members[fmt.frame_member(k, storages[kind])]) == want, (key, k)
            first, frames = first + count, frames + 1
    assert frames > 0


def test_the_stage_holds_encoded_frames(tmp_path: Path) -> None:
    """A cooked unit with jpeg storage is staged with each image's encoded frames and no patches (a
    ``StagedUnit`` read back), a fraction of the patches' bytes."""
    config = config_from_dict(
        pipeline_dict(
            str(DEMO_DATA),
            str(tmp_path / "out"),
            input={"media_root": str(DEMO_DATA / "media")},
            tokenizer={"path": str(DEMO_TOKENIZER)},
            media={"image": {"storage": "jpeg"}, "video": {"storage": "jpeg"}},
        )
    )
    worker = CookWorker(config)
    units = plan_units(config.input)
    done = [worker.cook_unit(unit) for unit in units]
    assert sum(d.samples for d in done) > 0
    visual = [
        item
        for unit in units
        for sample in worker.store.get(unit.index)  # type: ignore[attr-defined]  # a DiskStore's StagedUnit
        for item in sample.media
        if item.size is not None
    ]
    assert visual and all(item.patches is None and len(item.stored_frames) == item.size[0] for item in visual)
    patch_bytes = sum(item.n_patches * fmt.PATCH_VALUES for item in visual)
    assert sum(len(frame) for item in visual for frame in item.stored_frames) < patch_bytes / 2


def test_contract_records_each_medium(demo: dict[str, Path]) -> None:
    contract = _manifest(demo["mixed"])["contract"]
    assert (contract["storage"]["codec"], contract["video_storage"]["codec"]) == ("png", "jpeg")
    assert contract["video_storage"]["jpeg_quality"] == 95 and contract["storage"]["jpeg_quality"] is None
    assert _manifest(demo["raw"])["contract"]["video_storage"]["codec"] == "raw"


def test_contract_records_the_codec(demo: dict[str, Path]) -> None:
    import PIL

    assert _manifest(demo["raw"])["contract"]["storage"]["codec"] == "raw"
    assert _manifest(demo["jpeg"])["contract"]["storage"] == {
        "codec": "jpeg",
        "jpeg_quality": 95,
        "chroma_subsampling": "4:4:4",
        "png_compress_level": None,
        "encoder": "Pillow",
        "encoder_version": PIL.__version__,
    }
    assert _manifest(demo["png"])["contract"]["storage"]["png_compress_level"] == fmt.PNG_COMPRESS_LEVEL
    schema = json.loads((REPO / "schemas" / "manifest.v1.schema.json").read_text())
    for mode in (*MODES, "mixed"):
        jsonschema.validate(_manifest(demo[mode]), schema)


@pytest.mark.parametrize(
    "mode", [pytest.param("png", marks=pytest.mark.slow), "jpeg", pytest.param("mixed", marks=pytest.mark.slow)]
)
def test_validate_passes(demo: dict[str, Path], mode: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(demo[mode]), "--json"]) == 0
    assert main(["validate", str(demo[mode]), "--deep", "--json"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("mode", ["jpeg", "mixed"])
def test_frames_left_to_the_device_give_the_same_patches(demo: dict[str, Path], mode: str) -> None:
    """decode="cuda"'s loader path (the workers keep JPEG frames as bytes; to_device decodes them), run
    on the CPU: one loader worker process, three packs a batch, the same patches as decode="cpu"."""

    def batches(decode: str) -> list[PackedBatch]:
        dataset = get_train_dataset(
            str(demo[mode]), batch_size=3, shuffle_buffer_size=None, max_samples_per_sequence=None,
            worker_config=WorkerConfig(rank=0, world_size=1, num_workers=1),
            task_encoder=PackedTaskEncoder(decode), repeat=False,
        )  # fmt: skip
        return [to_device(batch, "cpu") for batch in get_savable_loader(dataset)]

    host, deferred = batches("cpu"), batches("cuda")
    assert [b.__key__ for b in host] == [b.__key__ for b in deferred]
    with_pixels = [(a, b) for a, b in zip(host, deferred, strict=True) if a.pixel_patches is not None]
    assert with_pixels and all(torch.equal(a.pixel_patches, b.pixel_patches) for a, b in with_pixels)


def test_reader_refuses_what_it_cannot_decode(
    demo: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker_config = WorkerConfig(rank=0, world_size=1, num_workers=0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match="torch sees no CUDA device"):
        make_loader(demo["jpeg"], batch_size=1, worker_config=worker_config, decode="cuda")
    copy = tmp_path / "copy"
    copy.mkdir()
    manifest = _manifest(demo["jpeg"])
    manifest["contract"]["storage"]["chroma_subsampling"] = "4:2:0"
    manifest["contract"]["storage"]["encoder"] = "libjpeg-turbo-tool"
    (copy / fmt.MANIFEST_NAME).write_text(json.dumps(manifest))
    with pytest.raises(ContractMismatch) as caught:
        make_loader(copy, batch_size=1, worker_config=worker_config)
    assert caught.value.problems == (
        "frames encoded by 'libjpeg-turbo-tool', this reader knows 'Pillow'",
        "jpeg chroma subsampling '4:2:0' != 4:4:4",
    )


def test_config_refuses_an_unknown_storage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(yaml.safe_dump(pipeline_dict(str(DEMO_DATA), str(tmp_path / "out"))))
    assert main(["run", str(pipeline), "--set", "media.image.storage=webp", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "media.image.storage" in err[0]


def test_config_refuses_raw_mixed_with_a_codec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(yaml.safe_dump(pipeline_dict(str(DEMO_DATA), str(tmp_path / "out"))))
    argv = ["run", str(pipeline), "--set", "media.video.storage=jpeg", "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "cook: error: --set media.video.storage: jpeg cannot be mixed with media.image.storage raw: a pack holds"
        " either pixel_patches.npy (raw) or frame members (png, jpeg)"
    ]
    assert not (tmp_path / "out").exists()


def _shard_digests(path: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.glob("shard-*"))}


@pytest.mark.slow
def test_two_actors_write_the_same_bytes(demo: dict[str, Path], tmp_path: Path, ray_session) -> None:
    two = _cook_demo(tmp_path / "two", "jpeg", "--workers", "2")
    assert _shard_digests(two) == _shard_digests(demo["jpeg"])


def test_in_process_cooks_twice_the_same_bytes(demo: dict[str, Path], tmp_path: Path) -> None:
    again = _cook_demo(tmp_path / "again", "png")
    assert _shard_digests(again) == _shard_digests(demo["png"])


# ---------------------------------------------------------------- photo-like JPEGs: stored vs source bytes
def _stored_media_bytes(path: Path) -> int:
    packs = load_all_packs(str(path), _manifest(path)["counts"]["packs"])
    return sum(
        len(data)
        for members in packs.values()
        for name, data in members.items()
        if name == fmt.PIXEL_PATCHES or fmt.parse_frame_member(name)
    )


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Path]]:
    """PHOTOS photo-like JPEGs (bench_media's ``photo_jpeg``) cooked once per mode -> (source bytes, dirs)."""
    root = tmp_path_factory.mktemp("photos")
    data = root / "data"
    data.mkdir()
    source = 0
    rows = []
    for seed in range(PHOTOS):
        jpeg = photo_jpeg(seed)
        source += len(jpeg)
        (data / f"p{seed}.jpg").write_bytes(jpeg)
        content = [{"type": "image", "image": f"p{seed}.jpg"}, {"type": "text", "text": "What?"}]
        rows.append({"messages": [{"role": "user", "content": content}, {"role": "assistant", "content": "A photo."}]})
    write_jsonl(data / "photos.jsonl", rows)
    out = {}
    for mode in MODES:
        config = pipeline_dict(
            str(data / "photos.jsonl"),
            str(root / mode),
            input={"media_root": str(data)},
            media={"image": {"storage": mode}},
            packing={"seq_len": 2048, "pad_multiple": 8, "buffer_size": "all"},
        )
        (root / f"{mode}.yaml").write_text(yaml.safe_dump(config))
        assert main(["run", str(root / f"{mode}.yaml"), "--workers", "0", "--quiet"]) == 0
        out[mode] = root / mode
    return source, out


@pytest.mark.slow  # 3 photo sets cooked: ~8 s; bench_media measures the same ratios
def test_photos_stored_near_their_source_size(photos: tuple[int, dict[str, Path]]) -> None:
    source, dirs = photos
    ratios = {mode: _stored_media_bytes(path) / source for mode, path in dirs.items()}
    raw, jpeg = _patches_by_key(dirs["raw"]), _patches_by_key(dirs["jpeg"])
    error = np.concatenate([np.abs(jpeg[k].astype(np.int16) - raw[k]).ravel() for k in raw])
    mae = float(error.mean())
    psnr = 10 * math.log10(255**2 / float((error.astype(np.float64) ** 2).mean()))
    print(f"stored/source bytes {ratios}; jpeg MAE {mae:.3f}/255, max {int(error.max())}, PSNR {psnr:.2f} dB")
    assert ratios["png"] <= 8.0 and ratios["jpeg"] <= 2.0 and mae <= 2.0
    assert ratios["raw"] > ratios["png"] > ratios["jpeg"]


def test_inspect_html_embeds_the_stored_frames(demo: dict[str, Path], tmp_path: Path) -> None:
    page = tmp_path / "p.html"
    assert main(["inspect", str(demo["jpeg"]), "--html", str(page)]) == 0
    html = page.read_text()
    found = find_pack(str(demo["jpeg"]), 0)
    assert found is not None
    members = found[1].members
    kinds = [k for s in json.loads(bytes(members[fmt.META]))["sequences"] for k in s["media"] if k != "audio"]
    counts = np.load(io.BytesIO(bytes(members[fmt.MEDIA_SIZES])))[:, 0].tolist()  # frames per visual item
    firsts = np.cumsum([0, *counts])[:-1].tolist()
    frames = [
        bytes(members[fmt.frame_member(k, "jpeg")]) for k, kind in zip(firsts, kinds, strict=True) if kind == "image"
    ]
    assert frames and all(f"data:image/jpeg;base64,{base64.b64encode(data).decode()}" in html for data in frames)


def test_tiles_stored_as_one_frame_per_tile(tmp_path: Path) -> None:
    """Tiles mode: each 512 px tile (thumbnail last) is one frame; png gives raw's patches exactly."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "wide.jpg").write_bytes(photo_jpeg(7, width=1024, height=512))
    content = [{"type": "image", "image": "wide.jpg"}, {"type": "text", "text": "What?"}]
    write_jsonl(
        data / "t.jsonl", [{"messages": [{"role": "user", "content": content}, {"role": "assistant", "content": "A."}]}]
    )
    patches = {}
    for mode in ("raw", "png"):
        config = pipeline_dict(
            str(data / "t.jsonl"),
            str(tmp_path / mode),
            input={"media_root": str(data)},
            media={"image": {"mode": "tiles", "storage": mode}},
            packing={"seq_len": 1024, "pad_multiple": 8, "buffer_size": "all"},
        )
        (tmp_path / f"{mode}.yaml").write_text(yaml.safe_dump(config))
        assert main(["run", str(tmp_path / f"{mode}.yaml"), "--workers", "0", "--quiet"]) == 0
        patches[mode] = _patches_by_key(tmp_path / mode)
    found = find_pack(str(tmp_path / "png"), 0)
    assert found is not None
    assert sorted(n for n in found[1].members if fmt.parse_frame_member(n)) == [f"frame.{k}.png" for k in range(3)]
    assert patches["raw"].keys() == patches["png"].keys() == {fmt.pack_key(0)}
    np.testing.assert_array_equal(patches["png"][fmt.pack_key(0)], patches["raw"][fmt.pack_key(0)])


def test_stats_stored_bytes_per_token(demo: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """``cook stats``: raw stores 3 B per pixel, so 3,072 B per image token (4 patches of 768) and 6,144 per
    video token (2 frames x 4 patches); with frames each medium's bytes are its own frame members' sizes."""
    stats = {}
    for mode in ("raw", "mixed"):
        assert main(["stats", str(demo[mode]), "--json"]) == 0
        stats[mode] = json.loads(capsys.readouterr().out)
    raw = stats["raw"]["stored_bytes"]
    assert (raw["image_per_token"], raw["video_per_token"]) == (3072.0, 6144.0)
    packs = load_all_packs(str(demo["mixed"]), _manifest(demo["mixed"])["counts"]["packs"])
    want = {"image": 0, "video": 0, "audio": 0, "text": 0}
    for members in packs.values():
        kinds = _frame_kinds(members) if fmt.MEDIA_SIZES in members else []
        for name, data in members.items():
            parsed = fmt.parse_frame_member(name)
            medium = kinds[parsed[0]] if parsed else "audio" if name in fmt.AUDIO_MEMBERS else "text"
            want[medium] += len(data)
    mixed = stats["mixed"]["stored_bytes"]
    assert {medium: mixed[medium] for medium in want} == want
    assert mixed["audio"] == raw["audio"] and mixed["text"] < raw["text"]  # raw's text holds the .npy header
    tokens = stats["mixed"]["media_tokens"]
    assert mixed["image_per_token"] == want["image"] / tokens["image"] < 3072 / 2
    assert mixed["video_per_token"] == want["video"] / tokens["video"] < 6144 / 4
    assert main(["stats", str(demo["mixed"])]) == 0
    line = next(row for row in capsys.readouterr().out.splitlines() if row.startswith("stored bytes/token"))
    assert f"image {mixed['image_per_token']:,.1f} B" in line and f"text {mixed['text_per_token']:,.1f} B" in line
