"""Any Arrow array -> a column's logical type: the single entry point of the enforcer.

Text goes to :mod:`dpone.contracts.text`. Typed input (Parquet, JSONL, databases) is already
decoded, so the rules are about the *type*:

* the same logical family always converts, when the value fits: a wider integer, float32,
  another decimal precision/scale, another timestamp unit or zone (checked per value: an
  ``ns`` instant with sub-microsecond digits, a decimal with more significant fraction digits
  than the scale, a uint64 above 2**63-1 do not fit);
* a different family converts only under ``coerce``/``quarantine``/``warn``, and only when it
  is lossless for the value: an integral float into integer, 0/1 into boolean, a midnight naive
  timestamp into date, numbers and dates into their canonical text...;
* never: a naive timestamp into ``timezone: true`` or an aware one into ``timezone: false``,
  NaN/±inf into float, booleans into numbers.

Arrow casts are only called on values already known to fit: their error messages quote values,
and none may reach a user.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from dpone.contracts.kernels import (
    Conversion,
    all_failed,
    as_string,
    clean,
    failed_of,
    null_where,
)
from dpone.contracts.spec import ColumnSpec
from dpone.contracts.text import parse_json, parse_text
from dpone.contracts.text_numbers import parse_float
from dpone.contracts.types import (
    TIME_UNIT,
    UTC,
    arrow_type,
    canonical,
    decimal_params,
    is_nested,
    is_text,
)

_TWO_53 = 2**53
_INT64_MAX = 2**63 - 1
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_TS_MIN_US = -62_135_596_800_000_000
_TS_MAX_US = 253_402_300_799_999_999

Handler = Callable[[pa.Array, ColumnSpec, bool], Conversion]


def convert(arr: pa.Array, col: ColumnSpec, *, lenient: bool, fast_path: bool = True) -> Conversion:
    """Convert ``arr`` to ``col``'s Arrow type; ``lenient`` is every mode except ``strict``.

    ``fast_path``: try a whole-column cast first for text (see :func:`parse_text`).
    """
    col = canonical(col)
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if pa.types.is_null(t):
        return Conversion(pa.nulls(len(arr), arrow_type(col)))
    if is_text(t):
        return parse_text(as_string(arr), col, lenient, fast_path)
    return _TYPED[col.type](arr, col, lenient)


def _fits(arr: pa.Array, fits: pa.Array, dtype: pa.DataType, *, safe: bool = True) -> Conversion:
    """Cast the slots where ``fits``; the others present slots fail."""
    ok = clean(fits)
    failed = failed_of(arr, ok)
    values = null_where(arr, failed) if failed.true_count else arr
    return Conversion(values.cast(dtype, safe=safe), failed if failed.true_count else None)


def _via_text(arr: pa.Array, col: ColumnSpec) -> Conversion:
    """Canonical text of a typed value, parsed as text (lenient): exact by construction."""
    return parse_text(arr.cast(pa.string()), col, True)


# --- per target ----------------------------------------------------------------------------------


def _to_integer(arr: pa.Array, col: ColumnSpec, lenient: bool) -> Conversion:
    t = arr.type
    if pa.types.is_integer(t):
        if pa.types.is_uint64(t):
            return _fits(arr, pc.less_equal(arr, pa.scalar(_INT64_MAX, pa.uint64())), pa.int64())
        return Conversion(arr.cast(pa.int64()))
    if not lenient:
        return all_failed(arr, pa.int64())
    if pa.types.is_floating(t):
        x = arr.cast(pa.float64())
        integral = pc.and_(pc.is_finite(x), pc.equal(pc.trunc(x), x))
        # 2**63 is exactly representable as a double and is already out of range.
        inside = pc.and_(pc.greater_equal(x, -(2.0**63)), pc.less(x, 2.0**63))
        return _fits(x, pc.and_(integral, inside), pa.int64())
    if pa.types.is_decimal(t):
        return _via_text(arr, col)
    return all_failed(arr, pa.int64())


def _to_float(arr: pa.Array, col: ColumnSpec, lenient: bool) -> Conversion:
    t = arr.type
    if pa.types.is_floating(t):
        x = arr.cast(pa.float64())
        return _fits(x, pc.is_finite(x), pa.float64())
    if not lenient:
        return all_failed(arr, pa.float64())
    if pa.types.is_integer(t):
        # Compare as integers: every integer of magnitude <= 2**53 is exactly a double.
        wide = arr.cast(pa.uint64() if pa.types.is_uint64(t) else pa.int64())
        small = pc.less_equal(wide, pa.scalar(_TWO_53, wide.type))
        if not pa.types.is_unsigned_integer(t):
            small = pc.and_(small, pc.greater_equal(wide, pa.scalar(-_TWO_53, wide.type)))
        fits = clean(small)
        big = pc.and_not(pc.is_valid(arr), fits)
        if big.true_count:
            # Beyond 2**53 only some integers are doubles: check those (rare) exactly in Python.
            positions = pc.indices_nonzero(big)
            exact = pa.array([float(v) == v for v in arr.take(positions).to_pylist()], pa.bool_())
            fits = pc.or_(fits, pc.replace_with_mask(big, big, exact))
        return _fits(arr, fits, pa.float64(), safe=False)
    if pa.types.is_decimal(t):
        return parse_float(arr.cast(pa.string()), True)
    return all_failed(arr, pa.float64())


def _to_decimal(arr: pa.Array, col: ColumnSpec, lenient: bool) -> Conversion:
    precision, scale = decimal_params(col)
    dtype = pa.decimal128(precision, scale)
    t = arr.type
    if pa.types.is_decimal(t):
        if t.scale <= scale and t.precision - t.scale <= precision - scale:
            return Conversion(arr.cast(dtype))
        return _via_text(arr, col)
    if not lenient:
        return all_failed(arr, dtype)
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return _via_text(arr, col)
    return all_failed(arr, dtype)


def _to_boolean(arr: pa.Array, col: ColumnSpec, lenient: bool) -> Conversion:
    t = arr.type
    if pa.types.is_boolean(t):
        return Conversion(arr)
    if lenient and pa.types.is_integer(t):
        zero_or_one = pc.or_(pc.equal(arr, 0), pc.equal(arr, 1))
        conv = _fits(arr, zero_or_one, t)
        return Conversion(pc.equal(conv.values, 1), conv.failed)
    return all_failed(arr, pa.bool_())


def _raw(arr: pa.Array) -> pa.Array:
    """The stored integers of a temporal array, in its own unit."""
    return arr.cast(pa.int64())


def _to_date(arr: pa.Array, col: ColumnSpec, lenient: bool) -> Conversion:
    t = arr.type
    if pa.types.is_date32(t):
        return Conversion(arr)
    if pa.types.is_date64(t):
        return _fits(arr, pc.equal(pc.remainder(_raw(arr), 86_400_000), 0), pa.date32())
    if lenient and pa.types.is_timestamp(t) and t.tz is None:
        per_day = 86_400 * _PER_SECOND[t.unit]
        midnight = pc.equal(pc.remainder(_raw(arr), per_day), 0)
        years = pc.year(arr)
        inside = pc.and_(pc.greater_equal(years, 1), pc.less_equal(years, 9999))
        return _fits(arr, pc.and_(midnight, inside), pa.date32(), safe=False)
    return all_failed(arr, pa.date32())


def _to_time(arr: pa.Array, col: ColumnSpec, lenient: bool) -> Conversion:
    t = arr.type
    dtype = pa.time64(TIME_UNIT)
    if pa.types.is_time(t):
        if t.unit == "ns":
            return _fits(arr, pc.equal(pc.remainder(_raw(arr), 1000), 0), dtype)
        return Conversion(arr.cast(dtype))
    return all_failed(arr, dtype)


def _to_timestamp(arr: pa.Array, col: ColumnSpec, lenient: bool) -> Conversion:
    tz = bool(col.timezone)
    dtype = pa.timestamp(TIME_UNIT, tz=UTC if tz else None)
    t = arr.type
    if pa.types.is_timestamp(t):
        if (t.tz is not None) != tz:
            # A naive value into an instant column (or the reverse) needs a zone nobody gave.
            return all_failed(arr, dtype)
        raw = _raw(arr)
        if t.unit == "ns":
            # Every ns timestamp is inside 0001..9999; sub-microsecond digits would be lost.
            fits = pc.equal(pc.remainder(raw, 1000), 0)
        else:
            per_us = 1_000_000 // _PER_SECOND[t.unit]
            low = -(-_TS_MIN_US // per_us)
            fits = pc.and_(pc.greater_equal(raw, low), pc.less_equal(raw, _TS_MAX_US // per_us))
        return _fits(arr, fits, dtype)
    if lenient and not tz and pa.types.is_date(t):
        return Conversion(arr.cast(pa.date32()).cast(dtype))
    return all_failed(arr, dtype)


def utf8(arr: pa.Array) -> Conversion:
    """Binary -> string where the bytes are valid UTF-8 (per value only if some are not)."""
    binary = arr.cast(pa.large_binary()) if not pa.types.is_binary(arr.type) else arr
    try:
        return Conversion(binary.cast(pa.string()))
    except (pa.ArrowInvalid, pa.ArrowException):
        pass
    ok = pa.array([v is not None and _decodes(v) for v in binary.to_pylist()], pa.bool_())
    return _fits(binary, ok, pa.string())


def _decodes(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _is_binary(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_fixed_size_binary(t)
        or pa.types.is_binary_view(t)
    )


def _to_string(arr: pa.Array, col: ColumnSpec, lenient: bool) -> Conversion:
    t = arr.type
    if _is_binary(t):
        return utf8(arr)
    if not lenient:
        return all_failed(arr, pa.string())
    if is_nested(t):
        return Conversion(_json_dump(arr))
    try:
        return Conversion(arr.cast(pa.string()))
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        return all_failed(arr, pa.string())


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError


def _json_dump(arr: pa.Array) -> pa.Array:
    # Nested values have no Arrow -> JSON kernel; serialize per value (documented exception).
    return pa.array(
        [
            None if v is None else orjson.dumps(v, default=_json_default).decode()
            for v in arr.to_pylist()
        ],
        pa.string(),
    )


def _to_json(arr: pa.Array, col: ColumnSpec, lenient: bool) -> Conversion:
    t = arr.type
    if is_nested(t):
        return Conversion(_json_dump(arr))
    if _is_binary(t):
        text = utf8(arr)
        parsed = parse_json(text.values)
        if text.failed is None:
            return parsed
        failed = text.failed if parsed.failed is None else pc.or_(text.failed, parsed.failed)
        return Conversion(parsed.values, failed)
    if not lenient:
        return all_failed(arr, pa.string())
    if pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_decimal(t):
        return Conversion(arr.cast(pa.string()))
    if pa.types.is_floating(t):
        conv = _to_float(arr, col, lenient)
        return Conversion(conv.values.cast(pa.string()), conv.failed)
    return all_failed(arr, pa.string())


def _to_binary(arr: pa.Array, col: ColumnSpec, lenient: bool) -> Conversion:
    if _is_binary(arr.type):
        return Conversion(arr.cast(pa.binary()))
    return all_failed(arr, pa.binary())


_TYPED: dict[str, Handler] = {
    "integer": _to_integer,
    "float": _to_float,
    "decimal": _to_decimal,
    "boolean": _to_boolean,
    "date": _to_date,
    "time": _to_time,
    "timestamp": _to_timestamp,
    "string": _to_string,
    "json": _to_json,
    "binary": _to_binary,
}


def as_text(arr: pa.Array) -> pa.Array:
    """The text of each value (for variant columns): strings as they came, others canonical."""
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if is_text(t):
        return as_string(arr)
    if pa.types.is_null(t):
        return pa.nulls(len(arr), pa.string())
    if is_nested(t):
        return _json_dump(arr)
    if _is_binary(t):
        conv = utf8(arr)
        if conv.failed is None:
            return conv.values
        hexed = pa.array(
            [None if v is None else "\\x" + v.hex() for v in arr.cast(pa.binary()).to_pylist()],
            pa.string(),
        )
        return pc.if_else(conv.failed, hexed, conv.values)
    try:
        return arr.cast(pa.string())
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        return pa.array([None if v is None else str(v) for v in arr.to_pylist()], pa.string())
