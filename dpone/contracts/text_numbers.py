"""Text -> integer, float and decimal: the two-pass parsers of :mod:`dpone.contracts.text`.

The magnitude checks are exact: integers by digit count then string order against the int64
bounds, decimals by integer arithmetic on the digits (no context precision, no rounding).
"""

from __future__ import annotations

from decimal import Decimal
from functools import cache

import pyarrow as pa
import pyarrow.compute as pc

from dpone.contracts.kernels import (
    Conversion,
    all_failed,
    clean,
    failed_of,
    falses,
    keep_where,
    matches,
    null_where,
    parse_with,
    trim,
    whole_cast,
)

# RE2 syntax; every piece is anchored by its user.
_FLOAT_STRICT = r"^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$"
_FLOAT_LENIENT = r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$"
_NUMBER_PARTS = r"^(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?$"
_NUMBER_EXPONENT = r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][+-]?[0-9]+$"
_NONZERO_MANTISSA = r"^[^eE]*[1-9]"

_ONE = pa.scalar(1, pa.int32())
_NINETEEN = pa.scalar(19, pa.int32())
_INT64_MAX_TEXT = "9223372036854775807"
_INT64_MIN_ABS_TEXT = "9223372036854775808"


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
    fast = whole_cast(arr, pa.int64()) if fast_path else None
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
    nonzero = matches(arr.take(pc.indices_nonzero(zeros)), _NONZERO_MANTISSA)
    if not nonzero.true_count:
        return None
    return pc.replace_with_mask(falses(len(arr)), zeros, nonzero)


def _float_checked(arr: pa.Array, pattern: str) -> tuple[pa.Array, pa.BooleanArray]:
    ok = matches(arr, pattern)
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
    trimmed = trim(arr)
    values, ok = _float_checked(trimmed, _FLOAT_LENIENT)
    return Conversion(values, failed_of(arr, ok))


def parse_float(arr: pa.Array, lenient: bool, fast_path: bool = True) -> Conversion:
    if lenient and fast_path:
        fast = whole_cast(arr, pa.float64())
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
    ok = matches(arr, decimal_pattern(precision, scale))
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
    text = trim(arr)
    candidate = matches(text, _FLOAT_LENIENT)
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
    exponent = pc.and_not(pc.and_(failed, matches(text, _NUMBER_EXPONENT)), rejected)
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
        fast = whole_cast(arr, pa.decimal128(precision, scale))
        if fast is not None:
            return Conversion(fast)
    return parse_with(
        arr,
        lambda a: _decimal_canonical(a, precision, scale),
        (lambda a: _number_repair(a, precision, scale)) if lenient else None,
    )


__all__ = [
    "SMALL_REPAIR",
    "decimal_pattern",
    "parse_decimal",
    "parse_float",
    "parse_integer",
    "plain_decimal",
]
