"""``cook validate --reference N``: N sampled sequences re-rendered from their source records with Hugging
Face's ``apply_chat_template`` and compared (ids, target masks) with the packs. An independent reference:
it imports only L0 (``cook.format``), so a bug in cook's sources, cookers or tokenizer cannot hide in it.

``records.py`` source -> raw record -> messages; ``render.py`` messages -> reference ids and mask;
``sample.py`` the seeded draw of packed sequences; ``check.py`` the comparison and its report.
"""

from cook.validate.reference.check import ReferenceReport, check_reference
from cook.validate.reference.sample import DatasetUnreadable

__all__ = ["DatasetUnreadable", "ReferenceReport", "check_reference"]
