"""Text -> date, time and timestamp: the two-pass parsers of :mod:`dpone.contracts.text`.

The grammar is calendar-aware (month lengths, Gregorian leap years) so that a date Arrow
would roll over (``2024-02-30``) is refused instead; the cast only converts what it passed.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from dpone.contracts.kernels import (
    Conversion,
    clean,
    failed_of,
    keep_where,
    matches,
    null_where,
    parse_with,
    trim,
    whole_cast,
)
from dpone.contracts.types import TIME_UNIT, UTC

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

_TS_MIN_US = -62_135_596_800_000_000  # 0001-01-01T00:00:00Z
_DATE_MIN_DAYS = -719_162  # 0001-01-01
_TS_MAX_US = 253_402_300_799_999_999  # 9999-12-31T23:59:59.999999Z


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
    return _dates_from(arr, matches(arr, _DATE_STRICT))


def _date_lenient(arr: pa.Array) -> Conversion:
    text = trim(arr)
    values, ok = _dates_from(pc.utf8_slice_codeunits(text, 0, 10), matches(text, _DATE_LENIENT))
    return Conversion(values, failed_of(arr, ok))


def parse_date(arr: pa.Array, lenient: bool, fast_path: bool = True) -> Conversion:
    # Arrow's date grammar is exactly the canonical YYYY-MM-DD, calendar checked; its years
    # start at 0000, ours at 0001.
    fast = whole_cast(arr, pa.date32()) if fast_path else None
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
    ok = matches(arr, _TIME_STRICT)
    return _time_from(arr, ok), ok


def _time_repair(arr: pa.Array, lenient: bool) -> Conversion:
    text = _shorten_fraction(trim(arr) if lenient else arr)
    ok = matches(text, _TIME_LENIENT_RE if lenient else _TIME_STRICT)
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
    ok = matches(arr, _TS_TZ_STRICT if tz else _TS_NAIVE_STRICT)
    return _timestamp_from(arr, ok, tz)


def _timestamp_repair(arr: pa.Array, tz: bool, lenient: bool) -> Conversion:
    if lenient:
        text = _shorten_fraction(pc.ascii_upper(trim(arr)), 27)
        pattern = _TS_TZ_LENIENT if tz else _TS_NAIVE_LENIENT
    else:
        text = _shorten_fraction(arr, 27)
        pattern = _TS_TZ_STRICT if tz else _TS_NAIVE_STRICT
    values, ok = _timestamp_from(text, matches(text, pattern), tz)
    return Conversion(values, failed_of(arr, ok))


def _timestamp_fast(arr: pa.Array, tz: bool) -> Conversion | None:
    fast = whole_cast(arr, pa.timestamp(TIME_UNIT, tz=UTC if tz else None))
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


__all__ = ["DATE", "TIME", "parse_date", "parse_time", "parse_timestamp"]
