"""What the manifest compiler needs to know about assertion types, without running any.

Step 5 fills this from the ``dpone.assertion`` entry-point group; the built-ins are listed
here so that ``dpone validate`` can check a manifest statically.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Scope = Literal["row", "batch"]
ValueKind = Literal["count", "columns", "any"]


@dataclass(frozen=True, slots=True)
class AssertionTypeInfo:
    name: str
    scope: Scope
    value: ValueKind
    origin: str = "dpone (built-in)"


BUILTIN_TYPES: dict[str, AssertionTypeInfo] = {
    "min_rows_per_load": AssertionTypeInfo("min_rows_per_load", "batch", "count"),
    "max_rows_per_load": AssertionTypeInfo("max_rows_per_load", "batch", "count"),
    "required_columns": AssertionTypeInfo("required_columns", "row", "columns"),
    "unique_columns": AssertionTypeInfo("unique_columns", "row", "columns"),
}
CUSTOM = AssertionTypeInfo("custom", "row", "any")
