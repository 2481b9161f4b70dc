"""The reader's side of the data contract (``cook.contract``): every cooked dataset behind a path.

    path (a cooked dataset directory, or an Energon metadataset YAML blending several)
      -dataset_contracts-> [(dataset dir, Contract | None)] -check_datasets(expect)-> ok | ContractMismatch

A metadataset's datasets are found by walking its YAML for ``path`` entries (resolved against the
YAML's directory, nested metadatasets followed). Datasets without a ``cook_manifest.json`` (someone
else's data in the blend, read by its own cooker) carry no contract and are not checked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from cook import format as fmt
from cook.contract import Contract, ContractMismatch, Expectation, check_blend, check_contract, storage_problems
from cook.manifest import Manifest, load_manifest


def _yaml_paths(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [str(node["path"])] if isinstance(node.get("path"), str) else []
        return found + [p for key, value in node.items() if key != "path" for p in _yaml_paths(value)]
    if isinstance(node, list):
        return [p for item in node for p in _yaml_paths(item)]
    return []


def dataset_dirs(path: str | Path) -> list[Path]:
    """The dataset directories behind ``path``: itself, or every dataset a metadataset YAML blends."""
    path = Path(path)
    if path.is_dir():
        return [path]
    with open(path, encoding="utf-8") as handle:
        document = yaml.safe_load(handle)
    out: list[Path] = []
    for entry in _yaml_paths(document):
        target = (path.parent / entry).resolve() if not Path(entry).is_absolute() else Path(entry)
        out += dataset_dirs(target) if target.is_file() else [target]
    return out


def read_manifest(dataset: Path) -> Manifest | None:
    """``dataset``'s manifest, None without one; ``ManifestError`` for one that cannot be read."""
    if not (dataset / fmt.MANIFEST_NAME).is_file():
        return None
    return load_manifest(str(dataset))


def dataset_contracts(path: str | Path) -> list[tuple[str, Contract | None]]:
    """``(dataset dir, its contract)`` for every cooked dataset behind ``path`` (None: no contract)."""
    out: list[tuple[str, Contract | None]] = []
    for dataset in dataset_dirs(path):
        manifest = read_manifest(dataset)
        if manifest is not None:
            out.append((str(dataset), manifest.contract))
    return out


def check_datasets(path: str | Path, expect: Expectation | None) -> None:
    """Refuse a dataset whose stored frames this reader cannot decode as declared, a blend whose cooked
    datasets differ, and (given ``expect``) any that differs from the trainer."""
    contracts = dataset_contracts(path)
    present = [(name, c) for name, c in contracts if c is not None]
    for name, cooked in present:
        problems = [problem for storage in cooked.storages for problem in storage_problems(storage)]
        if problems:
            raise ContractMismatch(f"dataset {name} stores frames this reader cannot decode", problems)
    check_blend(present)
    if expect is None:
        return
    for name, contract in contracts:
        if contract is None:
            reason = "its manifest has no contract (cooked by an older cook); re-cook it"
            raise ContractMismatch(f"dataset {name}", [reason])
        check_contract(contract, expect, name)
