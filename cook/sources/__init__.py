"""Sources: input files -> ``RawRecord`` (or ``RejectRecord``), streamed, with stable source ids.

``SOURCES`` maps an input format to its reader; ``list_inputs`` expands the configured path or glob
into a sorted file list, so the unit order (and therefore the output) never depends on the file system.
"""

from __future__ import annotations

from cook.sources.files import detect_format, list_inputs
from cook.sources.jsonl import read_jsonl
from cook.sources.parquet import read_parquet
from cook.sources.wds import read_wds

SOURCES = {"jsonl": read_jsonl, "parquet": read_parquet, "wds": read_wds}

__all__ = ["SOURCES", "detect_format", "list_inputs"]
