"""MediaStore: SPEC §4 resolution order, tar stores, basename fallback, unsafe paths, byte limits."""

from __future__ import annotations

import base64
import io
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from cook.errors import ConfigError, Rejected, RejectReason
from cook.sources.media_store import MediaStore

LIMIT = 1000


def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _tar(path: Path, members: dict[str, bytes], links: dict[str, tuple[bytes, str]] | None = None) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, (kind, target) in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, target
            tar.addfile(info)
    return path


def _reason(store: MediaStore, ref: str, members: dict[str, bytes] | None = None, origin: str = "") -> RejectReason:
    with pytest.raises(Rejected) as err:
        store.resolve(ref, members or {}, origin)
    return err.value.reason


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    """Two directory stores, a tar store and a media_root, with overlapping names."""
    first = tmp_path / "first"
    _write(first / "shared.jpg", b"first-shared")
    _write(first / "only-first.jpg", b"first-only")
    second = tmp_path / "second"
    _write(second / "shared.jpg", b"second-shared")
    _write(second / "sub" / "deep.jpg", b"second-deep")
    root = tmp_path / "root"
    _write(root / "shared.jpg", b"root-shared")
    _write(root / "root-only.png", b"root-only")
    _write(root / "big.jpg", b"x" * (LIMIT + 1))
    archive = _tar(
        tmp_path / "store.tar",
        {
            "./tarred/a.jpg": b"tar-a",
            "top.jpg": b"tar-top",
            "huge.jpg": b"y" * (LIMIT + 1),
            "../evil.jpg": b"evil",
            "/abs.jpg": b"abs",
        },
        links={
            "sym.jpg": (tarfile.SYMTYPE, "top.jpg"),
            "hard.jpg": (tarfile.LNKTYPE, "top.jpg"),
            "dev.jpg": (tarfile.CHRTYPE, ""),
        },
    )
    return {"first": first, "second": second, "root": root, "tar": archive, "tmp": tmp_path}


@pytest.fixture
def store(layout: dict[str, Path]) -> Iterator[MediaStore]:
    stores = [str(layout["first"]), str(layout["tar"]), str(layout["second"])]
    with MediaStore(media_root=str(layout["root"]), stores=stores, max_media_bytes=LIMIT) as media_store:
        yield media_store


def test_members_full_name_then_basename_then_extension(store: MediaStore) -> None:
    members = {"sample-01.jpg": b"member-jpg", "sample-01.wav": b"member-wav", "images/cat.png": b"member-png"}
    assert store.resolve("sample-01.jpg", members, "") == b"member-jpg"  # full name
    assert store.resolve("some/dir/sample-01.wav", members, "") == b"member-wav"  # basename
    assert store.resolve("/abs/path/cat.png", members, "") == b"member-png"  # basename of a member path
    assert store.resolve("jpg", members, "") == b"member-jpg"  # a bare extension
    assert store.resolve("photo.WAV", members, "") == b"member-wav"  # unique extension match
    assert store.resolve("shared.jpg", members, "") == b"member-jpg"  # members win over stores


def test_ambiguous_extension_falls_through_to_stores(store: MediaStore) -> None:
    members = {"s.0.jpg": b"zero", "s.1.jpg": b"one"}
    assert store.resolve("shared.jpg", members, "") == b"first-shared"
    assert _reason(store, "jpg", members) == RejectReason.MEDIA_MISSING


def test_stores_in_order_then_media_root(store: MediaStore) -> None:
    assert store.resolve("shared.jpg", {}, "") == b"first-shared"  # first store wins
    assert store.resolve("tarred/a.jpg", {}, "") == b"tar-a"  # tar member, ./ normalized away
    assert store.resolve("./tarred//a.jpg", {}, "") == b"tar-a"
    assert store.resolve("sub/deep.jpg", {}, "") == b"second-deep"
    assert store.resolve("root-only.png", {}, "") == b"root-only"  # media_root last


def test_origin_dir_after_media_root(store: MediaStore, layout: dict[str, Path]) -> None:
    origin = layout["tmp"] / "inputs"
    _write(origin / "next-to-jsonl.jpg", b"origin")
    _write(origin / "shared.jpg", b"origin-shared")
    assert store.resolve("next-to-jsonl.jpg", {}, str(origin)) == b"origin"
    assert store.resolve("shared.jpg", {}, str(origin)) == b"first-shared"


def test_unsafe_tar_members_are_not_served(store: MediaStore) -> None:
    assert store.resolve("top.jpg", {}, "") == b"tar-top"
    for ref in ("sym.jpg", "hard.jpg", "dev.jpg", "abs.jpg", "evil.jpg"):
        assert _reason(store, ref) == RejectReason.MEDIA_MISSING, ref


