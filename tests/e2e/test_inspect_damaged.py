"""`cook inspect` (every pack, text and --html) and `cook stats` (table, --json, --html with its plot) on the
corruption corpus of tests/e2e/test_validate_corrupt.py, plus flipped bytes in every member kind: exit 0
or 1 (2 for a directory that is not a dataset), and on failure exactly one ``cook: error:`` line on stderr,
never a traceback."""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import tarfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from cook import format as fmt
from cook.cli.main import main
from tests.e2e.test_validate_corrupt import clean  # noqa: F401 - the module-scoped good cook
from tests.unit.validate.dataset_edits import add_media, edit_manifest, free_prompt_span, load, rewrite_pack, save
from tests.unit.validate.packs_data import IDS

Edit = Callable[[Path], None]


@pytest.fixture(scope="module")
def with_media(clean: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811 - the fixture
    """Pack 0 gets one 2-frame 32x32 video (1 embedding) and one 1 s audio clip (13 tokens), placeholders
    included (``cook validate --deep`` passes it)."""
    out = tmp_path_factory.mktemp("media") / "ds"
    shutil.copytree(clean, out)

    def change(members: dict[str, bytes]) -> None:
        ids = load(members, fmt.INPUT_IDS)
        seq, start = free_prompt_span(members, 18)
        audio = [IDS[fmt.AUDIO_START], *[IDS[fmt.AUDIO_TOKEN]] * 13, IDS[fmt.AUDIO_END]]
        ids[start : start + 18] = [IDS[fmt.IMG_START], IDS[fmt.IMAGE_TOKEN], IDS[fmt.IMG_END], *audio]
        save(members, fmt.INPUT_IDS, ids)
        add_media(members, seq, image_size=(2, 32, 32), audio_frames=100)
        meta = json.loads(members[fmt.META])
        meta["sequences"][seq]["media"] = ["video", "audio"]
        members[fmt.META] = json.dumps(meta).encode()

    rewrite_pack(out, 0, change)
    return out


def _packs(root: Path) -> int:
    return sum(1 for path in root.glob("*.tar") for _ in tarfile.open(path)) // len(fmt.REQUIRED_MEMBERS)


def _one_line_or_none(argv: list[str], capsys: pytest.CaptureFixture[str], allowed: set[int]) -> int:
    capsys.readouterr()  # what editing the dataset printed (energon prepare)
    code = main(argv)
    err = capsys.readouterr().err
    assert code in allowed, (argv, code, err)
    assert "Traceback" not in err, err
    if code:
        assert err.count("\n") == 1 and err.startswith("cook: error: "), (argv, err)
    else:
        assert err.count("\n") <= 1, (argv, err)  # "wrote FILE" at most
    return code


def check_cli(root: Path, tmp: Path, capsys: pytest.CaptureFixture[str], packs: int = 0) -> list[int]:
    """Every CLI view of ``root``; their exit codes (inspect text of each of ``packs`` packs (0: as many as
    the shards hold), --html of pack 0 and 1, --source of the last record, stats table, --json and --html)."""
    codes = []
    for index in range(packs or _packs(root)):
        codes.append(_one_line_or_none(["inspect", str(root), "--pack", str(index)], capsys, {0, 1}))
    for index in (0, 1):
        html = ["--html", str(tmp / f"pack{index}.html")]
        codes.append(_one_line_or_none(["inspect", str(root), "--pack", str(index), *html], capsys, {0, 1}))
    source = ["inspect", str(root), "--source", "raw.jsonl#39"]  # 2: no pack holds it (any more)
    codes.append(_one_line_or_none(source, capsys, {0, 1, 2}))
    for extra in ([], ["--json"], ["--html", str(tmp / "stats.html")]):
        codes.append(_one_line_or_none(["stats", str(root), *extra], capsys, {0, 1}))
    return codes


def test_clean_datasets_show_everything(
    clean: Path,  # noqa: F811 - the fixture
    with_media: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert set(check_cli(clean, tmp_path, capsys)) == {0}
    assert set(check_cli(with_media, tmp_path, capsys)) == {0}


def test_stats_labels_video_tokens_video(with_media: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", str(with_media), "--json"]) == 0
    media = json.loads(capsys.readouterr().out)["media_tokens"]
    assert (media["image"], media["video"], media["audio"]) == (0, 1, 13)
    assert media["image_share"] == 0.0 and media["video_share"] > 0
    assert main(["stats", str(with_media)]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("media tokens"))
    assert line == "media tokens        image 0 (0.0%), video 1 (0.0%), audio 13 (0.3%)"


def test_not_a_dataset_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / fmt.MANIFEST_NAME).write_text("{}")  # no .nv-meta
    for path in (tmp_path / "missing", tmp_path, tmp_path / "half"):
        for command in (["inspect", str(path)], ["stats", str(path)], ["stats", str(path), "--json"]):
            _one_line_or_none(command, capsys, {2})


# ---- the corpus: each edit breaks a copy of the clean (or media) dataset


def _shard(root: Path, index: int = 0) -> Path:
    return root / fmt.shard_name(index)


def _truncate(root: Path) -> None:
    shard = _shard(root, 1)
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])


