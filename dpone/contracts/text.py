"""Text -> logical type, vectorized (the CSV path: every column arrives as Arrow ``string``).

Size (over 500 lines): one short two-pass parser per logical type, sharing the kernel helpers.

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

The accepted forms of every type are listed in ``docs/contracts.md``.
"""

from __future__ import annotations

from decimal import Decimal
from functools import cache

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from dpone.contracts.kernels import (
    Conversion,
    all_failed,
    clean,
    failed_of,
    falses,
    keep_where,
    null_where,
    parse_with,
)
from dpone.contracts.spec import ColumnSpec
from dpone.contracts.types import TIME_UNIT, UTC, arrow_type, canonical, decimal_params

# --- grammar pieces (RE2 syntax; every piece is anchored by its user) --------------------------

# Year 0000 passes the grammar and is refused after the cast by a range check: excluding it
# in the regex triples RE2's DFA, which Arrow rebuilds on every call (+40 ns a value).
_YEAR = r"[0-9]{4}"
_MONTH_DAY = (
    r"(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])"  # every month has 1..28
    r"|(?:0[13-9]|1[0-2])-(?:29|30)"  # all but February have 29 and 30
    r"|(?:0[13578]|1[02])-31)"  # the long months have 31
)
# Gregorian leap years: divisible by 4, centuries only when divisible by 400.
_LEAP_YEAR = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
DATE = rf"(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"
_HH = r"(?:[01][0-9]|2[0-3])"  # 24:00 is not a time of day here (see docs)
_MM = r"[0-5][0-9]"
_SS = r"[0-5][0-9]"  # no leap second: Arrow and the sinks cannot store :60
_FRACTION = r"(?:\.[0-9]{1,6})"  # microseconds; 7..9 digits are handled by the repair pass
TIME = rf"{_HH}:{_MM}:{_SS}{_FRACTION}?"
_OFFSET = rf"(?:Z|[+-]{_HH}:{_MM})"  # RFC 3339; -00:00 means UTC with an unknown local offset
_OFFSET_LENIENT = rf"(?:Z|[+-]{_HH}(?::?{_MM})?)"  # +05, +0530, +05:30
_TIME_LENIENT = rf"{_HH}:{_MM}(?::{_SS}{_FRACTION}?)?"

_DATE_STRICT = rf"^{DATE}$"
_DATE_LENIENT = rf"^{DATE}(?:[T ]00:00(?::00(?:\.0{{1,9}})?)?)?$"
_TIME_STRICT = rf"^{TIME}$"
_TIME_LENIENT_RE = rf"^{_TIME_LENIENT}$"
# SPEC §3: a `T` or a space between date and time is canonical (R, Excel and SQL write the
# space); the rest of RFC 3339 stays strict.
_TS_TZ_STRICT = rf"^{DATE}[T ]{TIME}{_OFFSET}$"
_TS_TZ_LENIENT = rf"^{DATE}[T ]{_TIME_LENIENT}{_OFFSET_LENIENT}$"
_TS_NAIVE_STRICT = rf"^{DATE}[T ]{TIME}$"
_TS_NAIVE_LENIENT = rf"^{DATE}(?:[T ]{_TIME_LENIENT})?$"
# 7..9 fraction digits fit microseconds only when the extra digits are zeros.
_LONG_ZERO_FRACTION = r"(\.[0-9]{6})0{1,3}([^0-9]|$)"

_FLOAT_STRICT = r"^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$"
_FLOAT_LENIENT = r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$"
_NUMBER_PARTS = r"^(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?$"
_NUMBER_EXPONENT = r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][+-]?[0-9]+$"
_NONZERO_MANTISSA = r"^[^eE]*[1-9]"

_ONE = pa.scalar(1, pa.int32())
_NINETEEN = pa.scalar(19, pa.int32())
_INT64_MAX_TEXT = "9223372036854775807"
_INT64_MIN_ABS_TEXT = "9223372036854775808"
_TS_MIN_US = -62_135_596_800_000_000  # 0001-01-01T00:00:00Z
_DATE_MIN_DAYS = -719_162  # 0001-01-01
_TS_MAX_US = 253_402_300_799_999_999  # 9999-12-31T23:59:59.999999Z

