"""Issue 13 item 10 / SPEC §5: a video becomes per-frame-group LINES,
"Frame i sampled at X.XX seconds: <img>...</img>", one per line, separated by "\\n".

A real video goes through ``process_media`` and ``tokenize_batch``; the text and ids are pinned, and
the ids equal Hugging Face's encoding of that text (text between two control tokens is one string)."""

from __future__ import annotations

from cook.config import TokenizerConfig
from cook.media import process_media
from cook.tokenize import tokenize_batch
from cook.types import Conversation, MediaPart, MediaRef, TextPart, Turn
from tests.unit.media.media_data import config, video_bytes

IMG = "<img>" + "<image>" * 4 + "</img>"  # a 4x4 patch grid: 16 patches -> 4 embeddings per frame pair
USER_TEXT = (
    f"Frame 1 sampled at 0.10 seconds: {IMG}\n"
    f"Frame 2 sampled at 0.40 seconds: {IMG}\n"
    f"Frame 3 sampled at 0.60 seconds: {IMG}\n"
    f"Frame 4 sampled at 0.90 seconds: {IMG}"
)
FRAME_1 = [48, 305, 87, 79, 303, 767, 78, 413, 642, 24, 1239, 960, 36, 231]  # "Frame 1 sampled at 0.10 seconds: "
NEWLINE_FRAME_2 = [209, 48, 305, 87, 79, 348, 767, 78, 413, 642, 24, 1329, 960, 36, 231]  # "\nFrame 2 ... 0.40 ..."


def _video_sample(chat_tokenizer, timestamps: bool = True):
    data = video_bytes(seconds=1.0, fps=10, width=32, height=32)
    items = process_media(
        MediaRef("video", "clip.mp4"), data, config(video={"target_patches": 16, "frame_timestamps": timestamps})
    )
    conv = Conversation(
        "t#1",
        (Turn("user", (MediaPart(0),)), Turn("assistant", (TextPart("Yo"),))),
        media=(MediaRef("video", "clip.mp4"),),
    )
    (tokenized,) = tokenize_batch(chat_tokenizer, [conv], [(items,)], TokenizerConfig(path="unused"))
    return tokenized.sample()


def test_each_frame_group_is_its_own_line(chat_tokenizer, hf_tokenizer) -> None:
    sample = _video_sample(chat_tokenizer)
    ids = sample.input_ids.tolist()
    user_ids = ids[3 : ids.index(2)]  # after <|im_start|> "user\n", up to <|im_end|>
    assert hf_tokenizer.decode(user_ids) == USER_TEXT
    assert user_ids == hf_tokenizer(USER_TEXT, add_special_tokens=False).input_ids
    assert user_ids[: len(FRAME_1) + 6] == [*FRAME_1, 6, 5, 5, 5, 5, 7]
    second = len(FRAME_1) + 6
    assert user_ids[second : second + len(NEWLINE_FRAME_2) + 6] == [*NEWLINE_FRAME_2, 6, 5, 5, 5, 5, 7]
    assert user_ids.count(209) == 3  # three line breaks between four groups, none after the last


def test_without_timestamps_groups_still_break_lines(chat_tokenizer, hf_tokenizer) -> None:
    sample = _video_sample(chat_tokenizer, timestamps=False)
    ids = sample.input_ids.tolist()
    user_ids = ids[3 : ids.index(2)]
    assert hf_tokenizer.decode(user_ids) == "\n".join([IMG] * 4)
    assert user_ids == [6, 5, 5, 5, 5, 7, 209] * 3 + [6, 5, 5, 5, 5, 7]