def test_absolute_paths(store: MediaStore, layout: dict[str, Path]) -> None:
    local = _write(layout["tmp"] / "elsewhere" / "local.jpg", b"local")
    assert store.resolve(str(local), {}, "") == b"local"  # exists locally: read directly
    assert store.resolve("/data/gone/only-first.jpg", {}, "") == b"first-only"  # basename fallback
    assert store.resolve("/data/gone/top.jpg", {}, "") == b"tar-top"  # ... inside a tar store too
    assert store.resolve("/data/gone/shared.jpg", {}, "") == b"first-shared"  # first store holding it
    assert store.resolve("/data/gone/root-only.png", {}, "") == b"root-only"
    with pytest.raises(Rejected) as err:
        store.resolve("/data/gone/nowhere.jpg", {}, "")
    assert err.value.reason == RejectReason.MEDIA_MISSING and "/data/gone/nowhere.jpg" in err.value.detail


def test_missing_names_the_ref(store: MediaStore) -> None:
    with pytest.raises(Rejected) as err:
        store.resolve("no/such.jpg", {}, "")
    assert err.value.reason == RejectReason.MEDIA_MISSING and "no/such.jpg" in err.value.detail
    assert _reason(store, "") == RejectReason.MEDIA_MISSING
    assert _reason(store, "sub") == RejectReason.MEDIA_MISSING  # a directory is not media


def test_escaping_refs_are_unsafe(store: MediaStore, layout: dict[str, Path]) -> None:
    _write(layout["tmp"] / "secret.jpg", b"secret")
    assert _reason(store, "../secret.jpg") == RejectReason.MEDIA_UNSAFE
    assert _reason(store, "sub/../../secret.jpg") == RejectReason.MEDIA_UNSAFE
    os.symlink(layout["tmp"] / "secret.jpg", layout["first"] / "link.jpg")
    assert _reason(store, "link.jpg") == RejectReason.MEDIA_UNSAFE  # a symlink out of the store
    os.symlink(layout["first"] / "only-first.jpg", layout["first"] / "inside.jpg")
    assert store.resolve("inside.jpg", {}, "") == b"first-only"  # a symlink within the store is fine


def test_byte_limits_before_reading(store: MediaStore, layout: dict[str, Path]) -> None:
    assert _reason(store, "big.jpg") == RejectReason.MEDIA_LIMIT
    assert _reason(store, "huge.jpg") == RejectReason.MEDIA_LIMIT
    assert _reason(store, str(layout["root"] / "big.jpg")) == RejectReason.MEDIA_LIMIT
    assert _reason(store, "x.jpg", {"x.jpg": b"z" * (LIMIT + 1)}) == RejectReason.MEDIA_LIMIT


def test_special_files_are_not_read(store: MediaStore) -> None:
    assert _reason(store, "/dev/zero") == RejectReason.MEDIA_UNSAFE


def test_data_uris_and_urls(store: MediaStore) -> None:
    payload = base64.b64encode(b"\x89PNG inline").decode()
    assert store.resolve(f"data:image/png;base64,{payload}", {}, "") == b"\x89PNG inline"
    assert _reason(store, "data:image/png;base64,!!!") == RejectReason.MEDIA_DECODE
    assert _reason(store, "data:text/plain,hello") == RejectReason.MEDIA_UNSUPPORTED
    assert _reason(store, "data:image/png;base64," + "A" * 2000) == RejectReason.MEDIA_LIMIT
    assert _reason(store, "https://example.com/cat.jpg") == RejectReason.MEDIA_UNSUPPORTED


def test_bad_store_paths_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="media_stores"):
        MediaStore(media_root=None, stores=[str(tmp_path / "absent")], max_media_bytes=LIMIT)
    with pytest.raises(ConfigError, match="media_root"):
        MediaStore(media_root=str(tmp_path / "absent"), stores=[], max_media_bytes=LIMIT)
    gz = tmp_path / "store.tar.gz"
    with tarfile.open(gz, "w:gz") as tar:
        info = tarfile.TarInfo("a.jpg")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(ConfigError, match="uncompressed tar"):
        MediaStore(media_root=None, stores=[str(gz)], max_media_bytes=LIMIT)


def test_no_stores_only_members_and_origin(tmp_path: Path) -> None:
    _write(tmp_path / "a.jpg", b"origin-a")
    with MediaStore(media_root=None, stores=[], max_media_bytes=LIMIT) as bare:
        assert bare.resolve("a.jpg", {}, str(tmp_path)) == b"origin-a"
        assert bare.resolve("jpg", {"k.jpg": b"m"}, str(tmp_path)) == b"m"
        assert _reason(bare, "/nowhere/a.jpg", origin=str(tmp_path)) == RejectReason.MEDIA_MISSING