_BOOL_CANONICAL = pa.array(["false", "true"])
# PostgreSQL's boolean input words; even index = false, odd index = true.
_BOOL_WORDS = pa.array(["false", "true", "f", "t", "no", "yes", "n", "y", "0", "1", "off", "on"])


def _whole_cast(arr: pa.Array, dtype: pa.DataType) -> pa.Array | None:
    """The clean-chunk fast path: one cast of the whole column, or None if any value fails.

    Only used where Arrow's parser accepts a subset of the mode's grammar (checked by the
    callers for the few forms where it does not) and enforces the same calendar and bounds,
    so a cast that succeeds cannot have lost or invented anything. Its error (which quotes a
    value) is dropped; the exact path then finds the failing values.
    """
    try:
        return pc.cast(arr, dtype)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _regex(arr: pa.Array, pattern: str) -> pa.BooleanArray:
    return clean(pc.match_substring_regex(arr, pattern))


def _trim(arr: pa.Array) -> pa.Array:
    return pc.ascii_trim_whitespace(arr)


# --- integer -----------------------------------------------------------------------------------


def _integer_canonical(arr: pa.Array) -> tuple[pa.Array, pa.BooleanArray]:
    # Cheaper than a regex: strip the sign, check ASCII digits, forbid leading zeros and -0,
    # and bound the magnitude by length (then by string order for 19-digit numbers).
    digits = pc.ascii_ltrim(arr, "-")
    n_digits = pc.binary_length(digits)
    n_text = pc.binary_length(arr)
    # Bad: more than one sign, or digits that start with 0 in anything but "0" ("00", "-0").
    n_signs = pc.subtract(n_text, n_digits)
    bad = pc.or_(
        pc.greater(n_signs, _ONE),
        pc.and_(pc.starts_with(digits, "0"), pc.greater(n_text, _ONE)),
    )
    ok = clean(pc.and_not(pc.ascii_is_decimal(digits), bad))
    longest = pc.max(n_digits).as_py()
    if longest is not None and longest >= 19:
        # Only 19-digit texts need a closer look (more digits never fit): compare those as
        # strings of equal length against the bounds, on that subset only.
        ok = clean(pc.and_(ok, pc.less_equal(n_digits, _NINETEEN)))
        edge = clean(pc.and_(ok, pc.equal(n_digits, _NINETEEN)))
        if edge.true_count:
            positions = pc.indices_nonzero(edge)
            sub = digits.take(positions)
            negative = pc.equal(n_signs.take(positions), _ONE)
            fits = pc.if_else(
                negative,
                pc.less_equal(sub, _INT64_MIN_ABS_TEXT),
                pc.less_equal(sub, _INT64_MAX_TEXT),
            )
            ok = pc.replace_with_mask(ok, edge, fits)
    return pc.cast(keep_where(arr, ok), pa.int64()), ok


_INT64_LOW = pa.scalar(Decimal(-(2**63)), pa.decimal128(19, 0))
_INT64_HIGH = pa.scalar(Decimal(2**63 - 1), pa.decimal128(19, 0))


def _integer_lenient(arr: pa.Array) -> Conversion:
    conv = _number_repair(arr, 19, 0, as_int64=True)
    values = conv.values
    if pa.types.is_int64(values.type) or values.null_count == len(values):
        return Conversion(values.cast(pa.int64()), conv.failed)
    inside = clean(
        pc.and_(pc.greater_equal(values, _INT64_LOW), pc.less_equal(values, _INT64_HIGH))
    )
    out_of_range = pc.and_not(pc.is_valid(values), inside)
    failed = conv.failed
    if out_of_range.true_count:
        values = null_where(values, out_of_range)
        failed = out_of_range if failed is None else pc.or_(failed, out_of_range)
    return Conversion(values.cast(pa.int64()), failed)


def parse_integer(arr: pa.Array, lenient: bool, fast_path: bool = True) -> Conversion:
    fast = _whole_cast(arr, pa.int64()) if fast_path else None
    if fast is not None:
        # Arrow also takes hex (0x1F) and, unlike strict, leading zeros and -0.
        if lenient:
            foreign = pc.match_substring(arr, "x", ignore_case=True)
        else:
            foreign = pc.or_(
                pc.and_(pc.starts_with(arr, "0"), pc.greater(pc.binary_length(arr), _ONE)),
                pc.starts_with(arr, "-0"),
            )
        if not clean(foreign).true_count:
            return Conversion(fast)
    return parse_with(arr, _integer_canonical, _integer_lenient if lenient else None)


