"""Sources: input files -> ``RawRecord``, streamed, with stable source ids.

A record a source cannot read comes in its place as a failed ``RawRecord`` whose ``read()`` raises
the reject (``RawRecord.failed``): every reject reaches the runner as a raised ``Rejected``.

``SOURCES`` maps an input format to its reader; ``list_inputs`` expands the configured path or glob
into a sorted file list, so the unit order (and therefore the output) never depends on the file system.
Every reader is called as ``SOURCES[fmt](path, max_record_bytes, span, first_index, name=..., cursor=...)``:
``path`` is opened, ``name`` (``source_name(path, input.path)``) starts every source id, so the ids
do not depend on how ``input.path`` was spelled; a ``Cursor`` given as ``cursor`` follows how far the
reader is (for progress only).
"""

from __future__ import annotations

from cook.sources.cursor import Cursor
from cook.sources.files import detect_format, list_inputs, source_name
from cook.sources.json_array import read_json
from cook.sources.jsonl import read_jsonl
from cook.sources.parquet import read_parquet
from cook.sources.wds import read_wds

SOURCES = {"jsonl": read_jsonl, "json": read_json, "parquet": read_parquet, "wds": read_wds}

__all__ = ["SOURCES", "Cursor", "detect_format", "list_inputs", "source_name"]
