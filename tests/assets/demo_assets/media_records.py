"""The demo records that use the media: chat-media.jsonl, granary.jsonl, llava-media-000000.tar."""

from __future__ import annotations

import io
import json
import random
import tarfile
from typing import Any

from .common import DATA_DIR
from .media_files import (
    ASR_ABSOLUTE_PATH,
    BOMB_SIDE_PX,
    CHAT_MEDIA_JSONL,
    GRANARY_JSONL,
    LLAVA_MEDIA_TAR,
    MEDIA_DIR,
    MEDIA_NOTES,
    MEDIA_SEED,
    corrupt_jpeg,
    encode_image,
    media_files,
    png_header_only,
    scene,
)
from .vocabulary import SYSTEM_PROMPTS, TOPICS
from .words import paragraph, sentence


def describe(rng: random.Random, what: str) -> str:
    """An assistant answer about a generated picture: its known content plus filler sentences."""
    topic = rng.choice(sorted(TOPICS))
    return f"The picture shows {what}. " + paragraph(rng, topic, rng.randint(1, 3))


# LLaVA WebDataset samples with media members. (key, members other than the json, json fields)
def llava_media_samples(rng: random.Random, media: dict[str, bytes]) -> list[tuple[str, dict[str, bytes], dict]]:
    photo, what = scene(400, 300, MEDIA_SEED + 20)
    left, what_left = scene(256, 256, MEDIA_SEED + 21)
    odd, what_odd = scene(97, 311, MEDIA_SEED + 22)
    photo_jpg = encode_image(photo, "JPEG", quality=85)

    def conv(*turns: tuple[str, str]) -> list[dict[str, str]]:
        return [{"from": who, "value": value} for who, value in turns]

    return [
        (
            "sample-000000",
            {"sample-000000.jpg": photo_jpg},
            {
                "conversations": conv(("human", "<image>\nDescribe this picture."), ("gpt", describe(rng, what))),
                "image": "sample-000000.jpg",
            },
        ),
        (
            "sample-000001",
            {
                "sample-000001.left.jpg": encode_image(left, "JPEG", quality=85),
                "sample-000001.right.png": media["diagram.png"],
            },
            {
                "conversations": conv(
                    ("human", "Compare <image> with <image>."),
                    ("gpt", f"The first shows {what_left}; the second is a diagram on white."),
                ),
                "images": ["sample-000001.left.jpg", "sample-000001.right.png"],
            },
        ),
        (
            "sample-000002",
            {"sample-000002.mp4": media["clip.mp4"]},
            {
                "conversations": conv(
                    ("human", "<video>\nWhat moves in this clip?"),
                    ("gpt", "A bright disc crosses the frame from left to right while two tones play."),
                ),
                "video": "sample-000002.mp4",
            },
        ),
        (
            "sample-000003",
            {"sample-000003.flac": media["clip1.flac"]},
            {
                "conversations": conv(
                    ("human", "<audio>\nHow many notes do you hear?"), ("gpt", "Three rising notes.")
                ),
                "audio": "sample-000003.flac",
            },
        ),
        (
            "sample-000004",
            {"sample-000004.png": encode_image(odd, "PNG")},
            {
                "conversations": conv(
                    ("human", "What is in this tall image?\n<image>"), ("gpt", describe(rng, what_odd))
                ),
                "image": "png",
            },
        ),  # WebDataset style: the reference is the member's extension
        (
            "sample-000005",
            {"sample-000005.jpg": corrupt_jpeg(photo_jpg)},
            {
                "conversations": conv(("human", "<image>\nWhat is this?"), ("gpt", "A corrupt JPEG: never cooked.")),
                "image": "sample-000005.jpg",
            },
        ),
        (
            "sample-000006",
            {"sample-000006.mp4": media["clip.mp4"][: len(media["clip.mp4"]) // 3]},
            {
                "conversations": conv(("human", "<video>\nSummarize."), ("gpt", "A truncated mp4: never cooked.")),
                "video": "sample-000006.mp4",
            },
        ),
        (
            "sample-000007",
            {},
            {
                "conversations": conv(("human", "<image>\nAnd this one?"), ("gpt", "A missing member: never cooked.")),
                "image": "sample-000007.jpg",
            },
        ),
        (
            "sample-000008",
            {"sample-000008.png": png_header_only(BOMB_SIDE_PX, BOMB_SIDE_PX)},
            {
                "conversations": conv(
                    ("human", "<image>\nHow big is it?"), ("gpt", "A decompression bomb: never cooked.")
                ),
                "image": "sample-000008.png",
            },
        ),
        (
            "sample-000009",
            {"sample-000009.jpg": media["photo-2.jpg"]},
            {
                "conversations": conv(
                    ("system", SYSTEM_PROMPTS[0]),
                    ("human", "Listen first: <audio>"),
                    ("gpt", "Three rising notes."),
                    ("human", "Now look: <image>"),
                    ("gpt", describe(rng, scene(480, 320, MEDIA_SEED + 2)[1])),
                ),
                "audio": "clip1.flac",
                "image": "sample-000009.jpg",
            },
        ),  # clip1.flac: not a member -> media_root
    ]


def tar_bytes(members: dict[str, bytes]) -> bytes:
    """A deterministic uncompressed USTAR tar of ``members`` in sorted name order."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name in sorted(members):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode, info.type = len(members[name]), 0, 0o644, tarfile.REGTYPE
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(members[name]))
    return buf.getvalue()


def llava_media_tar(rng: random.Random, media: dict[str, bytes]) -> bytes:
    members: dict[str, bytes] = {}
    for key, extra, fields in llava_media_samples(rng, media):
        members[f"{key}.json"] = json.dumps(fields, ensure_ascii=False).encode("utf-8")
        members.update(extra)
    return tar_bytes(members)


def granary_lines(rng: random.Random) -> list[bytes]:
    """NeMo/Granary ASR rows: relative paths (media_root), one absolute path that does not exist here
    (basename fallback), and one compressed clip with offset/duration."""
    rows = [
        {"audio_filepath": "clip1.flac", "duration": 2.0},
        {"audio_filepath": "clip2.wav", "duration": 1.0},
        {"audio_filepath": ASR_ABSOLUTE_PATH, "duration": 2.5},
        {"audio_filepath": "speech.mp3", "offset": 0.5, "duration": 2.0},
    ]
    lines = []
    for row in rows:
        text = sentence(rng, rng.choice(sorted(TOPICS))).rstrip(".").lower()
        lines.append(json.dumps({**row, "text": text}, ensure_ascii=False).encode("utf-8"))
    return lines


def chat_media_lines(rng: random.Random) -> list[bytes]:
    """OpenAI messages with media parts whose references are relative to this file (media/...)."""
    what1 = scene(320, 240, MEDIA_SEED + 1)[1]
    what2 = scene(480, 320, MEDIA_SEED + 2)[1]
    what_portrait = scene(240, 360, MEDIA_SEED + 4)[1]

    def user(*parts: dict[str, Any]) -> dict[str, Any]:
        return {"role": "user", "content": list(parts)}

    def text(value: str) -> dict[str, str]:
        return {"type": "text", "text": value}

    def assistant(value: str) -> dict[str, str]:
        return {"role": "assistant", "content": value}

    records = [
        [
            user({"type": "image", "image": "media/photo-1.jpg"}, text("What is in this picture?")),
            assistant(describe(rng, what1)),
        ],
        [
            {"role": "system", "content": SYSTEM_PROMPTS[1]},
            user({"type": "image_url", "image_url": {"url": "media/photo-2.jpg"}}, text("Describe it briefly.")),
            assistant(f"<think>Look at the shapes first.</think>It shows {what2}."),
            user(text("Which colour dominates?")),
            assistant("The gradient background covers most of it."),
        ],
        [
            user(
                text("Compare these two:"),
                {"type": "image", "image": "media/portrait.jpg"},
                {"type": "image", "image": "media/wide.jpg"},
            ),
            assistant(f"The first is upright and shows {what_portrait}; the second is a wide panorama."),
        ],
        [
            user({"type": "image", "image": "media/diagram.png"}, text("What shapes does the diagram have?")),
            assistant("A dark blue box on the left and a red ring on the right, on a white background."),
        ],
        [
            user({"type": "video", "video": "media/clip.mp4", "start": 0.5, "end": 2.0}, text("What happens?")),
            assistant("A bright disc moves across the frame while a tone plays."),
        ],
        [
            user({"type": "audio", "audio": "media/speech.mp3"}, text("Is the pitch rising or falling?")),
            assistant("It rises for three notes, then falls back."),
        ],
    ]
    return [json.dumps({"messages": messages}, ensure_ascii=False).encode("utf-8") for messages in records]


def write_media() -> None:
    """media/, llava-media-000000.tar, granary.jsonl and chat-media.jsonl (the text files are untouched)."""
    MEDIA_DIR.mkdir(parents=True, exist_ok=True)
    media = media_files()
    for name, data in media.items():
        (MEDIA_DIR / name).write_bytes(data)
    rng = random.Random(MEDIA_SEED)
    (DATA_DIR / LLAVA_MEDIA_TAR).write_bytes(llava_media_tar(rng, media))
    (DATA_DIR / GRANARY_JSONL).write_bytes(b"\n".join(granary_lines(rng)) + b"\n")
    (DATA_DIR / CHAT_MEDIA_JSONL).write_bytes(b"\n".join(chat_media_lines(rng)) + b"\n")


def media_check() -> None:
    """Every good medium cooks with the default settings; the four bad ones are refused with their reason."""
    from cook.config import MediaConfig
    from cook.errors import Rejected
    from cook.media import process_media
    from cook.types import MediaRef

    kinds = {".jpg": "image", ".png": "image", ".mp4": "video", ".flac": "audio", ".wav": "audio", ".mp3": "audio"}
    config = MediaConfig()
    for path in sorted(MEDIA_DIR.iterdir()):
        items = process_media(MediaRef(kinds[path.suffix], path.name), path.read_bytes(), config)
        print(f"media/{path.name}: " + ", ".join(f"{i.kind} {i.size or ''} N={i.n_embeddings}" for i in items))
    bad = {"sample-000005": "media_decode", "sample-000006": "media_decode", "sample-000008": "media_limit"}
    with tarfile.open(DATA_DIR / LLAVA_MEDIA_TAR) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]
    for key, reason in bad.items():
        name = next(n for n in members if n.startswith(key) and not n.endswith(".json"))
        kind = "video" if name.endswith(".mp4") else "image"
        try:
            process_media(MediaRef(kind, name), members[name], config)
        except Rejected as rejected:
            assert rejected.reason == reason, (name, rejected)
        else:
            raise AssertionError(f"{name} should be refused with {reason}")
    assert not any(n.startswith("sample-000007.") and not n.endswith(".json") for n in members)
    total = sum(p.stat().st_size for p in DATA_DIR.rglob("*") if p.is_file())
    assert total < 2_000_000, f"demo_data is {total} bytes"


def media_readme_fields() -> dict[str, Any]:
    return {
        "chat_media": 6,
        "granary": 4,
        "asr_abs": ASR_ABSOLUTE_PATH,
        "llava_media": 10,
        "media_list": "".join(f"\n  - `{name}`: {note}" for name, note in MEDIA_NOTES.items()),
        "bomb": BOMB_SIDE_PX,
    }
