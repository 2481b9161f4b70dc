"""Stored frames in validate: every frame member's header is checked against ``media_sizes`` (codec,
RGB, width and height) without decoding; ``--deep`` (and ``parse_pack``) decode every frame."""

from __future__ import annotations

import io

import numpy as np
import orjson
import pytest
from PIL import Image

from cook import format as fmt
from cook.contract import frame_storage
from cook.packfiles import RawPack
from cook.validate.frames import storage_findings
from cook.validate.members import parse_members, parse_pack
from cook.validate.problems import Code, PackRules
from cook.validate.scan import check_pack
from cook.writer.members import pack_members
from tests.unit.validate.packs_data import multimodal

FRAMES = 5  # multimodal(): a 32x32 image and a 4-frame 64x64 video


def _members(codec: str) -> dict[str, bytes]:
    return dict(pack_members(multimodal(), frame_storage(codec)))


def _codes(named: dict[str, bytes], decode: bool = False) -> tuple[bool, list[str]]:
    members, findings = parse_members(RawPack("pack-000000000", 0, named), decode_frames=decode)
    return members is not None, [code.value for code, _ in findings]


def _image(codec: str, width_px: int, height_px: int, mode: str = "RGB") -> bytes:
    buffer = io.BytesIO()
    Image.new(mode, (width_px, height_px), 128).save(buffer, fmt.FRAME_PIL_FORMATS[codec])
    return buffer.getvalue()


@pytest.mark.parametrize("codec", ["png", "jpeg"])
def test_stored_frames_pass_with_and_without_decoding(codec: str) -> None:
    named = _members(codec)
    assert fmt.PIXEL_PATCHES not in named
    assert [n for n in named if fmt.parse_frame_member(n)] == [fmt.frame_member(k, codec) for k in range(FRAMES)]
    assert _codes(named) == (True, []) and _codes(named, decode=True) == (True, [])
    pack, findings = parse_pack(RawPack("pack-000000000", 0, named))
    assert pack is not None and not findings and pack.pixel_patches is not None
    assert check_pack(pack, PackRules(seq_len=None, pad_multiple=None, image_mode="dynamic")) == []
    if codec == "png":
        np.testing.assert_array_equal(pack.pixel_patches, multimodal().pixel_patches)


def test_a_frame_of_the_wrong_size_or_codec() -> None:
    named = _members("jpeg")
    named[fmt.frame_member(0, "jpeg")] = _image("jpeg", 48, 32)
    assert _codes(named) == (False, ["frame_size"])
    named = _members("jpeg")
    named[fmt.frame_member(1, "jpeg")] = _image("png", 64, 64)
    assert _codes(named) == (False, ["frame_codec"])
    named = _members("png")
    named[fmt.frame_member(0, "png")] = _image("png", 32, 32, mode="L")
    assert _codes(named) == (False, ["frame_codec"])


def test_frame_members_that_do_not_match_the_media() -> None:
    named = _members("png")
    del named[fmt.frame_member(4, "png")]
    assert _codes(named) == (False, ["frame_member"])
    named = _members("png")
    named[fmt.frame_member(7, "png")] = named.pop(fmt.frame_member(4, "png"))
    assert _codes(named) == (False, ["frame_member"])
    named = _members("png")
    named[fmt.PIXEL_PATCHES] = dict(pack_members(multimodal()))[fmt.PIXEL_PATCHES]
    assert _codes(named) == (False, ["frame_member"])
    named = _members("png")
    named[fmt.frame_member(2, "png")] = b"not an image"
    assert _codes(named) == (False, ["frame_member"])


def test_deep_decodes_every_frame() -> None:
    named = _members("jpeg")
    good = named[fmt.frame_member(3, "jpeg")]
    named[fmt.frame_member(3, "jpeg")] = good[:-40]  # the header is intact, the scan data cut
    assert _codes(named) == (True, [])
    assert _codes(named, decode=True) == (False, ["frame_member"])


def test_storage_against_the_manifest() -> None:
    jpeg, raw = _members("jpeg"), dict(pack_members(multimodal()))
    assert storage_findings(jpeg, "jpeg") == [] and storage_findings(raw, "raw") == []
    assert storage_findings(jpeg, None) == [] and storage_findings(_members("png"), None) == []
    assert storage_findings(jpeg, "png") == [
        (Code.FRAME_CODEC, "visual frames stored as jpeg, the manifest says media.image.storage png")
    ]
    assert storage_findings(raw, "jpeg") == [
        (Code.FRAME_CODEC, "visual frames stored as raw, the manifest says media.image.storage jpeg")
    ]


def _mixed() -> dict[str, bytes]:
    """multimodal() with png images and jpeg video frames: frame 0 (the image) .png, frames 1-4 .jpg."""
    return dict(pack_members(multimodal(), frame_storage("png"), frame_storage("jpeg")))


def test_each_medium_in_its_own_codec() -> None:
    named = _mixed()
    frames = sorted(n for n in named if fmt.parse_frame_member(n))
    assert frames == ["frame.0.png", "frame.1.jpg", "frame.2.jpg", "frame.3.jpg", "frame.4.jpg"]
    assert _codes(named) == (True, []) and _codes(named, decode=True) == (True, [])
    members, _ = parse_members(RawPack("pack-000000000", 0, named))
    assert members is not None
    sizes, kinds = members.arrays[fmt.MEDIA_SIZES], ["image", "video", "audio"]
    assert storage_findings(named, "png", "jpeg", sizes, kinds) == []
    assert storage_findings(named, "jpeg", "png", sizes, kinds) == [
        (Code.FRAME_CODEC, "frame.0.png is png, the manifest's media.image.storage is jpeg")
    ]
    assert storage_findings(named, "png", None, sizes, kinds) == [
        (Code.FRAME_CODEC, "visual frames stored as jpeg, png, the manifest says media.image.storage png")
    ]


def test_schema_version_follows_the_frames() -> None:
    """A pack with frame members is meta.json schema 2, any other schema 1; validate refuses the other."""
    raw, jpeg = dict(pack_members(multimodal())), _members("jpeg")
    assert orjson.loads(raw[fmt.META])["schema_version"] == 1 and orjson.loads(jpeg[fmt.META])["schema_version"] == 2
    for named, wrong, detail in (
        (raw, 2, "!= 1 (a pack with no frame members)"),
        (jpeg, 1, "!= 2 (a pack with frame members)"),
    ):
        meta = orjson.loads(named[fmt.META])
        named[fmt.META] = orjson.dumps({**meta, "schema_version": wrong})
        members, findings = parse_members(RawPack("pack-000000000", 0, named))
        assert members is None and findings == [(Code.META_INVALID, f"{fmt.META} schema_version {wrong} {detail}")]


def test_raw_is_never_mixed_with_a_codec() -> None:
    with pytest.raises(ValueError, match="raw cannot be mixed with png/jpeg"):
        pack_members(multimodal(), frame_storage("raw"), frame_storage("jpeg"))
