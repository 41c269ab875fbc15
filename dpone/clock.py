"""Time, passed explicitly: a clock is a callable returning an aware UTC datetime."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso_utc(moment: datetime) -> str:
    """ISO-8601 UTC with microseconds and a ``Z``: sortable as text."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def format_timestamp(moment: datetime) -> str:
    """:func:`iso_utc` of a clock's reading: the one timestamp form documents carry. A naive
    datetime is refused (a clock returns aware ones)."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("a clock must return timezone-aware datetimes")
    return iso_utc(moment)
