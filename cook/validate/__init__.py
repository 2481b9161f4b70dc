"""cook.validate: every invariant of SPEC §9, one module per kind (scan: tar and .tar.idx; members,
boundaries, masks, tokens, media, placeholders, manifest, rejects, nv_meta; deep.py with --deep), checked
over batches of packs (batch.py). Imports only L0 (format, types, errors, packfiles), numpy and the
standard library, so a writer bug cannot hide in shared code."""

from cook.validate.dataset import NotADataset, Report, ValidateOptions, check_is_dataset, validate_dataset

__all__ = ["NotADataset", "Report", "ValidateOptions", "check_is_dataset", "validate_dataset"]