def _flip(path: Path, offset: int, mask: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= mask
    path.write_bytes(bytes(data))


def _corrupt_header(root: Path) -> None:
    _flip(_shard(root, 1), 520, 0x20)  # a byte of the first member's name: its checksum no longer matches


def _wrong_idx(root: Path) -> None:
    idx = Path(str(_shard(root)) + fmt.INDEX_SUFFIX)
    offsets = np.frombuffer(idx.read_bytes(), "<u8").copy()
    offsets[1] += 512
    idx.write_bytes(offsets.tobytes())


def _in_pack(index: int, change: Callable[[dict[str, bytes]], object]) -> Edit:
    return lambda root: rewrite_pack(root, index, change)


def _sql(statement: str) -> Edit:
    def edit(root: Path) -> None:
        with contextlib.closing(sqlite3.connect(root / fmt.NV_META_DIR / fmt.INDEX_SQLITE)) as db:
            db.execute(statement)
            db.commit()

    return edit


def _cu_not_increasing(members: dict[str, bytes]) -> None:
    cu = load(members, fmt.CU_SEQLENS)
    cu[1] = cu[2]
    save(members, fmt.CU_SEQLENS, cu)


def _mask_at_start(members: dict[str, bytes]) -> None:
    mask = load(members, fmt.LOSS_MASK)
    mask[fmt.load_npy(members[fmt.CU_SEQLENS_PADDED])[1]] = 1
    save(members, fmt.LOSS_MASK, mask)


def _id(value: int | None) -> Edit:
    """Token 3 of pack 0 set to ``value`` (None: the manifest's vocab_size)."""

    def edit(root: Path) -> None:
        vocab = json.loads((root / fmt.MANIFEST_NAME).read_text())["tokenizer"]["vocab_size"]

        def change(members: dict[str, bytes]) -> None:
            ids = load(members, fmt.INPUT_IDS)
            ids[3] = vocab if value is None else value
            save(members, fmt.INPUT_IDS, ids)

        rewrite_pack(root, 0, change)

    return edit


def _placeholders(members: dict[str, bytes]) -> None:
    ids = load(members, fmt.INPUT_IDS)
    seq, start = free_prompt_span(members, 3)
    ids[start : start + 3] = [IDS[fmt.IMG_START], 100, IDS[fmt.IMG_END]]
    save(members, fmt.INPUT_IDS, ids)
    add_media(members, seq, image_size=(1, 32, 32), audio_frames=100)


def _meta(change: Callable[[dict], object]) -> Callable[[dict[str, bytes]], None]:
    def edit(members: dict[str, bytes]) -> None:
        meta = json.loads(members[fmt.META])
        change(meta)
        members[fmt.META] = json.dumps(meta).encode()

    return edit


def _duplicate_source(meta: dict) -> None:
    meta["sequences"][1]["source"] = meta["sequences"][0]["source"]


CORPUS: dict[str, Edit] = {
    "truncated_tar": _truncate,
    "corrupt_header": _corrupt_header,
    "missing_shard": lambda root: _shard(root, 1).unlink(),
    "flipped_input_id": lambda root: _flip(_shard(root), 512 + 128 + 40, 0x01),
    "missing_idx": lambda root: Path(str(_shard(root)) + fmt.INDEX_SUFFIX).unlink(),
    "wrong_idx": _wrong_idx,
    "dtype": _in_pack(1, lambda m: save(m, fmt.LOSS_MASK, load(m, fmt.LOSS_MASK).astype("int64"))),
    "shape": _in_pack(1, lambda m: save(m, fmt.INPUT_IDS, load(m, fmt.INPUT_IDS)[None, :])),
    "member_missing": _in_pack(1, lambda m: m.pop(fmt.CU_SEQLENS)),
    "meta_missing": _in_pack(1, lambda m: m.pop(fmt.META)),
    "pickle_member": _in_pack(1, lambda m: m.__setitem__("state.pkl", b"\x80\x04K\x01.")),
    "member_unknown": _in_pack(1, lambda m: m.__setitem__("notes.txt", b"hi")),
    "cu_seqlens": _in_pack(0, _cu_not_increasing),
    "loss_mask_start": _in_pack(0, _mask_at_start),
    "token_at_vocab_size": _id(None),
    "negative_token": _id(-5),
    "placeholder_count": _in_pack(0, _placeholders),
    "meta_not_json": _in_pack(1, lambda m: m.__setitem__(fmt.META, b"{not json")),
    "meta_bad_entry": _in_pack(1, _meta(lambda meta: meta["sequences"][0].__setitem__("length", "many"))),
    "meta_no_sequences": _in_pack(1, _meta(lambda meta: meta.__setitem__("sequences", []))),
    "meta_sequences_not_a_list": _in_pack(1, _meta(lambda meta: meta.__setitem__("sequences", 5))),
    "source_duplicate": _in_pack(0, _meta(_duplicate_source)),
    "manifest_count": lambda root: edit_manifest(root, lambda m: m["counts"].__setitem__("tokens", 1)),
    "manifest_broken": lambda root: (root / fmt.MANIFEST_NAME).write_text("{broken"),
    "manifest_shard_gone": lambda root: edit_manifest(root, lambda m: m["shards"].pop()),
    "sha256": lambda root: edit_manifest(root, lambda m: m["shards"][0].__setitem__("sha256", "0" * 64)),
    "rejects_line_gone": lambda root: (root / fmt.REJECTS_NAME).write_text(""),
    "rejects_broken": lambda root: (root / fmt.REJECTS_NAME).write_text('{"source": "a#1", "reason": \n'),
    "rejects_missing": lambda root: (root / fmt.REJECTS_NAME).unlink(),
    "nv_meta_split": lambda root: (root / fmt.NV_META_DIR / fmt.SPLIT_YAML).write_text("split_parts: {}\n"),
    "stale_index": _sql("DELETE FROM samples WHERE tar_file_id = 1 AND sample_index = 0"),
    "unreadable_index": lambda root: (root / fmt.NV_META_DIR / fmt.INDEX_SQLITE).write_bytes(b"not a db" * 100),
}


# make test keeps one corruption of each layer (tar, member, pack, manifest, rejects, .nv-meta); test-slow runs them all
QUICK_CORPUS = {"corrupt_header", "dtype", "placeholder_count", "sha256", "rejects_missing", "stale_index"}


@pytest.mark.parametrize(
    "name", [n if n in QUICK_CORPUS else pytest.param(n, marks=pytest.mark.slow) for n in sorted(CORPUS)]
)
def test_corpus(
    name: str,
    clean: Path,  # noqa: F811 - the fixture
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = tmp_path / "ds"
    shutil.copytree(clean, root)
    CORPUS[name](root)
    try:  # the packs the manifest lists: a pack past them is out of range (exit 2), not damaged
        packs = sum(shard["packs"] for shard in json.loads((root / fmt.MANIFEST_NAME).read_text())["shards"])
    except ValueError:
        packs = _packs(clean)
    codes = check_cli(root, tmp_path, capsys, packs)
    assert (1 in codes) == (name in FAILING), codes


FAILING = {  # the kinds that inspect or stats refuse (exit 1); the rest show the dataset
    *("truncated_tar", "corrupt_header", "missing_shard", "dtype", "shape", "member_missing", "meta_missing"),
    *("pickle_member", "member_unknown", "cu_seqlens", "loss_mask_start", "token_at_vocab_size", "negative_token"),
    *("meta_not_json", "meta_bad_entry", "meta_no_sequences", "manifest_broken"),
    "meta_sequences_not_a_list",
    "rejects_broken",
}


# ---- flipped bytes in every member kind


def _member_span(shard: Path, key: str, member: str) -> tuple[int, int]:
    """(offset of the member's data in the shard, its size)."""
    with tarfile.open(shard) as tar:
        info = tar.getmember(f"{key}.{member}")
        return info.offset_data, info.size


FLIPS = (  # (position in the member: a fraction of its size or a byte, mask)
    (0, 0xFF),  # the .npy magic, meta.json's "{"
    (9, 0x01),  # the .npy header length
    (30, 0x20),  # inside the .npy header dict
    (0.5, 0x80),
    (-1, 0x80),  # the last byte: an int32's high byte makes it negative
)
MEMBERS = (
    fmt.INPUT_IDS,
    fmt.LOSS_MASK,
    fmt.CU_SEQLENS,
    fmt.CU_SEQLENS_PADDED,
    fmt.META,
    fmt.MEDIA_SIZES,
    fmt.AUDIO_LENGTHS,
    fmt.PIXEL_PATCHES,
    fmt.AUDIO_FEATURES,
)


@pytest.mark.parametrize(
    "member",
    [
        m if m in (fmt.INPUT_IDS, fmt.META) else pytest.param(m, marks=pytest.mark.slow) for m in MEMBERS
    ],  # all in test-slow
)
def test_flipped_bytes_in_every_member(
    member: str, with_media: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shard = _shard(with_media)
    start, size = _member_span(shard, fmt.pack_key(0), member)
    for position, mask in FLIPS:
        root = tmp_path / f"ds-{position}"
        shutil.copytree(with_media, root)
        at = int(position * size) if isinstance(position, float) else position % size
        _flip(_shard(root), start + at, mask)
        check_cli(root, tmp_path, capsys, _packs(with_media))
        shutil.rmtree(root)


def test_four_flipped_id_bytes_are_one_line(
    with_media: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reported case: four ids' high bytes flipped (negative ids) -> one line naming the pack, exit 1."""
    root = tmp_path / "ds"
    shutil.copytree(with_media, root)
    start, size = _member_span(_shard(root), fmt.pack_key(0), fmt.INPUT_IDS)
    for token in (5, 6, 7, 8):
        _flip(_shard(root), start + size - 4 * token + 3, 0x80)
    assert main(["inspect", str(root), "--pack", "0"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"cook: error: {fmt.pack_key(0)} in {fmt.shard_name(0)} cannot be shown (token_range: ")
    assert err.count("\n") == 1 and "run cook validate" in err
