"""Who a run is: the names every part of a run writes under, fixed before anything is written."""

from __future__ import annotations

from datetime import datetime

from dpone.records import frozen


@frozen
class RunIdentity:
    """A run's pipeline, its run id (the evidence bundle, the DLQ run), its load id (the
    sink's load marker) and when it started. Created once at the run's start and passed
    whole: the journal, the DLQ pipe, the state commit and a scale-out task's copy of the run
    all name the same run."""

    pipeline: str
    run_id: str
    load_id: str
    #: ISO-8601 UTC, as the evidence and the journal record it
    started_at: str

    def started(self) -> datetime:
        """``started_at`` as an aware datetime (the clock a scale-out task's DLQ ids use)."""
        return datetime.fromisoformat(self.started_at.replace("Z", "+00:00"))


__all__ = ["RunIdentity"]
