"""``cook_manifest.json``: written last, atomically; its presence marks a finished run (SPEC §8)."""

from __future__ import annotations

import json
import os

from cook import format as fmt
from cook.manifest import Manifest
from cook.writer.atomic import atomic_write


def write_manifest(out_dir: str, manifest: Manifest) -> None:
    text = json.dumps(manifest.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    atomic_write(os.path.join(out_dir, fmt.MANIFEST_NAME), text)
