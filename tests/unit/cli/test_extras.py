"""matplotlib (``cook[plot]``) and megatron-core (``cook[train]``) are extras: the CLI's core path,
``cook run`` and ``cook validate`` included, never imports them."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

PROBE = """
import sys
import cook.cli.main
cook.cli.main.build_parser()
import cook.runner.pipeline, cook.runner.local, cook.runner.ray_executor, cook.runner.worker, cook.media, cook.tokenize
import cook.validate, cook.validate.deep, cook.writer.energon_index, megatron.energon
print(sorted({name.split(".")[0] + "." + name.split(".")[1] if name.startswith("megatron.") else name.split(".")[0]
              for name in sys.modules if name.startswith(("matplotlib", "megatron."))}))
"""


def test_core_path_imports_neither_matplotlib_nor_megatron_core() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['megatron.energon']"
