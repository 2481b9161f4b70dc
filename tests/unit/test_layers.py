"""The import direction of STYLE.md: L0 types/errors/format <- L1 config <- L2 stages <- L3 runner,
validate <- L4 cli; the training side (reader, train) is imported by nothing in L0-L4, and L2 stages
never import each other."""

import ast
from pathlib import Path

from tests.conftest import REPO

PACKAGE = REPO / "cook"
# contract, packfiles: stdlib + numpy + format; dataset_stats: the cook stats figures; frames: + Pillow
L0 = {"types", "errors", "format", "manifest", "contract", "packfiles", "dataset_stats", "frames"}
L2 = {"sources", "cookers", "media", "tokenize", "packing", "writer"}
TRAINING = {"reader", "train"}
ALLOWED: dict[str, set[str]] = {
    **{name: L0 for name in L0},
    "config": L0,
    **{name: L0 | {"config"} for name in L2},
    "runner": L0 | {"config"} | L2,
    "validate": L0,
    "view": L0,  # HTML pages of a pack or the stats: reads packs through packfiles, like validate
    "cli": L0 | {"config", "runner", "validate", "view", "blend"} | L2,
    "blend": L0,  # cook blend: manifests and contracts of cooked datasets -> a metadataset YAML
    "reader": L0,
    "train": L0 | {"reader"},
}


def _layer(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0].removesuffix(".py")


def _cook_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("cook."):
            found.add(node.module.split(".")[1])
        elif isinstance(node, ast.ImportFrom) and node.module == "cook":
            found.update(alias.name for alias in node.names if alias.name != "__version__")
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("cook."))
    return found


def test_imports_run_one_way() -> None:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__init__.py" and path.parent == PACKAGE:
            continue
        layer = _layer(path)
        allowed = ALLOWED.get(layer, set()) | {layer}
        bad = _cook_imports(path) - allowed
        if bad:
            problems.append(f"{path.relative_to(REPO)} ({layer}) imports {sorted(bad)}")
    assert not problems, "\n".join(problems)


def test_per_record_path_does_not_import_torch() -> None:
    for layer in L2 - {"media"}:
        for path in (PACKAGE / layer).rglob("*.py"):
            assert "import torch" not in path.read_text(), path
