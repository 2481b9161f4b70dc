"""The data contract: what a trainer must match to read a cooked dataset correctly (SPEC §8, §10).

    cook time:   cooked_contract(...) -> Contract -> cook_manifest.json["contract"]
    train time:  check_contract(Contract from the manifest, Expectation) -> raises ContractMismatch
    a blend:     check_blend([(name, Contract), ...]) -> raises ContractMismatch

Pre-packed data fixes at cook time what an online loader decides at training time: the tokenizer
(ids), the chat markup, the media settings that give every image its patch grid and placeholder
count, and the pack geometry. A trainer that drifts from any of them trains on wrong tokens or
mis-shaped media without an error (ms-swift #8020: image-token mismatch; LLaMA-Factory #8807: a
processor change silently altered the output). The manifest therefore carries a ``contract``, and the
reader (``make_loader(..., expect=...)``) and ``cook validate --expect-tokenizer`` compare it with the
trainer's side, naming every field that differs in ONE error::

    dataset out/demo does not match the trainer: seq_len 4096 != 8192; pad_multiple 8 is not a
    multiple of 2*CP=16; tokenizer sha256 differs (cooked with /models/a, training with /models/b)

L0 (stdlib only, like ``cook.format``): the writer, the reader and the validator all import it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from importlib.metadata import version
from typing import Any

from cook import format as fmt

CONTRACT_KEY = "contract"
FRAME_ENCODER = "Pillow"  # the library that encodes stored frames (cook.frames)
CHATML_TEMPLATE = f"{fmt.IM_START}{{role}}\\n{{content}}{fmt.IM_END}\\n"  # what chat_format "chatml" renders


class ContractMismatch(ValueError):
    """The trainer's side differs from a dataset's contract (or blended datasets differ); ``problems``
    holds one line per differing field."""

    def __init__(self, subject: str, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__(f"{subject}: " + "; ".join(self.problems))


@dataclass(frozen=True)
class MediaSettings:
    """The media settings that shape tensors and placeholder counts (SPEC §6)."""

    patch_size: int = fmt.PATCH_SIZE
    pixel_shuffle: int = 2  # side factor: 2x2 patches -> one embedding (format.PIXEL_SHUFFLE == 4)
    image_mode: str = "dynamic"
    min_patches: int = 1024
    max_patches: int = 13312
    max_tiles: int = 12
    tile_size: int = fmt.TILE_SIZE
    video_fps: float = 2.0
    video_min_frames: int = 8
    video_max_frames: int = 32
    video_target_patches: int = 1024
    temporal_patch: int = fmt.TEMPORAL_PATCH
    audio_sample_rate_hz: int = fmt.AUDIO_SAMPLE_RATE_HZ
    mel_bins: int = fmt.MEL_BINS


@dataclass(frozen=True)
class FrameStorage:
    """How one medium's visual frames are stored (``media.image.storage`` for images and tiles,
    ``media.video.storage`` for video frames; SPEC §8): ``raw`` keeps ``pixel_patches.npy`` (the other
    fields None); ``png``/``jpeg`` store one image member per frame, written by ``encoder``."""

    codec: str = "raw"  # raw | png | jpeg
    jpeg_quality: int | None = None
    chroma_subsampling: str | None = None  # jpeg: "4:4:4"
    png_compress_level: int | None = None
    encoder: str | None = None  # "Pillow"
    encoder_version: str | None = None

    @property
    def stores_frames(self) -> bool:
        return self.codec != "raw"


RAW_STORAGE = FrameStorage()  # pixel_patches.npy, as before stored frames


def frame_storage(codec: str, jpeg_quality: int = fmt.JPEG_QUALITY) -> FrameStorage:
    """The ``FrameStorage`` of a ``media.image.storage`` / ``media.video.storage`` value, with this
    process's encoder version.

    >>> frame_storage("jpeg").chroma_subsampling, frame_storage("raw").encoder
    ('4:4:4', None)
    """
    if codec == "raw":
        return FrameStorage()
    pillow = version("pillow")
    if codec == "png":
        return FrameStorage("png", None, None, fmt.PNG_COMPRESS_LEVEL, FRAME_ENCODER, pillow)
    return FrameStorage("jpeg", jpeg_quality, fmt.JPEG_SUBSAMPLING, None, FRAME_ENCODER, pillow)


def storage_problems(storage: FrameStorage) -> list[str]:
    """What a reader of this cook cannot decode exactly as declared (empty: it can)."""
    if storage.codec == "raw":
        return []
    if storage.codec not in fmt.FRAME_CODECS:
        return [f"frame codec {storage.codec!r} is not one this reader decodes ({', '.join(fmt.FRAME_STORAGE)})"]
    problems = []
    if storage.encoder != FRAME_ENCODER:
        problems.append(f"frames encoded by {storage.encoder!r}, this reader knows {FRAME_ENCODER!r}")
    if storage.codec == "jpeg" and storage.chroma_subsampling != fmt.JPEG_SUBSAMPLING:
        problems.append(f"jpeg chroma subsampling {storage.chroma_subsampling!r} != {fmt.JPEG_SUBSAMPLING}")
    if storage.codec == "jpeg" and not (isinstance(storage.jpeg_quality, int) and 1 <= storage.jpeg_quality <= 100):
        problems.append(f"jpeg quality {storage.jpeg_quality!r} is not in 1..100")
    return problems


@dataclass(frozen=True)
class Contract:
    """The cook-time side, as stored in the manifest."""

    tokenizer_path: str
    tokenizer_sha256: Mapping[str, str]  # file name -> sha256, every file of the tokenizer directory
    chat_format: str
    template_sha256: str
    vocab_size: int
    control_ids: Mapping[str, int]
    media: MediaSettings
    seq_len: int
    pad_multiple: int
    storage: FrameStorage = FrameStorage()  # images and tiles; absent from manifests before stored frames: raw
    # video frames; absent from manifests before media.video.storage, where video followed ``storage``
    video_storage: FrameStorage = FrameStorage()

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["tokenizer_sha256"] = dict(sorted(self.tokenizer_sha256.items()))
        data["control_ids"] = dict(sorted(self.control_ids.items()))
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Contract:
        known = {f.name for f in fields(MediaSettings)}
        media = MediaSettings(**{k: v for k, v in dict(data["media"]).items() if k in known})
        stored = {f.name for f in fields(FrameStorage)}
        storage = FrameStorage(**{k: v for k, v in dict(data.get("storage", {})).items() if k in stored})
        video = data.get("video_storage")
        video_storage = storage if video is None else FrameStorage(**{k: v for k, v in video.items() if k in stored})
        plain = {f.name: data[f.name] for f in fields(cls) if f.name not in ("media", "storage", "video_storage")}
        return cls(**plain, media=media, storage=storage, video_storage=video_storage)

    @property
    def storages(self) -> tuple[FrameStorage, ...]:
        """The distinct frame storages of this cook (images' first)."""
        return (self.storage,) if self.video_storage == self.storage else (self.storage, self.video_storage)


@dataclass(frozen=True)
class Expectation:
    """The trainer's side. ``None`` leaves a field unchecked; ``media`` may name only some fields."""

    tokenizer_dir: str | None = None
    media: MediaSettings | Mapping[str, object] | None = None
    seq_len: int | None = None
    context_parallel_size: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.media, Mapping):
            unknown = sorted(set(self.media) - {f.name for f in fields(MediaSettings)})
            if unknown:
                valid = ", ".join(f.name for f in fields(MediaSettings))
                raise ValueError(f"Expectation.media: unknown field(s) {unknown}; valid: {valid}")
        if self.context_parallel_size < 1:
            raise ValueError(f"Expectation.context_parallel_size={self.context_parallel_size} must be >= 1")


