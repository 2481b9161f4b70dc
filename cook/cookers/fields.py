"""Typed access to raw-record fields: every wrong type becomes a ``Rejected`` with the field's name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cook.errors import Rejected, RejectReason


def require(fields: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str = "") -> Any:
    """``fields[key]`` if present and of ``kind`` (bool is never an int here)."""
    value = fields.get(key)
    if value is None:
        raise Rejected(RejectReason.MISSING_FIELD, f"{where}{key!r} is missing")
    if type(value) is kind:  # the common case, checked without building the field's name
        return value
    return check_type(value, kind, f"{where}{key}")


def optional(fields: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str = "") -> Any:
    value = fields.get(key)
    if value is None or type(value) is kind:
        return value
    return check_type(value, kind, f"{where}{key}")


def check_type(value: Any, kind: type | tuple[type, ...], name: str) -> Any:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        raise Rejected(RejectReason.BAD_TYPE, f"{name} is a bool")
    if not isinstance(value, kinds):
        expected = " or ".join(k.__name__ for k in kinds)
        raise Rejected(RejectReason.BAD_TYPE, f"{name} is a {type(value).__name__}, expected {expected}")
    return value


def media_list(fields: Mapping[str, Any], singular: str, plural: str) -> list[str]:
    """LLaVA-style media fields: ``image: "a.jpg"`` or ``images: ["a.jpg", ...]`` (never both)."""
    if fields.get(singular) is not None and fields.get(plural) is not None:
        raise Rejected(RejectReason.BAD_TYPE, f"both {singular!r} and {plural!r} are set")
    value = fields.get(plural, fields.get(singular))
    if value is None:
        return []
    items = [value] if isinstance(value, str) else check_type(value, list, plural)
    for i, item in enumerate(items):
        check_type(item, str, f"{plural}[{i}]")
    return list(items)