# --- float ---------------------------------------------------------------------------------------


def _underflow(arr: pa.Array, values: pa.Array) -> pa.BooleanArray | None:
    """Slots whose numeral has a non-zero digit but parsed to 0.0 (1e-400): the value is lost."""
    zeros = pc.equal(values, 0.0)
    if not zeros.true_count:
        return None
    zeros = clean(zeros)
    nonzero = _regex(arr.take(pc.indices_nonzero(zeros)), _NONZERO_MANTISSA)
    if not nonzero.true_count:
        return None
    return pc.replace_with_mask(falses(len(arr)), zeros, nonzero)


def _float_checked(arr: pa.Array, pattern: str) -> tuple[pa.Array, pa.BooleanArray]:
    ok = _regex(arr, pattern)
    values = pc.cast(keep_where(arr, ok), pa.float64())
    # NaN and ±inf are never valid floats (docs): 1e400 overflows to inf, so it is rejected too.
    finite = pc.is_finite(values)
    bad = pc.invert(clean(finite)) if finite.false_count else None
    underflow = _underflow(arr, values)
    if underflow is not None:
        bad = underflow if bad is None else pc.or_(bad, underflow)
    if bad is not None:
        bad = pc.and_(ok, bad)
        ok = pc.and_not(ok, bad)
        values = null_where(values, bad)
    return values, ok


def _float_lenient(arr: pa.Array) -> Conversion:
    trimmed = _trim(arr)
    values, ok = _float_checked(trimmed, _FLOAT_LENIENT)
    return Conversion(values, failed_of(arr, ok))


def parse_float(arr: pa.Array, lenient: bool, fast_path: bool = True) -> Conversion:
    if lenient and fast_path:
        fast = _whole_cast(arr, pa.float64())
        # Arrow's grammar is the lenient one plus nan/inf, which the finite check rejects.
        if (
            fast is not None
            and not pc.is_finite(fast).false_count
            and _underflow(arr, fast) is None
        ):
            return Conversion(fast)
    return parse_with(
        arr,
        lambda a: _float_checked(a, _FLOAT_STRICT),
        _float_lenient if lenient else None,
    )


# --- decimal -------------------------------------------------------------------------------------


@cache
def decimal_pattern(precision: int, scale: int) -> str:
    """Canonical grammar of decimal(precision, scale): bounds included, negative zero excluded."""
    whole = precision - scale
    frac = rf"(?:\.[0-9]{{1,{scale}}})?" if scale else ""
    nonzero_frac = (
        "(?:" + "|".join(rf"0{{{i}}}[1-9][0-9]{{0,{scale - 1 - i}}}" for i in range(scale)) + ")"
        if scale
        else ""
    )
    if whole == 0:
        positive = rf"0{frac}"
        negative = rf"-0\.{nonzero_frac}"
    else:
        big = rf"[1-9][0-9]{{0,{whole - 1}}}"
        positive = rf"(?:0|{big}){frac}"
        negative = rf"-(?:{big}{frac}|0\.{nonzero_frac})" if scale else rf"-{big}"
    return rf"^(?:{positive}|{negative})$"


def _decimal_canonical(
    arr: pa.Array, precision: int, scale: int
) -> tuple[pa.Array, pa.BooleanArray]:
    ok = _regex(arr, decimal_pattern(precision, scale))
    return pc.cast(keep_where(arr, ok), pa.decimal128(precision, scale)), ok


def plain_decimal(text: str, precision: int, scale: int) -> str | None:
    """Exact plain form of a lenient numeral if its value fits decimal(precision, scale).

    ``text`` has passed the lenient number grammar (ASCII digits, optional sign, point and
    exponent). Integer arithmetic on the digits: no context precision, no rounding, and no
    limit on the exponent (``1e999999999999999999999`` is simply too big).
    """
    negative = text.startswith("-")
    mantissa, _, exp = text.lstrip("+-").replace("E", "e").partition("e")
    whole, _, frac = mantissa.partition(".")
    exponent = (int(exp) if exp else 0) - len(frac)
    body = (whole + frac).lstrip("0")
    if not body:
        return "0"
    stripped = body.rstrip("0")
    exponent += len(body) - len(stripped)
    body = stripped
    whole_digits = len(body) + exponent
    if whole_digits > precision - scale or -exponent > scale:
        return None
    if exponent >= 0:
        plain = body + "0" * exponent
    elif whole_digits > 0:
        plain = body[:whole_digits] + "." + body[whole_digits:]
    else:
        plain = "0." + "0" * (-whole_digits) + body
    return ("-" if negative else "") + plain


