"""A cursor value's two forms: the Arrow scalar a column holds and the committed text.

The committed cursor is kept as canonical text (ISO-8601 for temporal types, the decimal's
digits, the integer) so resuming never goes through floats or a locale. The cursor tracker
and the boundary window both convert through here.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dpone.clock import iso_utc


def to_text(value: Any) -> str | int | None:
    """The committed form of a cursor value taken from an Arrow scalar's ``as_py()``."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return value
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            return iso_utc(value)
        return value.isoformat(timespec="microseconds")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return format(value, "f")
    return str(value)


def to_scalar(value: str | int | float, dtype: pa.DataType) -> pa.Scalar:
    """A committed cursor (text or number) as a scalar of the column's Arrow type."""
    if pa.types.is_timestamp(dtype):
        text = str(value).replace("Z", "+00:00")
        moment = dt.datetime.fromisoformat(text)
        if dtype.tz is not None and moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.UTC)
        if dtype.tz is None and moment.tzinfo is not None:
            moment = moment.astimezone(dt.UTC).replace(tzinfo=None)
        return pa.scalar(moment, type=dtype)
    if pa.types.is_date(dtype):
        return pa.scalar(dt.date.fromisoformat(str(value)), type=dtype)
    if pa.types.is_time(dtype):
        return pa.scalar(dt.time.fromisoformat(str(value)), type=dtype)
    if pa.types.is_decimal(dtype):
        return pa.scalar(Decimal(str(value)), type=dtype)
    if pa.types.is_integer(dtype):
        return pa.scalar(int(value), type=dtype)
    if pa.types.is_floating(dtype):
        return pa.scalar(float(value), type=dtype)
    return pa.scalar(str(value), type=dtype)


def max_value(column: pa.Array | pa.ChunkedArray) -> Any:
    if len(column) == 0:
        return None
    return pc.max(column).as_py()


__all__ = ["max_value", "to_scalar", "to_text"]
