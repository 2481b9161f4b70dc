"""Issue 13 item 11 / SPEC §4: a LLaVA WebDataset sample whose JSON names no media of a kind uses
the sample's members of that kind, in member-name order; a count mismatch is still a reject.

Every case is a real tar written here, read by the WebDataset source, cooked, and its media resolved
and decoded as a run does."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest

from cook.cookers import COOKERS
from cook.cookers.llava import member_media
from cook.errors import Rejected, RejectReason
from cook.media import process_media
from cook.sources import SOURCES
from cook.sources.media_store import MediaStore
from cook.types import MediaRef, RawRecord
from tests.unit.media.media_data import config, rgb_bytes, sine, sound_bytes

JPEG = rgb_bytes(np.full((32, 48, 3), 90, np.uint8), "JPEG")
PNG = rgb_bytes(np.full((32, 32, 3), 200, np.uint8), "PNG")
WAV = sound_bytes(sine(440.0, 0.5, 16_000), 16_000)
MEDIA = config(image={"min_patches": 4, "max_patches": 64})


def conversation(question: str, **media: object) -> bytes:
    turns = [{"from": "human", "value": question}, {"from": "gpt", "value": "an answer"}]
    return json.dumps({"conversations": turns, **media}).encode()


def one_sample_tar(path: Path, members: list[tuple[str, bytes]]) -> list[RawRecord]:
    with tarfile.open(path, "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    records = list(SOURCES["wds"](str(path), 1 << 20))
    assert all(isinstance(r, RawRecord) for r in records), records
    return records  # type: ignore[return-value]


def cook_and_decode(raw: RawRecord) -> list[MediaRef]:
    conv = COOKERS["llava"](raw)
    with MediaStore(None, [], 1 << 24) as store:
        for ref in conv.media:
            assert process_media(ref, store.resolve(ref.ref, raw.members, ""), MEDIA)
    return list(conv.media)


def test_json_with_conversations_only_uses_the_jpg_member(tmp_path: Path) -> None:
    (raw,) = one_sample_tar(tmp_path / "a.tar", [("s1.json", conversation("<image>\nWhat is it?")), ("s1.jpg", JPEG)])
    assert cook_and_decode(raw) == [MediaRef("image", "s1.jpg")]
    assert COOKERS["auto"](raw).media == (MediaRef("image", "s1.jpg"),)


def test_members_are_taken_in_member_name_order(tmp_path: Path) -> None:
    members = [("k.json", conversation("<image> then <image>")), ("k.1.png", PNG), ("k.0.jpg", JPEG), ("k.txt", b"x")]
    (raw,) = one_sample_tar(tmp_path / "a.tar", members)
    assert cook_and_decode(raw) == [MediaRef("image", "k.0.jpg"), MediaRef("image", "k.1.png")]


def test_each_kind_falls_back_on_its_own(tmp_path: Path) -> None:
    members = [("k.json", conversation("<image> and <audio>", audio="k.wav")), ("k.jpg", JPEG), ("k.wav", WAV)]
    (raw,) = one_sample_tar(tmp_path / "a.tar", members)
    assert cook_and_decode(raw) == [MediaRef("image", "k.jpg"), MediaRef("audio", "k.wav")]


def test_media_named_in_the_json_win(tmp_path: Path) -> None:
    members = [("k.json", conversation("<image>", image="k.b.jpg")), ("k.a.jpg", JPEG), ("k.b.jpg", JPEG)]
    (raw,) = one_sample_tar(tmp_path / "a.tar", members)
    assert cook_and_decode(raw) == [MediaRef("image", "k.b.jpg")]


@pytest.mark.parametrize(
    ("question", "members", "detail"),
    [
        ("<image> and <image>", [("k.jpg", JPEG)], "more <image> tags than images"),
        ("no tag here", [("k.jpg", JPEG)], "1 image(s) without a <image> tag"),
        ("<image> <image>", [("k.wav", WAV)], "more <image> tags than images"),
    ],
)
def test_count_mismatch_is_still_a_reject(tmp_path: Path, question: str, members: list, detail: str) -> None:
    (raw,) = one_sample_tar(tmp_path / "a.tar", [("k.json", conversation(question)), *members])
    with pytest.raises(Rejected) as err:
        COOKERS["llava"](raw)
    assert err.value.reason == RejectReason.MEDIA_COUNT_MISMATCH and detail in err.value.detail


def test_jsonl_records_have_no_members_to_fall_back_on() -> None:
    raw = RawRecord("a.jsonl#1", json.loads(conversation("<image>")), "a.jsonl")
    with pytest.raises(Rejected) as err:
        COOKERS["llava"](raw)
    assert err.value.reason == RejectReason.MEDIA_COUNT_MISMATCH


def test_member_kinds_by_last_extension() -> None:
    names = ["k.json", "k.IMG.JPEG", "k.0.png", "k.mp4", "k.flac", "k.pyd", "k.wav.txt"]
    assert member_media(names, "image") == ["k.0.png", "k.IMG.JPEG"]
    assert member_media(names, "video") == ["k.mp4"]
    assert member_media(names, "audio") == ["k.flac"]
