"""``cook blend``: cooked datasets mixed by weight in one Energon metadataset, and what each part gets.

    [PartSpec(name, weight, dir), ...] -load_parts-> [BlendPart] (manifests; one shared contract)
        -blend_yaml-> the MetadatasetV2 YAML   -duplicates-> warnings   -blend_report-> BlendReport
    blend.yaml -read_blend-> [PartSpec]                   (``cook stats blend.yaml``)

Energon's ``blend`` draws every sample (one pack) from part ``i`` with probability ``w_i / sum(w)``,
each part repeated endlessly, before the packs are batched. With ``P_i`` packs and ``T_i`` target
(supervised) tokens in part ``i`` (its manifest's counts), in expectation:

    sample share        s_i = w_i / sum_j w_j
    target-token share  t_i = s_i * T_i / P_i  /  sum_j s_j * T_j / P_j
    steps per epoch of part i at global batch size B        = P_i / (B * s_i)
    epochs of part i in S steps at global batch size B      = S * B * s_i / P_i

Worked example: a (1,000 packs, 200,000 target tokens) weight 3 and b (500 packs, 300,000 target
tokens) weight 1: s = (0.75, 0.25); per drawn pack a gives 0.75 * 200 = 150 and b 0.25 * 600 = 150
target tokens, so t = (0.5, 0.5); at B = 100, one epoch of a takes 13.3 steps and of b 20 steps.

Every part must share one data contract (``cook.contract.check_blend``), ``seq_len`` included: a
micro-batch concatenates packs of one capacity and the trainer sizes its buffers, ``max_seqlen`` and
context-parallel split by it. The packing algorithm and shard sizes may differ.

Paths in the YAML are relative to its directory (where Energon resolves them) when the dataset lies
under it, else absolute. Each part carries the subflavor ``BLEND_PART_KEY: NAME``, which names it in
Energon's samples (``__subflavors__``) and lets ``read_blend`` recover the names.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import yaml

from cook import format as fmt
from cook.contract import ContractMismatch, check_blend
from cook.errors import ConfigError
from cook.manifest import Manifest, ManifestError, load_manifest

BLEND_PART_KEY: Final = "blend_part"


@dataclass(frozen=True)
class PartSpec:
    """One ``NAME=WEIGHT DIR`` of the command line, or one entry of a blend YAML."""

    name: str
    weight: float
    path: str


@dataclass(frozen=True)
class BlendPart:
    """A part and its dataset's manifest (``manifest_sha256``: of the file's bytes)."""

    spec: PartSpec
    manifest: Manifest
    manifest_sha256: str


@dataclass(frozen=True)
class PartShare:
    """What one part gets of the blend (the formulas of the module docstring)."""

    name: str
    path: str
    weight: float
    packs: int
    tokens: int
    target_tokens: int
    sample_share: float
    target_token_share: float
    steps_per_epoch: float | None  # with a global batch size
    epochs: float | None  # with a global batch size and a number of steps


@dataclass(frozen=True)
class BlendReport:
    """``to_dict`` (the ``--json`` object) keeps the field order."""

    seq_len: int
    global_batch_size: int | None
    steps: int | None
    target_tokens_per_pack: float  # expected, over the blend's draws
    packing_efficiency: float  # expected true tokens of a drawn pack / seq_len
    parts: tuple[PartShare, ...]

    def to_dict(self) -> dict[str, Any]:
        return {**vars(self), "parts": [vars(part) for part in self.parts]}


def check_weight(name: str, text: str) -> float:
    """``WEIGHT`` of ``NAME=WEIGHT``: a finite number > 0 (Energon refuses 0), else ``ConfigError``."""
    try:
        weight = float(text)
    except ValueError:
        weight = math.nan
    if not (math.isfinite(weight) and weight > 0):
        raise ConfigError(f"blend part {name}: weight {text!r} must be a number > 0")
    return weight


def load_parts(specs: Sequence[PartSpec]) -> tuple[BlendPart, ...]:
    """Each part's manifest; ``ConfigError`` (one line) for a repeated name, a manifest that cannot be
    read or has no contract, or contracts that differ (naming the fields)."""
    names = [spec.name for spec in specs]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ConfigError(f"blend: part name(s) {', '.join(repeated)} given more than once")
    parts = []
    for spec in specs:
        try:
            manifest = load_manifest(spec.path)
        except ManifestError as err:
            raise ConfigError(f"blend part {spec.name}: {err}") from None
        if manifest.counts.packs == 0:
            raise ConfigError(f"blend part {spec.name}: {spec.path} has no packs")
        if manifest.contract is None:
            raise ConfigError(
                f"blend part {spec.name}: {spec.path} has no contract (cooked by an older cook); re-cook it"
            )
        with open(os.path.join(spec.path, fmt.MANIFEST_NAME), "rb") as handle:
            digest = hashlib.sha256(handle.read()).hexdigest()
        parts.append(BlendPart(spec, manifest, digest))
    try:
        check_blend([(part.spec.name, part.manifest.contract) for part in parts if part.manifest.contract])
    except ContractMismatch as err:
        raise ConfigError(str(err)) from None
    return tuple(parts)


def duplicates(parts: Sequence[BlendPart]) -> list[str]:
    """One line per part that reaches a dataset an earlier part already reaches: the same directory
    (another spelling, a symlink), the same manifest, or the same shards (Energon #266)."""
    seen: dict[tuple[str, object], str] = {}
    lines = []
    for part in parts:
        keys = [
            ("directory", os.path.realpath(part.spec.path)),
            ("manifest sha256", part.manifest_sha256),
            ("shards", tuple(shard.sha256 for shard in part.manifest.shards)),
        ]
        for kind, key in keys:
            if (kind, key) in seen:
                lines.append(
                    f"parts {seen[(kind, key)]} and {part.spec.name} are one dataset (same {kind}): "
                    f"Energon draws it as two parts, with the sum of their weights"
                )
                break
        for kind, key in keys:
            seen.setdefault((kind, key), part.spec.name)
    return lines


def _yaml_path(dataset: str, yaml_dir: str) -> str:
    real, base = os.path.realpath(dataset), os.path.realpath(yaml_dir)
    relative = os.path.relpath(real, base)
    return real if relative.startswith(os.pardir) else relative


def blend_yaml(parts: Sequence[BlendPart], output: str) -> str:
    """The MetadatasetV2 text for ``output`` (its ``train`` split blends the parts by weight)."""
    yaml_dir = os.path.dirname(os.path.abspath(output))
    entries = [
        {
            "weight": part.spec.weight,
            "path": _yaml_path(part.spec.path, yaml_dir),
            "subflavors": {BLEND_PART_KEY: part.spec.name},
        }
        for part in parts
    ]
    document = {"__module__": "megatron.energon", "__class__": "MetadatasetV2", "splits": {"train": {"blend": entries}}}
    header = "# written by cook blend: " + " ".join(f"{p.spec.name}={p.spec.weight:g}" for p in parts) + "\n"
    return header + str(yaml.safe_dump(document, sort_keys=False))


def read_blend(path: str) -> list[PartSpec]:
    """The parts of a blend YAML (``splits.train.blend`` entries of ``weight`` and ``path``, paths
    resolved against its directory); ``ConfigError`` for any other YAML."""
    try:
        with open(path, encoding="utf-8") as handle:
            document = yaml.safe_load(handle)
        entries = document["splits"]["train"]["blend"]
        specs = []
        for entry in entries:
            target = os.path.join(os.path.dirname(os.path.abspath(path)), str(entry["path"]))
            name = (entry.get("subflavors") or {}).get(BLEND_PART_KEY) or os.path.basename(target)
            specs.append(PartSpec(str(name), check_weight(str(name), str(entry.get("weight", 1.0))), target))
    except (OSError, ValueError, yaml.YAMLError, KeyError, TypeError, AttributeError) as err:
        reason = err.strerror if isinstance(err, OSError) else f"not a blend of weight/path entries ({err!r})"
        raise ConfigError(f"{path}: {reason}") from None
    return specs


def blend_report(
    parts: Sequence[BlendPart], global_batch_size: int | None = None, steps: int | None = None
) -> BlendReport:
    """Each part's packs, tokens and expected shares; with ``global_batch_size`` its steps per epoch,
    with ``steps`` too the epochs a run of that length sees."""
    total_weight = sum(part.spec.weight for part in parts)
    shares = [part.spec.weight / total_weight for part in parts]
    per_pack = [
        share * part.manifest.counts.target_tokens / max(part.manifest.counts.packs, 1)
        for share, part in zip(shares, parts, strict=True)
    ]
    expected_targets = sum(per_pack)
    seq_len = parts[0].manifest.seq_len
    rows = []
    for share, targets, part in zip(shares, per_pack, parts, strict=True):
        counts = part.manifest.counts
        per_step = global_batch_size * share if global_batch_size else None
        rows.append(
            PartShare(
                name=part.spec.name,
                path=part.spec.path,
                weight=part.spec.weight,
                packs=counts.packs,
                tokens=counts.tokens,
                target_tokens=counts.target_tokens,
                sample_share=share,
                target_token_share=targets / expected_targets if expected_targets else 0.0,
                steps_per_epoch=counts.packs / per_step if per_step else None,
                epochs=steps * per_step / counts.packs if per_step and steps is not None and counts.packs else None,
            )
        )
    efficiency = sum(
        share * part.manifest.counts.tokens / max(part.manifest.counts.packs, 1)
        for share, part in zip(shares, parts, strict=True)
    )
    return BlendReport(
        seq_len=seq_len,
        parts=tuple(rows),
        target_tokens_per_pack=expected_targets,
        packing_efficiency=efficiency / seq_len,
        global_batch_size=global_batch_size,
        steps=steps,
    )
