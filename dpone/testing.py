"""In-package fakes for unit tests (STYLE: IO behind small Protocols, a fake in the package).

Each fake has its own section; keep them small and free of test-framework imports.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

# --- clock (used by the DLQ store, the lifecycle and anything else that reads time) ---------


class FrozenClock:
    """A clock that stands still until told to move. Call it to read the time.

    >>> clock = FrozenClock("2026-01-01T00:00:00Z")
    >>> clock.advance(seconds=5).isoformat()
    '2026-01-01T00:00:05+00:00'
    """

    def __init__(self, at: datetime | str = "2026-01-01T00:00:00Z") -> None:
        self._now = self._aware(at)

    @staticmethod
    def _aware(at: datetime | str) -> datetime:
        moment = datetime.fromisoformat(at) if isinstance(at, str) else at
        if moment.tzinfo is None or moment.utcoffset() is None:
            raise ValueError("FrozenClock needs a timezone-aware time")
        return moment.astimezone(UTC)

    def __call__(self) -> datetime:
        return self._now

    def set(self, at: datetime | str) -> datetime:
        self._now = self._aware(at)
        return self._now

    def advance(self, **delta: float) -> datetime:
        """Move forward by ``timedelta(**delta)`` (``days=``, ``seconds=``, ...)."""
        self._now += timedelta(**delta)
        return self._now


__all__ = ["FrozenClock"]
