"""cook.validate: every invariant of SPEC §9, one module per kind (shards, members, boundaries, masks,
tokens, media, manifest, rejects, nv_meta; deep.py with --deep). Imports only L0 (format, types,
errors), numpy and the standard library, so a writer bug cannot hide in shared code."""

from cook.validate.dataset import NotADataset, Report, ValidateOptions, check_is_dataset, validate_dataset
from cook.validate.problems import Code, Problem, TokenInfo

__all__ = [
    "Code",
    "NotADataset",
    "Problem",
    "Report",
    "TokenInfo",
    "ValidateOptions",
    "check_is_dataset",
    "validate_dataset",
]