#: Up to this many candidates, the repair pass parses them one by one (fewer kernel calls).
SMALL_REPAIR = 64


def _int64_of(plain: str | None) -> int | None:
    if plain is None:
        return None
    value = int(plain)
    return value if -(2**63) <= value < 2**63 else None


def _number_repair(
    arr: pa.Array, precision: int, scale: int, *, as_int64: bool = False
) -> Conversion:
    """Lenient numerals (whitespace, ``+``, leading/trailing zeros, ``.5``, ``5.``, exponents).

    Values are decimal(precision, scale); with ``as_int64`` (scale 0) the small path returns
    int64 values already range-checked.
    """
    dtype = pa.decimal128(precision, scale)
    text = _trim(arr)
    candidate = _regex(text, _FLOAT_LENIENT)
    k = candidate.true_count
    if k == 0:
        return all_failed(arr, pa.int64() if as_int64 else dtype)
    if k <= SMALL_REPAIR:
        positions = pc.indices_nonzero(candidate)
        texts = text.take(positions).to_pylist()
        if as_int64:
            fixed = pa.array([_int64_of(plain_decimal(t, 19, 0)) for t in texts], pa.int64())
            base = pa.nulls(len(arr), pa.int64())
        else:
            fixed = pa.array([plain_decimal(t, precision, scale) for t in texts], pa.string())
            fixed = fixed.cast(dtype)
            base = pa.nulls(len(arr), dtype)
        values = pc.replace_with_mask(base, candidate, fixed)
        ok = pc.replace_with_mask(candidate, candidate, pc.is_valid(fixed))
        failed = failed_of(arr, ok)
        return Conversion(values, failed if failed.true_count else None)
    return _decimal_lenient(text, precision, scale, failed_of(arr, candidate))


def _decimal_lenient(
    text: pa.Array, precision: int, scale: int, rejected: pa.BooleanArray
) -> Conversion:
    """Vectorized :func:`plain_decimal` over many candidates (``rejected``: known failures)."""
    dtype = pa.decimal128(precision, scale)
    parts = pc.extract_regex(text, _NUMBER_PARTS)
    sign = pc.struct_field(parts, "sign")
    whole = pc.ascii_ltrim(pc.struct_field(parts, "int"), "0")
    frac_raw = pc.struct_field(parts, "frac")
    frac = pc.ascii_rtrim(frac_raw, "0")
    has_digit = pc.greater(
        pc.add(pc.binary_length(pc.struct_field(parts, "int")), pc.binary_length(frac_raw)), 0
    )
    ok = clean(
        pc.and_(
            has_digit,
            pc.and_(
                pc.less_equal(pc.binary_length(whole), precision - scale),
                pc.less_equal(pc.binary_length(frac), scale),
            ),
        )
    )
    has_frac = pc.greater(pc.binary_length(frac), 0)
    plain = pc.binary_join_element_wise(
        pc.if_else(pc.equal(sign, "-"), "-", ""),
        pc.if_else(pc.greater(pc.binary_length(whole), 0), whole, "0"),
        pc.if_else(has_frac, ".", ""),
        frac,
        "",
    )
    values = pc.cast(keep_where(plain, ok), dtype)
    failed = failed_of(text, ok)
    # Exponent forms: exact integer arithmetic per value, on those slots only.
    exponent = pc.and_not(pc.and_(failed, _regex(text, _NUMBER_EXPONENT)), rejected)
    if exponent.true_count:
        positions = pc.indices_nonzero(exponent)
        fixed = [plain_decimal(t, precision, scale) for t in text.take(positions).to_pylist()]
        fixed_arr = pa.array(fixed, pa.string())
        values = pc.replace_with_mask(values, exponent, pc.cast(fixed_arr, dtype))
        failed = pc.replace_with_mask(failed, exponent, pc.is_null(fixed_arr))
    return Conversion(values, failed if failed.true_count else None)


