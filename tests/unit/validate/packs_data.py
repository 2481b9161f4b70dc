"""Hand-made packs and shards for the validator's unit tests, built from the format alone (not the writer),
so a writer bug cannot make a test agree with itself.

The demo tokenizer's control ids are fixed (tests/assets/demo_tokenizer): <|im_start|> 1, <|im_end|> 2,
<image> 5, <img> 6, </img> 7, <so_start> 8, <so_embedding> 9, <so_end> 10; pad 0.
"""

from __future__ import annotations

import io
import json
import struct
import tarfile
from pathlib import Path

import numpy as np

from cook import format as fmt
from cook.packfiles import RawPack
from cook.types import Pack, SequenceMeta
from cook.validate.problems import PackRules, TokenInfo
from cook.writer.members import pack_members

IDS = {
    fmt.IM_START: 1,
    fmt.IM_END: 2,
    fmt.THINK_START: 3,
    fmt.THINK_END: 4,
    fmt.IMAGE_TOKEN: 5,
    fmt.IMG_START: 6,
    fmt.IMG_END: 7,
    fmt.AUDIO_START: 8,
    fmt.AUDIO_TOKEN: 9,
    fmt.AUDIO_END: 10,
}
TOKENS = TokenInfo(vocab_size=8192, pad_id=0, control_ids=IDS)
RULES = PackRules(seq_len=256, pad_multiple=8, image_mode="dynamic", tokens=TOKENS)
TEXT = 100  # an ordinary text token


def sequence(prompt: list[int], answer: int) -> tuple[list[int], list[int]]:
    """``<|im_start|>`` prompt ``<|im_start|>`` answer x TEXT ``<|im_end|>``: (ids, mask); targets = answer + im_end."""
    ids = [1, *prompt, 1] + [TEXT] * answer + [2]
    mask = [0] * (len(prompt) + 2) + [1] * (answer + 1)
    return ids, mask


def image_block(embeddings: int) -> list[int]:
    return [6] + [5] * embeddings + [7]


def audio_block(tokens: int) -> list[int]:
    return [8] + [9] * tokens + [10]


def build(
    seqs: list[tuple[list[int], list[int]]],
    media: list[tuple[str, ...]] | None = None,
    sizes: list[list[int]] | None = None,
    audio_lengths: list[int] | None = None,
    pad_multiple: int = 8,
) -> Pack:
    """A pack of ``seqs`` (ids, mask), each padded with 0 to ``pad_multiple``; media arrays from the sizes."""
    media = media or [()] * len(seqs)
    lengths = [len(ids) for ids, _ in seqs]
    padded = [-(-n // pad_multiple) * pad_multiple for n in lengths]
    ids = np.zeros(sum(padded), np.int32)
    mask = np.zeros(sum(padded), np.uint8)
    start = 0
    for (seq_ids, seq_mask), width in zip(seqs, padded, strict=True):
        ids[start : start + len(seq_ids)] = seq_ids
        mask[start : start + len(seq_mask)] = seq_mask
        start += width
    patches = None
    if sizes:
        count = sum(f * (h // 16) * (w // 16) for f, h, w in sizes)
        patches = np.zeros((count, 768), np.uint8)
    features = lengths_array = None
    if audio_lengths:
        features = np.zeros((len(audio_lengths), max(audio_lengths), 128), np.float16)
        lengths_array = np.array(audio_lengths, np.int32)
    return Pack(
        input_ids=ids,
        loss_mask=mask,
        cu_seqlens=np.array([0, *np.cumsum(lengths)], np.int32),
        cu_seqlens_padded=np.array([0, *np.cumsum(padded)], np.int32),
        sequences=tuple(
            SequenceMeta(source=f"src.jsonl#{i}", length=n, targets=int(sum(m)), media=kinds)
            for i, ((_, m), n, kinds) in enumerate(zip(seqs, lengths, media, strict=True))
        ),
        pixel_patches=patches,
        media_sizes=np.array(sizes, np.int32) if sizes else None,
        audio_features=features,
        audio_lengths=lengths_array,
    )


def multimodal() -> Pack:
    """An image, a 4-frame video (2 blocks), a 2-clip audio and a text-only sequence."""
    video = [*image_block(4), 20, *image_block(4)]
    return build(
        [
            sequence([20, *image_block(1), 21, *video], 3),
            sequence([22, *audio_block(13 + 2), 23], 2),
            sequence([24], 5),
        ],
        media=[("image", "video"), ("audio",), ()],
        sizes=[[1, 32, 32], [4, 64, 64]],
        audio_lengths=[100, 10],
    )


def multimodal_members() -> dict[str, bytes]:
    return members(multimodal())


def meta_bytes(pack: Pack) -> bytes:
    body = {
        "schema_version": 1,
        "sequences": [
            {"source": s.source, "length": s.length, "targets": s.targets, "media": list(s.media)}
            for s in pack.sequences
        ],
    }
    return json.dumps(body).encode()


def members(pack: Pack) -> dict[str, bytes]:
    """Pack -> member name -> bytes, exactly as the writer encodes them."""
    return dict(pack_members(pack))


def raw(pack: Pack, key: str = "pack-000000000") -> RawPack:
    return RawPack(key, 0, members(pack))


def write_tar(path: Path, packs: list[tuple[str, dict[str, bytes]]]) -> list[int]:
    """USTAR shard of (key, members) in order, plus its .tar.idx; returns the idx offsets."""
    offsets = []
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        for key, named in packs:
            offsets.append(tar.offset)
            for name, data in named.items():
                info = tarfile.TarInfo(f"{key}.{name}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        offsets.append(tar.offset)
    Path(str(path) + fmt.INDEX_SUFFIX).write_bytes(b"".join(struct.pack("<Q", o) for o in offsets))
    return offsets
