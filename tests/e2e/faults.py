"""Fault injection for the crash-handling tests, kept out of the product: a Ray actor that dies the
way a segfault in a decoder would, on any record whose JSON holds ``MARKER``.

A test swaps it in for ``cook.runner.ray_executor.RayWorker`` (``monkeypatch.setattr``); the actors import this
module by name (Ray gives them the driver's ``sys.path``), so nothing reaches them through the environment.
"""

from __future__ import annotations

import json
import os

from cook.runner.ray_executor import RayWorker
from cook.runner.worker import Cooked
from cook.types import RawRecord

MARKER = "KILL-THE-WORKER"
EXIT_CODE = 13


class KillingWorker(RayWorker):
    """A ``RayWorker`` whose process exits, without cleanup, before cooking a record that holds ``MARKER``."""

    def _cook_and_media(self, raw: RawRecord) -> Cooked:
        if MARKER in json.dumps(raw.fields):
            os._exit(EXIT_CODE)
        return super()._cook_and_media(raw)