def tokenizer_files_sha256(path: str) -> dict[str, str]:
    """sha256 of every file of the tokenizer directory (sorted names)."""
    out = {}
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        if os.path.isfile(full):
            with open(full, "rb") as handle:
                out[name] = hashlib.sha256(handle.read()).hexdigest()
    return out


def _tokenizer_template(path: str) -> str:
    jinja = os.path.join(path, "chat_template.jinja")
    if os.path.isfile(jinja):
        with open(jinja, encoding="utf-8") as handle:
            return handle.read()
    config = os.path.join(path, "tokenizer_config.json")
    if os.path.isfile(config):
        with open(config, encoding="utf-8") as handle:
            template = json.load(handle).get("chat_template")
        return template if isinstance(template, str) else json.dumps(template, sort_keys=True)
    return ""


def template_sha256(chat_format: str, tokenizer_dir: str) -> str:
    """sha256 of the chat markup in effect: cook's ChatML for ``chatml``, else the tokenizer's own template."""
    text = CHATML_TEMPLATE if chat_format == "chatml" else _tokenizer_template(tokenizer_dir)
    return hashlib.sha256(f"{chat_format}\n{text}".encode()).hexdigest()


def tokenizer_vocab(path: str) -> tuple[int, dict[str, int]] | None:
    """``(vocab size, control ids)`` from ``tokenizer.json`` (what ``len(AutoTokenizer)`` counts: the
    model vocabulary and the added tokens), or None without one."""
    file = os.path.join(path, "tokenizer.json")
    if not os.path.isfile(file):
        return None
    with open(file, encoding="utf-8") as handle:
        data = json.load(handle)
    vocab = data.get("model", {}).get("vocab", {})
    ids = set(vocab.values()) if isinstance(vocab, dict) else set(range(len(vocab)))
    added = {str(t["content"]): int(t["id"]) for t in data.get("added_tokens", [])}
    control: dict[str, int] = {token: added[token] for token in fmt.CONTROL_TOKENS if token in added}
    if isinstance(vocab, dict):
        control.update({t: int(vocab[t]) for t in fmt.CONTROL_TOKENS if t not in control and t in vocab})
    return len(ids | set(added.values())), control