def parse_decimal(
    arr: pa.Array, precision: int, scale: int, lenient: bool, fast_path: bool = True
) -> Conversion:
    if lenient and fast_path:
        # Arrow's decimal grammar is inside the lenient one and it refuses any rounding.
        fast = _whole_cast(arr, pa.decimal128(precision, scale))
        if fast is not None:
            return Conversion(fast)
    return parse_with(
        arr,
        lambda a: _decimal_canonical(a, precision, scale),
        (lambda a: _number_repair(a, precision, scale)) if lenient else None,
    )


# --- boolean -------------------------------------------------------------------------------------


def _boolean_canonical(arr: pa.Array) -> tuple[pa.Array, pa.BooleanArray]:
    # SPEC §3: `true`/`false` in any letter case (R's and Excel's TRUE/FALSE, Python's True).
    index = pc.index_in(pc.ascii_lower(arr), value_set=_BOOL_CANONICAL)
    return pc.equal(index, 1), clean(pc.is_valid(index))


def _boolean_lenient(arr: pa.Array) -> Conversion:
    index = pc.index_in(pc.ascii_lower(_trim(arr)), value_set=_BOOL_WORDS)
    values = pc.equal(pc.bit_wise_and(index, _ONE), _ONE)
    failed = failed_of(arr, pc.is_valid(index))
    return Conversion(values, failed if failed.true_count else None)


def parse_boolean(arr: pa.Array, lenient: bool) -> Conversion:
    if lenient:
        # Cheap enough to run on the whole column: no second pass needed.
        return _boolean_lenient(arr)
    return parse_with(arr, _boolean_canonical, None)


# --- date, time, timestamp ---------------------------------------------------------------------


def _dates_from(text: pa.Array, ok: pa.BooleanArray) -> tuple[pa.Array, pa.BooleanArray]:
    values = pc.cast(keep_where(text, ok), pa.date32())
    low = pc.min(values.cast(pa.int32())).as_py()
    if low is not None and low < _DATE_MIN_DAYS:  # year 0000
        year_zero = clean(pc.less(values.cast(pa.int32()), _DATE_MIN_DAYS))
        ok = pc.and_not(ok, year_zero)
        values = null_where(values, year_zero)
    return values, ok


def _date_canonical(arr: pa.Array) -> tuple[pa.Array, pa.BooleanArray]:
    return _dates_from(arr, _regex(arr, _DATE_STRICT))


def _date_lenient(arr: pa.Array) -> Conversion:
    text = _trim(arr)
    values, ok = _dates_from(pc.utf8_slice_codeunits(text, 0, 10), _regex(text, _DATE_LENIENT))
    return Conversion(values, failed_of(arr, ok))


def parse_date(arr: pa.Array, lenient: bool, fast_path: bool = True) -> Conversion:
    # Arrow's date grammar is exactly the canonical YYYY-MM-DD, calendar checked; its years
    # start at 0000, ours at 0001.
    fast = _whole_cast(arr, pa.date32()) if fast_path else None
    if fast is not None:
        low = pc.min(fast.cast(pa.int32())).as_py()
        if low is None or low >= _DATE_MIN_DAYS:
            return Conversion(fast)
    return parse_with(arr, _date_canonical, _date_lenient if lenient else None)


def _shorten_fraction(text: pa.Array, shortest: int = 16) -> pa.Array:
    # Only a text with 7+ fraction digits can need it: the shortest such time has 16
    # characters ("00:00:00.0000000"), the shortest such timestamp 27.
    if _longest(text) < shortest:
        return text
    return pc.replace_substring_regex(text, _LONG_ZERO_FRACTION, r"\1\2")


def _time_from(text: pa.Array, ok: pa.BooleanArray) -> pa.Array:
    # Arrow has no string -> time cast: parse as a timestamp on 1970-01-01 (the grammar has
    # already bounded every field), then reinterpret the microseconds since midnight.
    stamped = pc.binary_join_element_wise("1970-01-01T", keep_where(text, ok), "")
    micros = pc.cast(pc.cast(stamped, pa.timestamp(TIME_UNIT)), pa.int64())
    return pc.cast(micros, pa.time64(TIME_UNIT))


