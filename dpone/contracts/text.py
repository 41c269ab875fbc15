"""Text -> logical type, vectorized (the CSV path: every column arrives as Arrow ``string``).

Each parser works in two passes (see :func:`kernels.parse_with`):

1. the *canonical* pass validates the whole column against the strict grammar of the type with
   one or two vectorized kernels, then casts only the slots that passed (a cast that cannot
   raise and cannot lose data: the grammar has already bounded digits, ranges and calendars);
2. the *repair* pass sees only the slots the first pass rejected (rare in real data) and accepts
   the lossless variants that ``coerce``/``quarantine``/``warn`` allow (trimmed whitespace, a
   leading ``+``, ``yes``/``no``, ``1e2``...). ``strict`` has no repair pass, except for forms
   that are canonical but too rare to slow the first pass down (9-digit zero fractions).

Why not ``pyarrow.compute.strptime(error_is_null=True)``: it rolls impossible dates over
(``2024-02-30`` becomes ``2024-03-01``). Why not a plain ``cast``: it raises for the whole array
on the first bad value, and accepts forms the contract does not (hex integers, ``nan``, ``inf``).
Here the grammar (calendar-aware, leap years included) decides, and the cast only converts.

The numeric parsers are in :mod:`dpone.contracts.text_numbers`, the calendar ones in
:mod:`dpone.contracts.text_temporal`; this module holds the rest and the dispatch. The accepted
forms of every type are listed in ``docs/contracts.md``.
"""

from __future__ import annotations

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from dpone.contracts.kernels import (
    Conversion,
    all_failed,
    clean,
    failed_of,
    null_where,
    parse_with,
    trim,
)
from dpone.contracts.spec import ColumnSpec
from dpone.contracts.text_numbers import parse_decimal, parse_float, parse_integer
from dpone.contracts.text_temporal import parse_date, parse_time, parse_timestamp
from dpone.contracts.types import arrow_type, canonical, decimal_params

_ONE = pa.scalar(1, pa.int32())
_BOOL_CANONICAL = pa.array(["false", "true"])
# PostgreSQL's boolean input words; even index = false, odd index = true.
_BOOL_WORDS = pa.array(["false", "true", "f", "t", "no", "yes", "n", "y", "0", "1", "off", "on"])


# --- boolean -------------------------------------------------------------------------------------


def _boolean_canonical(arr: pa.Array) -> tuple[pa.Array, pa.BooleanArray]:
    # SPEC §3: `true`/`false` in any letter case (R's and Excel's TRUE/FALSE, Python's True).
    index = pc.index_in(pc.ascii_lower(arr), value_set=_BOOL_CANONICAL)
    return pc.equal(index, 1), clean(pc.is_valid(index))


def _boolean_lenient(arr: pa.Array) -> Conversion:
    index = pc.index_in(pc.ascii_lower(trim(arr)), value_set=_BOOL_WORDS)
    values = pc.equal(pc.bit_wise_and(index, _ONE), _ONE)
    failed = failed_of(arr, pc.is_valid(index))
    return Conversion(values, failed if failed.true_count else None)


def parse_boolean(arr: pa.Array, lenient: bool) -> Conversion:
    if lenient:
        # Cheap enough to run on the whole column: no second pass needed.
        return _boolean_lenient(arr)
    return parse_with(arr, _boolean_canonical, None)


# --- string, json, binary ------------------------------------------------------------------------


def _is_json(text: str) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


def parse_json(arr: pa.Array) -> Conversion:
    # The one per-value loop of a built-in type: no Arrow kernel validates JSON. orjson parses
    # in C; the loop only dispatches. NaN/Infinity and trailing garbage are not JSON.
    ok = pa.array([v is not None and _is_json(v) for v in arr.to_pylist()], pa.bool_())
    failed = failed_of(arr, ok)
    values = null_where(arr, failed)
    return Conversion(values, failed if failed.true_count else None)


def parse_text(arr: pa.Array, col: ColumnSpec, lenient: bool, fast_path: bool = True) -> Conversion:
    """Parse a ``string`` array into ``col``'s logical type.

    ``fast_path`` tries one whole-column cast first (clean chunks). A cast that fails costs
    as much as one that succeeds, so callers turn it off for a column whose last chunk had
    bad values; the result is the same either way.
    """
    col = canonical(col)
    kind = col.type
    if kind == "string":
        return Conversion(arr)
    if kind == "integer":
        return parse_integer(arr, lenient, fast_path)
    if kind == "float":
        return parse_float(arr, lenient, fast_path)
    if kind == "decimal":
        precision, scale = decimal_params(col)
        return parse_decimal(arr, precision, scale, lenient, fast_path)
    if kind == "boolean":
        return parse_boolean(arr, lenient)
    if kind == "date":
        return parse_date(arr, lenient, fast_path)
    if kind == "time":
        return parse_time(arr, lenient)
    if kind == "timestamp":
        return parse_timestamp(arr, bool(col.timezone), lenient, fast_path)
    if kind == "json":
        return parse_json(arr)
    if kind == "binary":
        return Conversion(arr.cast(pa.binary()))
    return all_failed(arr, arrow_type(col))
