"""What a run's chunks amounted to so far, counted on the run's main thread."""

from __future__ import annotations

from dataclasses import dataclass, field

from dpone.runtime.report import RowCounts


@dataclass(slots=True)
class Tally:
    """What the chunks so far amounted to (the DLQ pipe counts the quarantined rows)."""

    read: int = 0
    loaded: int = 0
    warned: int = 0
    skipped: int = 0
    late_skipped: int = 0
    chunks: int = 0
    #: rows the contract rejected (dead-lettered or dropped): a coerce run holds its state
    rejected: int = 0
    #: rejected rows with no DLQ record to go to (``dlq.enabled: false``): counted only
    dropped: int = 0
    #: rows of the run before the current chunk (the row numbers of run-scoped refs)
    rows_before: int = 0
    #: (column, reason code) -> rows
    violations: dict[tuple[str, str], int] = field(default_factory=dict)

    def violation(self, column: str, reason: str, rows: int) -> None:
        key = (column, reason)
        self.violations[key] = self.violations.get(key, 0) + rows

    def counts(self, quarantined: int) -> RowCounts:
        return RowCounts(
            read=self.read,
            loaded=self.loaded,
            quarantined=quarantined,
            warned=self.warned,
            skipped=self.skipped,
            late_skipped=self.late_skipped,
            chunks=self.chunks,
            dropped=self.dropped,
        )


__all__ = ["Tally"]