def _time_canonical(arr: pa.Array) -> tuple[pa.Array, pa.BooleanArray]:
    ok = _regex(arr, _TIME_STRICT)
    return _time_from(arr, ok), ok


def _time_repair(arr: pa.Array, lenient: bool) -> Conversion:
    text = _shorten_fraction(_trim(arr) if lenient else arr)
    ok = _regex(text, _TIME_LENIENT_RE if lenient else _TIME_STRICT)
    return Conversion(_time_from(text, ok), failed_of(arr, ok))


def _longest(arr: pa.Array) -> int:
    longest = pc.max(pc.binary_length(arr)).as_py()
    return 0 if longest is None else int(longest)


def parse_time(arr: pa.Array, lenient: bool) -> Conversion:
    # Strict has one repair: 7..9 fraction digits, so at least 16 characters.
    repair = lenient or _longest(arr) >= 16
    return parse_with(
        arr, _time_canonical, (lambda a: _time_repair(a, lenient)) if repair else None
    )


def _timestamp_from(
    text: pa.Array, ok: pa.BooleanArray, tz: bool
) -> tuple[pa.Array, pa.BooleanArray]:
    dtype = pa.timestamp(TIME_UNIT, tz=UTC if tz else None)
    values = pc.cast(keep_where(text, ok), dtype)
    # Year 0000, or an offset that pushes 0001-01-01 / 9999-12-31 over the edge.
    micros = values.cast(pa.int64())
    low, high = pc.min_max(micros).values()
    if low.is_valid and (low.as_py() < _TS_MIN_US or high.as_py() > _TS_MAX_US):
        inside = clean(
            pc.and_(pc.greater_equal(micros, _TS_MIN_US), pc.less_equal(micros, _TS_MAX_US))
        )
        outside = pc.and_not(ok, inside)
        ok = pc.and_not(ok, outside)
        values = null_where(values, outside)
    return values, ok


def _timestamp_canonical(arr: pa.Array, tz: bool) -> tuple[pa.Array, pa.BooleanArray]:
    ok = _regex(arr, _TS_TZ_STRICT if tz else _TS_NAIVE_STRICT)
    return _timestamp_from(arr, ok, tz)


def _timestamp_repair(arr: pa.Array, tz: bool, lenient: bool) -> Conversion:
    if lenient:
        text = _shorten_fraction(pc.ascii_upper(_trim(arr)), 27)
        pattern = _TS_TZ_LENIENT if tz else _TS_NAIVE_LENIENT
    else:
        text = _shorten_fraction(arr, 27)
        pattern = _TS_TZ_STRICT if tz else _TS_NAIVE_STRICT
    values, ok = _timestamp_from(text, _regex(text, pattern), tz)
    return Conversion(values, failed_of(arr, ok))


def _timestamp_fast(arr: pa.Array, tz: bool) -> Conversion | None:
    fast = _whole_cast(arr, pa.timestamp(TIME_UNIT, tz=UTC if tz else None))
    if fast is None:
        return None
    # Arrow also takes an hour without minutes (T10Z): the first ':' must follow HH.
    colon = pc.find_substring(arr, ":")
    shaped = pc.equal(colon, 13)
    if not tz:
        shaped = pc.or_(shaped, pc.equal(pc.binary_length(arr), 10))
    if clean(shaped).true_count != len(arr) - arr.null_count:
        return None
    low, high = pc.min_max(fast.cast(pa.int64())).values()
    if low.is_valid and (low.as_py() < _TS_MIN_US or high.as_py() > _TS_MAX_US):
        return None
    return Conversion(fast)


def parse_timestamp(arr: pa.Array, tz: bool, lenient: bool, fast_path: bool = True) -> Conversion:
    if lenient and fast_path:
        fast = _timestamp_fast(arr, tz)
        if fast is not None:
            return fast
    # Strict has one repair: 7..9 fraction digits, so at least 27 characters.
    repair = lenient or _longest(arr) >= 27
    return parse_with(
        arr,
        lambda a: _timestamp_canonical(a, tz),
        (lambda a: _timestamp_repair(a, tz, lenient)) if repair else None,
    )


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