def cooked_contract(
    *,
    tokenizer_path: str,
    chat_format: str,
    vocab_size: int,
    control_ids: Mapping[str, int],
    media: MediaSettings,
    seq_len: int,
    pad_multiple: int,
    storage: FrameStorage = RAW_STORAGE,
    video_storage: FrameStorage | None = None,
) -> Contract:
    """The contract of a cook; ``video_storage`` None: video frames are stored as ``storage``."""
    return Contract(
        tokenizer_path=os.path.abspath(tokenizer_path),
        tokenizer_sha256=tokenizer_files_sha256(tokenizer_path),
        chat_format=chat_format,
        template_sha256=template_sha256(chat_format, tokenizer_path),
        vocab_size=vocab_size,
        control_ids=dict(control_ids),
        media=media,
        seq_len=seq_len,
        pad_multiple=pad_multiple,
        storage=storage,
        video_storage=storage if video_storage is None else video_storage,
    )


def _tokenizer_problems(cooked: Contract, tokenizer_dir: str) -> list[str]:
    if not os.path.isdir(tokenizer_dir):
        return [f"tokenizer directory {tokenizer_dir!r} does not exist"]
    problems = []
    files = tokenizer_files_sha256(tokenizer_dir)
    if files != dict(cooked.tokenizer_sha256):
        names = set(files) | set(cooked.tokenizer_sha256)
        changed = sorted(n for n in names if files.get(n) != cooked.tokenizer_sha256.get(n))
        problems.append(
            f"tokenizer sha256 differs (cooked with {cooked.tokenizer_path}, training with"
            f" {os.path.abspath(tokenizer_dir)}; files {', '.join(changed)})"
        )
    if template_sha256(cooked.chat_format, tokenizer_dir) != cooked.template_sha256:
        problems.append(f"chat template hash differs (chat_format {cooked.chat_format})")
    vocab = tokenizer_vocab(tokenizer_dir)
    if vocab is not None:
        size, control = vocab
        if size != cooked.vocab_size:
            problems.append(f"vocab_size {cooked.vocab_size} != {size}")
        for token in sorted(set(control) | set(cooked.control_ids)):
            if control.get(token) != cooked.control_ids.get(token):
                problems.append(f"control id {token} {cooked.control_ids.get(token)} != {control.get(token)}")
    return problems


def _media_problems(cooked: MediaSettings, expected: MediaSettings | Mapping[str, object]) -> list[str]:
    wanted = asdict(expected) if isinstance(expected, MediaSettings) else dict(expected)
    have = asdict(cooked)
    return [f"media.{name} {have[name]} != {value}" for name, value in wanted.items() if have[name] != value]


def contract_problems(cooked: Contract, expected: Expectation) -> list[str]:
    """One line per field where the trainer's side differs from the cooked contract (empty: they match)."""
    problems = []
    if expected.seq_len is not None and expected.seq_len != cooked.seq_len:
        problems.append(f"seq_len {cooked.seq_len} != {expected.seq_len}")
    cp = expected.context_parallel_size
    if cp > 1 and cooked.pad_multiple % (2 * cp):
        problems.append(f"pad_multiple {cooked.pad_multiple} is not a multiple of 2*CP={2 * cp}")
    if expected.tokenizer_dir is not None:
        problems += _tokenizer_problems(cooked, expected.tokenizer_dir)
    if expected.media is not None:
        problems += _media_problems(cooked.media, expected.media)
    return problems


def check_contract(cooked: Contract, expected: Expectation, dataset: str) -> None:
    """Raise ``ContractMismatch`` naming every differing field."""
    problems = contract_problems(cooked, expected)
    if problems:
        raise ContractMismatch(f"dataset {dataset} does not match the trainer", problems)


_MAY_DIFFER = ("tokenizer_path", "storage", "video_storage")  # a blend may mix storages: each pack's members say which


def _differences(a: Contract, b: Contract) -> list[str]:
    left, right = a.to_dict(), b.to_dict()
    out = []
    for name in left:
        if name in _MAY_DIFFER:
            continue
        if name == "media":
            out += [f"media.{k} {v} != {right['media'][k]}" for k, v in left["media"].items() if v != right["media"][k]]
        elif left[name] != right[name]:
            opaque = isinstance(left[name], dict) or name.endswith("sha256")
            out.append(f"{name} differs" if opaque else f"{name} {left[name]} != {right[name]}")
    return out


def check_blend(contracts: Sequence[tuple[str, Contract]]) -> None:
    """Every dataset of a blend must share one contract: raise ``ContractMismatch`` naming the fields."""
    if not contracts:
        return
    first_name, first = contracts[0]
    for name, other in contracts[1:]:
        problems = _differences(first, other)
        if problems:
            raise ContractMismatch(f"blended datasets {first_name} and {name} have different contracts", problems)


def expected_tokenizer_problems(contract: Contract | None, tokenizer_dir: str) -> list[str]:
    """``cook validate DIR --expect-tokenizer DIR2``: the fields of DIR's contract (None: its manifest
    has none) in which DIR2 differs."""
    if contract is None:
        return ["the manifest has no contract (cooked by an older cook); re-cook to check the tokenizer"]
    return contract_problems(contract, Expectation(tokenizer_dir=tokenizer_dir))
