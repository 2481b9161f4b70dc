"""Pipeline file -> frozen, schema-validated ``PipelineConfig`` (SPEC §3).

The dataclasses below are the single source of every key, its type, bounds and default.
``pipeline_schema()`` derives the JSON Schema from them (committed as ``schemas/pipeline.schema.json``
and kept equal by a test); ``load_config`` validates the YAML against that schema with
``jsonschema``, collects every error into one line and raises ``ConfigError`` (exit 2).

    >>> cfg = config_from_dict({"input": {"path": "data/*.jsonl"}, "tokenizer": {"path": "tok"}})
    >>> cfg.packing.seq_len, cfg.packing.algorithm
    (8192, 'best_fit_decreasing')
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from cook.errors import ConfigError


def _key(default: Any, doc: str, **constraints: Any) -> Any:
    """A config key with its default, its one-line doc and JSON Schema constraints."""
    meta = {"doc": doc, **constraints}
    if isinstance(default, list | dict):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=meta)
    return field(default=default, metadata=meta)


REQUIRED: Any = dataclasses.MISSING
# The names of ``cook.packing.ALGORITHMS``, in its order (a test keeps the two equal): config names
# them without importing the packing stage.
PackingAlgorithm = Literal[
    "concatenative",
    "first_fit_decreasing",
    "first_fit_shuffle",
    "best_fit_decreasing",
    "modified_first_fit_decreasing",
    "greedy_knapsack",
    "balanced_greedy_knapsack",
]
# The largest pack capacity. Packing keeps per-capacity state (best fit buckets its bins by free
# tokens: an int64 per token of seq_len, 128 MiB at 2**24, measured), so seq_len=10**12 would ask for
# terabytes after the whole cook; 2**24 is beyond any trained context and far inside int32
# (2**31 - 1), the dtype of input_ids and cu_seqlens.
MAX_SEQ_LEN = 2**24


@dataclass(frozen=True)
class InputConfig:
    path: str = _key(REQUIRED, "Input file, directory or glob (sorted; relative to the working directory).")
    format: Literal["auto", "jsonl", "parquet", "wds"] = _key("auto", "Input format; auto picks by suffix.")
    media_root: str | None = _key(None, "Directory that relative media references resolve against.")
    media_stores: list[str] = _key([], "Auxiliary media stores (directories or .tar files), tried in order.")
    max_record_bytes: int = _key(64 * 2**20, "Largest raw record (JSON line, row or json member).", minimum=1)
    unit_bytes: int = _key(
        32 * 2**20, "Work unit size: JSONL files are split at line boundaries, Parquet at row groups.", minimum=1
    )


@dataclass(frozen=True)
class TokenizerConfig:
    path: str = _key(REQUIRED, "Local directory loadable by transformers.AutoTokenizer.")
    chat_format: Literal["chatml", "template"] = _key(
        "chatml",
        "Chat markup: 'chatml' (<|im_start|>role\\n...<|im_end|>\\n) or 'template' (the tokenizer's own Jinja "
        "chat_template).",
    )
    train_on: Literal["all_assistant", "last_assistant"] = _key(
        "all_assistant", "Which assistant turns are targets (per-turn 'loss' flags override)."
    )
    normalize_thinking: bool = _key(
        True,
        "ChatML mode: render assistant thinking as exactly one <think>...</think> block (template mode: the "
        "template decides).",
    )
    backend: Literal["auto", "hf", "gigatoken"] = _key(
        "auto", "Text encoder: auto = gigatoken when installed and its self-check matches hf, else hf."
    )


@dataclass(frozen=True)
class ImageConfig:
    mode: Literal["dynamic", "tiles"] = _key("dynamic", "dynamic: Omni-style patch grid; tiles: 512 px tiles.")
    min_patches: int = _key(1024, "Smallest patch grid (16 px patches) in dynamic mode.", minimum=4)
    max_patches: int = _key(13312, "Largest patch grid in dynamic mode.", minimum=4)
    max_tiles: int = _key(12, "Most 512 px tiles in tiles mode (a thumbnail is added when > 1).", minimum=1)
    max_pixels: int = _key(178_956_970, "Largest image (width x height) read from the header before decode.")
    storage: Literal["raw", "png", "jpeg"] = _key(
        "raw",
        "How image frames (images, tiles) are stored: raw (pixel_patches.npy), png (lossless) or jpeg (4:4:4), one "
        "image member per frame at its grid size. Video frames follow it unless media.video.storage is set.",
    )
    jpeg_quality: int = _key(95, "JPEG quality of stored frames (storage: jpeg; chroma 4:4:4).", minimum=1, maximum=100)


@dataclass(frozen=True)
class VideoConfig:
    fps: float = _key(2.0, "Frames sampled per second.", exclusiveMinimum=0)
    min_frames: int = _key(8, "Fewest frames sampled.", minimum=2)
    max_frames: int = _key(32, "Most frames sampled.", minimum=2)
    target_patches: int = _key(1024, "Patch budget of one frame (aspect kept, both grid sides even).", minimum=4)
    max_duration_s: float = _key(600.0, "Longer videos are rejected (media_limit).", exclusiveMinimum=0)
    frame_timestamps: bool = _key(True, "Prefix each frame group with 'Frame i sampled at X.XX seconds: '.")
    use_audio: bool = _key(False, "Also cook a video's audio track as a second media item.")
    storage: Literal["raw", "png", "jpeg"] | None = _key(
        None,
        "How video frames are stored (values as media.image.storage); null: as media.image.storage. raw cannot be "
        "mixed with png/jpeg (a pack holds either pixel_patches.npy or frame members).",
    )
    jpeg_quality: int | None = _key(
        None, "JPEG quality of stored video frames; null: media.image.jpeg_quality.", minimum=1, maximum=100
    )


@dataclass(frozen=True)
class AudioConfig:
    max_duration_s: float = _key(3600.0, "Longer audio is rejected (media_limit).", exclusiveMinimum=0)


@dataclass(frozen=True)
class MediaConfig:
    image: ImageConfig = _key(ImageConfig(), "Image settings.")
    video: VideoConfig = _key(VideoConfig(), "Video settings.")
    audio: AudioConfig = _key(AudioConfig(), "Audio settings.")
    max_media_bytes: int = _key(512 * 2**20, "Largest media file read (media_limit above it).", minimum=1)

    @property
    def video_storage(self) -> tuple[str, int]:
        """``(codec, jpeg quality)`` of video frames: ``media.video``'s own keys, else ``media.image``'s."""
        video, image = self.video, self.image
        return (
            video.storage if video.storage is not None else image.storage,
            video.jpeg_quality if video.jpeg_quality is not None else image.jpeg_quality,
        )


@dataclass(frozen=True)
class PackingConfig:
    seq_len: int = _key(
        8192, "Pack capacity in tokens (a multiple of pad_multiple; at most 2**24).", minimum=1, maximum=MAX_SEQ_LEN
    )
    algorithm: PackingAlgorithm = _key("best_fit_decreasing", "Packing algorithm (cook.packing.ALGORITHMS).")
    buffer_size: int | Literal["all"] = _key(10000, "Samples packed together, or 'all'.", minimum=1)
    pad_multiple: int = _key(8, "Each sequence is padded to a multiple of this.", minimum=1)
    max_sequences_per_pack: int | None = _key(None, "Most sequences in one pack.", minimum=1)
    media_budget: int | None = _key(None, "Most visual patches in one pack.", minimum=1)
    pack_count_multiple: int | None = _key(None, "Number of packs per window made a multiple of this.", minimum=1)
    overflow: Literal["truncate", "reject"] = _key(
        "truncate", "Longer than seq_len: truncate (keeping all media and a target) or reject."
    )
    delta: int = _key(0, "Extra packs for balanced_greedy_knapsack.", minimum=0)
    seed: int = _key(0, "Seed of randomized algorithms.", minimum=0)


@dataclass(frozen=True)
class OutputConfig:
    dir: str = _key("out/cooked", "Output dataset directory.")
    shard_size: int = _key(256, "Packs per shard.", minimum=1)


@dataclass(frozen=True)
class RayConfig:
    address: str | None = _key(
        None, "Ray cluster to join (HOST:PORT, auto, ray://HOST[:PORT]); null starts an embedded local Ray."
    )
    num_actors: int = _key(2, "Cooking actors; each loads the tokenizer once.", minimum=1)
    cpus_per_actor: float = _key(1.0, "CPUs reserved per actor.", exclusiveMinimum=0)
    record_timeout_s: float = _key(60.0, "Time budget of one record (timeout reject).", exclusiveMinimum=0)
    connect_timeout_s: float = _key(
        30.0, "Joining a cluster (ray.address) fails with one line after this many seconds.", exclusiveMinimum=0
    )
    checkpoint_interval_s: float = _key(
        5.0,
        "The resume state is saved after a shard commit once this many seconds have passed since the last "
        "save (0: after every commit), at the end and on Ctrl-C; a kill -9 resumes from the last save.",
        minimum=0,
    )
    direct_io: bool = _key(
        False,
        "Write shards with O_DIRECT (Linux), past the page cache; the bytes are the same. Off: plain buffered "
        "writes (docs/SCALING.md has the measurements).",
    )
    jobs_per_call: int = _key(
        0,
        "Jobs sent to an actor in one Ray call: Ray's cost in the driver is per call. 0: automatic, one job a "
        "call up to 63 actors, then one more for every 32 actors, up to 16 (docs/SCALING.md).",
        minimum=0,
        maximum=64,
    )


@dataclass(frozen=True)
class PipelineConfig:
    input: InputConfig = _key(REQUIRED, "What to read.")
    tokenizer: TokenizerConfig = _key(REQUIRED, "Tokenizer and chat format.")
    cooker: Literal["auto", "openai", "llava", "granary", "preformatted"] = _key("auto", "Raw record format.")
    media: MediaConfig = _key(MediaConfig(), "Media settings (SPEC §6).")
    packing: PackingConfig = _key(PackingConfig(), "Packing (SPEC §7).")
    output: OutputConfig = _key(OutputConfig(), "Where and how shards are written.")
    ray: RayConfig = _key(RayConfig(), "Ray settings.")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ---------------------------------------------------------------- schema derived from the dataclasses
def _type_schema(tp: Any) -> dict[str, Any]:
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return _dataclass_schema(tp)  # type: ignore[arg-type]
    if origin is Literal:
        return {"enum": list(typing.get_args(tp))}
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_type_schema(arg) for arg in typing.get_args(tp)]}
    if origin is list:
        return {"type": "array", "items": _type_schema(typing.get_args(tp)[0])}
    simple = {str: "string", bool: "boolean", int: "integer", float: "number", type(None): "null"}
    return {"type": simple[tp]}


def _dataclass_schema(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    properties: dict[str, Any] = {}
    required = []
    for f in dataclasses.fields(cls):
        schema = _type_schema(hints[f.name])
        constraints = {k: v for k, v in f.metadata.items() if k != "doc"}
        if constraints and "anyOf" in schema:
            schema["anyOf"] = [
                {**s, **constraints} if s.get("type") in ("integer", "number") else s for s in schema["anyOf"]
            ]
        else:
            schema.update(constraints)
        schema["description"] = f.metadata["doc"]
        if dataclasses.is_dataclass(f.default):  # a section: its default as a mapping
            schema["default"] = dataclasses.asdict(f.default)  # type: ignore[arg-type]
        elif f.default is not dataclasses.MISSING:
            schema["default"] = f.default
        elif f.default_factory is not dataclasses.MISSING:  # a list or dict key (``_key``)
            schema["default"] = f.default_factory()
        else:
            required.append(f.name)
        properties[f.name] = schema
    out: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": properties}
    if required:
        out["required"] = required
    return out


def pipeline_schema() -> dict[str, Any]:
    schema = _dataclass_schema(PipelineConfig)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "cook pipeline", **schema}


# ---------------------------------------------------------------- loading
# A config problem: the keys it is about (the first is the one named; a relation names the others in its
# text) and what is wrong.
Problem = tuple[tuple[str, ...], str]


# Keys a pipeline may still carry from an older cook: each is a config error that says what happens now.
REMOVED_KEYS: dict[str, str] = {
    "ray.stage": "removed; cooked samples are always staged under output.dir (.cook-progress/stage), delete the key",
}


def _pop_removed(data: dict[str, Any]) -> list[Problem]:
    """Take the ``REMOVED_KEYS`` out of ``data`` (a copy's nested mappings are copied); -> their errors."""
    found: list[Problem] = []
    for key, why in REMOVED_KEYS.items():
        *parents, name = key.split(".")
        node: Any = data
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and name in node:
            del node[name]
            found.append(((key,), why))
    return found


def _build(cls: type, data: dict[str, Any]) -> Any:
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        value = data[f.name]
        kwargs[f.name] = _build(hints[f.name], value) if dataclasses.is_dataclass(hints[f.name]) else value
    return cls(**kwargs)


def _error_path(error: Any) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "<top level>"


def config_from_dict(data: Any, origin: str = "pipeline", flags: Mapping[str, str] | None = None) -> PipelineConfig:
    """Validate a parsed pipeline mapping and build the frozen config; ``ConfigError`` lists all errors.

    ``flags`` maps the key paths a command-line flag wrote to that flag (``packing.seq_len`` -> ``--set
    packing.seq_len``): an error at one of them (or below it) is the flag's, ``--set packing.seq_len:
    'abc' is not of type 'integer'``, not ``origin``'s.
    """
    import jsonschema

    if not isinstance(data, dict):
        raise ConfigError(f"{origin}: the pipeline file must be a YAML mapping")
    data = copy.deepcopy(data)
    removed = _pop_removed(data)
    validator = jsonschema.Draft202012Validator(pipeline_schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    if removed or errors:
        raise _config_error(origin, [*removed, *(((_error_path(e),), _one_line(e)) for e in errors)], flags or {})
    config: PipelineConfig = _build(PipelineConfig, data)
    problems = _relation_problems(config)
    if problems:
        raise _config_error(origin, problems, flags or {})
    return config


def _config_error(origin: str, problems: list[Problem], flags: Mapping[str, str]) -> ConfigError:
    """One line: the file's problems after ``origin: ``, then each flag's value's after the flag."""
    in_file, by_flag = [], []
    for keys, text in problems:
        written = next(filter(None, (_written_by(key, flags) for key in keys)), None)
        if written is None:
            in_file.append(f"{keys[0]}: {text}")
        else:
            by_flag.append(
                f"{flags[written]}: {text}" if written == keys[0] else f"{flags[written]}: {keys[0]}: {text}"
            )
    return ConfigError("; ".join([*([f"{origin}: " + "; ".join(in_file)] if in_file else []), *by_flag]))


def _written_by(key: str, flags: Mapping[str, str]) -> str | None:
    """The key path of ``flags`` that wrote ``key``: itself or the closest mapping above it; None: the file."""
    written = [k for k in flags if key == k or key.startswith(f"{k}.")]
    return max(written, key=len) if written else None


_REGISTRY_KEYS = frozenset({"packing.algorithm"})  # enum keys named like a registry: unknown X; valid: ...


def _one_line(error: Any) -> str:
    if error.validator == "additionalProperties":
        valid = list(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - set(valid))
        close = {name: difflib.get_close_matches(name, valid, n=1, cutoff=0.6) for name in unknown}
        hint = "; ".join(f"{name}: did you mean {match[0]}?" for name, match in close.items() if match)
        message = error.message.replace("Additional properties are not allowed", "unknown key")
        return f"{message} ({hint})" if hint else message
    if error.validator == "anyOf":
        return f"{error.instance!r} is not a valid value"
    if error.validator == "enum" and _error_path(error) in _REGISTRY_KEYS:
        return f"unknown {error.instance!r}; valid: {', '.join(sorted(error.validator_value))}"
    text: str = error.message
    return text


def _relation_problems(config: PipelineConfig) -> list[Problem]:
    problems: list[Problem] = []
    p = config.packing
    if p.seq_len % p.pad_multiple:
        problems.append(
            (
                ("packing.seq_len", "packing.pad_multiple"),
                f"{p.seq_len} is not a multiple of packing.pad_multiple={p.pad_multiple}",
            )
        )
    img, vid = config.media.image, config.media.video
    if img.min_patches > img.max_patches:
        problems.append((("media.image.min_patches", "media.image.max_patches"), "larger than media.image.max_patches"))
    if vid.min_frames > vid.max_frames:
        problems.append((("media.video.min_frames", "media.video.max_frames"), "larger than media.video.max_frames"))
    video_codec = config.media.video_storage[0]
    if (img.storage == "raw") != (video_codec == "raw"):
        problems.append(
            (
                ("media.video.storage", "media.image.storage"),
                f"{video_codec} cannot be mixed with media.image.storage {img.storage}: a pack holds either"
                " pixel_patches.npy (raw) or frame members (png, jpeg)",
            )
        )
    return problems


def _did_you_mean(name: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
    return f"did you mean {close[0]}?" if close else f"valid: {', '.join(valid)}"


def _check_key_path(key: str) -> None:
    """``--set`` names a key of the dataclasses: a typo is reported as the flag's, with the closest key."""
    if key in REMOVED_KEYS:
        raise ConfigError(f"--set {key}: {REMOVED_KEYS[key]}")
    cls: Any = PipelineConfig
    parts = key.split(".")
    for depth, part in enumerate(parts):
        if not dataclasses.is_dataclass(cls):
            raise ConfigError(f"--set {key}: {parts[depth - 1]!r} is not a mapping")
        names = [f.name for f in dataclasses.fields(cls)]
        if part not in names:
            raise ConfigError(f"--set {key}: unknown key ({_did_you_mean(part, names)})")
        cls = typing.get_type_hints(cls)[part]


def apply_override(data: dict[str, Any], assignment: str) -> str:
    """Apply one ``--set key.path=value`` (value parsed as YAML) to the raw mapping, in place; -> the key path.

    The key path must name a key of the pipeline (``PipelineConfig``): ``--set packing.seqlen=1`` is
    ``--set packing.seqlen: unknown key (did you mean seq_len?)``, before the file's own keys are checked.
    """
    key, sep, raw = assignment.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set {assignment!r}: expected key.path=value")
    _check_key_path(key)
    try:
        value = yaml.safe_load(raw) if raw else ""
    except yaml.YAMLError as err:
        raise ConfigError(f"--set {key}: value is not valid YAML ({err.__class__.__name__})") from None
    _assign(data, key, value, f"--set {key}")
    return key


def _assign(data: dict[str, Any], key: str, value: Any, flag: str) -> None:
    node = data
    parts = key.split(".")
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"{flag}: {part!r} is not a mapping")
        node = child
    node[parts[-1]] = value


def load_config(
    path: str | Path, overrides: Sequence[str] = (), flags: Mapping[str, tuple[str, Any]] | None = None
) -> PipelineConfig:
    """Read a pipeline YAML, apply ``--set`` overrides, then ``flags`` (key path -> (flag, value), the
    value taken as given: ``{"output.dir": ("--output", "out/x")}``), validate. An error in a value a
    flag wrote names the flag. Relative paths stay as written."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"{path}: cannot read pipeline file ({err.strerror})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the pipeline file must be a YAML mapping")
    written = {key: f"--set {key}" for key in (apply_override(data, assignment) for assignment in overrides)}
    for key, (flag, value) in (flags or {}).items():
        _assign(data, key, value, flag)
        written[key] = flag
    return config_from_dict(data, origin=str(path), flags=written)
