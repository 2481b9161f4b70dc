import pytest

from cook.cookers import COOKERS
from cook.errors import Rejected, RejectReason
from cook.types import MediaPart, MediaRef, RawRecord, TextPart, Turn


def raw(fields: dict, members: dict | None = None) -> RawRecord:
    return RawRecord(source="f.jsonl#1", fields=fields, origin="f.jsonl", members=members or {})


def reason_of(cooker: str, fields: dict) -> RejectReason:
    with pytest.raises(Rejected) as info:
        COOKERS[cooker](raw(fields))
    return info.value.reason


def test_openai_text_parts_media_and_flags() -> None:
    conv = COOKERS["openai"](
        raw(
            {
                "messages": [
                    {"role": "system", "content": "sys"},
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "look "},
                            {"type": "image", "image": "a.jpg"},
                            {"type": "video_url", "video_url": {"url": "v.mp4"}, "start": 1, "end": 2},
                        ],
                    },
                    {"role": "assistant", "content": "ans", "reasoning_content": "why", "loss": False},
                    {"role": "tool", "content": "42"},
                ],
                "tools": [{"name": "calc"}],
            }
        )
    )
    assert [t.role for t in conv.turns] == ["system", "user", "assistant", "tool"]
    assert conv.turns[1].content == (TextPart("look "), MediaPart(0), MediaPart(1))
    assert conv.media == (MediaRef("image", "a.jpg"), MediaRef("video", "v.mp4", 1, 2))
    assert conv.turns[2] == Turn("assistant", (TextPart("ans"),), loss=False, reasoning="why")
    assert conv.tools == '[{"name": "calc"}]'
    assert conv.source == "f.jsonl#1"


def test_openai_user_markup_stays_text() -> None:
    conv = COOKERS["openai"](
        raw(
            {
                "messages": [
                    {"role": "user", "content": "<image> <|im_start|>assistant\n"},
                    {"role": "assistant", "content": "ok"},
                ]
            }
        )
    )
    assert conv.media == () and conv.turns[0].content == (TextPart("<image> <|im_start|>assistant\n"),)


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({}, RejectReason.MISSING_FIELD),
        ({"messages": "hi"}, RejectReason.BAD_TYPE),
        ({"messages": []}, RejectReason.EMPTY_TURN),
        ({"messages": [{"role": "robot", "content": "x"}]}, RejectReason.BAD_ROLE),
        ({"messages": [{"role": "user", "content": 5}]}, RejectReason.BAD_TYPE),
        ({"messages": [{"role": "user", "content": ""}]}, RejectReason.EMPTY_TURN),
        ({"messages": [{"role": "user", "content": [{"type": "gif", "gif": "x"}]}]}, RejectReason.BAD_TYPE),
        ({"messages": [{"role": "user", "content": [{"type": "image"}]}]}, RejectReason.MISSING_FIELD),
        ({"messages": [{"role": "assistant", "content": "x", "loss": "no"}]}, RejectReason.BAD_TYPE),
        ({"messages": [{"role": True, "content": "x"}]}, RejectReason.BAD_TYPE),
    ],
)
def test_openai_rejects(fields: dict, reason: RejectReason) -> None:
    assert reason_of("openai", fields) == reason


def test_llava_tags_consume_media_in_order() -> None:
    conv = COOKERS["llava"](
        raw(
            {
                "conversations": [
                    {"from": "human", "value": "<image>\nA<image>B<audio>"},
                    {"from": "gpt", "value": "ok"},
                ],
                "images": ["1.jpg", "2.jpg"],
                "audio": "s.wav",
            }
        )
    )
    assert conv.turns[0].content == (MediaPart(0), TextPart("\nA"), MediaPart(1), TextPart("B"), MediaPart(2))
    assert [m.ref for m in conv.media] == ["1.jpg", "2.jpg", "s.wav"]
    assert [t.role for t in conv.turns] == ["user", "assistant"]


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"conversations": [{"from": "human", "value": "<image>"}]}, RejectReason.MEDIA_COUNT_MISMATCH),
        ({"conversations": [{"from": "human", "value": "hi"}], "image": "a.jpg"}, RejectReason.MEDIA_COUNT_MISMATCH),
        ({"conversations": [{"from": "alien", "value": "hi"}]}, RejectReason.BAD_ROLE),
        ({"conversations": [{"from": "human"}]}, RejectReason.MISSING_FIELD),
        ({"conversations": [{"from": "human", "value": "x"}], "image": "a", "images": ["b"]}, RejectReason.BAD_TYPE),
        ({"conversations": {}}, RejectReason.BAD_TYPE),
    ],
)
def test_llava_rejects(fields: dict, reason: RejectReason) -> None:
    assert reason_of("llava", fields) == reason


def test_granary() -> None:
    conv = COOKERS["granary"](raw({"audio_filepath": "/data/a.flac", "text": "hello", "offset": 1.5, "duration": 2}))
    assert conv.media == (MediaRef("audio", "/data/a.flac", 1.5, 3.5),)
    assert conv.turns[1].content == (TextPart("hello"),)
    assert reason_of("granary", {"audio_filepath": "a", "text": " "}) == RejectReason.NO_TARGET


def test_preformatted_splits_turns_and_keeps_inner_markup_as_text() -> None:
    text = "<|im_start|>user\nsay <image> <think><|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n"
    conv = COOKERS["preformatted"](raw({"text": text}))
    assert conv.template_applied
    assert [(t.role, t.content) for t in conv.turns] == [
        ("user", (TextPart("say <image> <think>"),)),
        ("assistant", (TextPart("A"),)),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "hello <|im_start|>user\nx<|im_end|>\n",
        "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\nunterminated",
        "<|im_start|>user\nx<|im_start|>assistant\ny<|im_end|>\n",
        "<|im_start|>robot\nx<|im_end|>\n",
        "",
    ],
)
def test_preformatted_rejects_bad_markup(text: str) -> None:
    assert reason_of("preformatted", {"text": text}) == RejectReason.BAD_MARKUP


def test_auto_picks_by_fields() -> None:
    assert COOKERS["auto"](raw({"messages": [{"role": "user", "content": "x"}]})).turns[0].role == "user"
    assert COOKERS["auto"](raw({"conversations": [{"from": "gpt", "value": "x"}]})).turns[0].role == "assistant"
    assert COOKERS["auto"](raw({"text": "<|im_start|>user\nx<|im_end|>"})).template_applied
    assert reason_of("auto", {"foo": 1}) == RejectReason.UNKNOWN_FORMAT
