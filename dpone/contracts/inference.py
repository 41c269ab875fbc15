"""Type inference for the columns a contract does not declare (``type_inference``, SPEC §3).

A typed column keeps the logical type of its Arrow type. A text column takes the first
candidate that accepts *every* non-null sampled value, with the same acceptance rules the
enforcement mode applies later (so a sampled value never fails its own inferred type):

    integer, float, boolean, date, timestamp(tz), timestamp, time, otherwise string.

A column whose sample holds no value at all is ``string``.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from dpone.contracts.kernels import as_string
from dpone.contracts.spec import ColumnSpec
from dpone.contracts.text import parse_text
from dpone.contracts.types import is_text, spec_from_arrow

_CANDIDATES: tuple[tuple[str, bool | None], ...] = (
    ("integer", None),
    ("float", None),
    ("boolean", None),
    ("date", None),
    ("timestamp", True),
    ("timestamp", False),
    ("time", None),
)


def empty_to_null(text: pa.Array) -> pa.Array:
    """``""`` -> NULL (``empty_string_is_null``); other values untouched."""
    empty = pc.equal(pc.binary_length(text), 0)
    if not pc.any(empty).as_py():
        return text
    return pc.if_else(empty, pa.scalar(None, text.type), text)


def infer_type(
    name: str, sample: pa.Array, *, lenient: bool, empty_string_is_null: bool
) -> ColumnSpec:
    """The logical type of column ``name`` from its sampled values."""
    t = sample.type
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_null(t):
        return ColumnSpec(name, "string")
    if not is_text(t):
        return spec_from_arrow(name, t)
    text = as_string(sample)
    if empty_string_is_null:
        text = empty_to_null(text)
    if text.null_count == len(text):
        return ColumnSpec(name, "string")
    for kind, tz in _CANDIDATES:
        candidate = ColumnSpec(name, kind, timezone=tz)  # type: ignore[arg-type]
        if parse_text(text, candidate, lenient).failed is None:
            return candidate
    return ColumnSpec(name, "string")
