"""What recovery checks before it acts on a dead run: the journal, the sink's marker and the
DLQ index must tell one story.

Each of the three is read back and may have been edited or planted by someone who can write
the work dir, the sink folder or the DLQ folder. Recovery acts on them (publishes evidence,
moves the state cursor, signs an aborted index), so before it does, the run id, load id,
pipeline, cursor, row count and DLQ counts each document names must be the ones the others name. The
evidence the journal holds was computed by the run itself before its sink commit, so it is
what the marker and the index are held against: a marker whose ``cursor_to`` is not the
evidence's ``state.to`` (a planted marker moving the cursor to 2099) is refused, and so is a
marker for a journal that holds no evidence (a run writes its evidence into the journal
before it commits, so no honest commit lacks it). Anything that does not match is
``DPONE_RECOVERY_MISMATCH`` before recovery writes anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpone.connectors.base import LoadMarker
from dpone.dlq.errors import DlqRunNotFound
from dpone.dlq.index import DlqIndex
from dpone.errors import DponeError, Stage
from dpone.runtime.journal import JournalEntry
from dpone.runtime.wiring import Components


class RecoveryMismatch(DponeError):
    """The journal, the sink's load marker and the DLQ index disagree about a dead run."""

    code = "DPONE_RECOVERY_MISMATCH"
    stage: Stage = "recover"


def _mismatch(parts: Components, what: str) -> RecoveryMismatch:
    journal = f"runs/{parts.journal.path.name}"
    return RecoveryMismatch(
        f"recovery refused: {what}; the run journal {journal}, the sink's load marker and the "
        "DLQ index must describe the same run",
        path=journal,
        fixes=(
            f"one of them was edited or planted: compare {journal}, the sink's load marker of "
            "the journal's load id and the DLQ run's index.json with a backup; move the "
            "forged file aside (the journal out of the work dir, a marker out of the sink "
            "folder), run `dpone ops dlq verify --dir <the DLQ directory>`, then rerun",
        ),
    )


def check_committed(parts: Components, entry: JournalEntry, marker: LoadMarker) -> None:
    """Refuse to finish a dead run whose marker, journal and DLQ index disagree."""
    plan = parts.plan
    if (marker.load_id, marker.run_id, marker.pipeline) != (
        entry.load_id,
        entry.run_id,
        plan.name,
    ):
        raise _mismatch(parts, "the load marker names another run, load or pipeline")
    evidence = entry.evidence
    if evidence is None:
        raise _mismatch(parts, "the journal names a committed load but holds no evidence for it")
    if evidence["sink"].get("load_id") != entry.load_id:
        raise _mismatch(parts, "the journal's evidence names another load")
    if evidence["state"].get("to") != marker.cursor_to:
        raise _mismatch(parts, "the load marker's cursor is not the one the run computed")
    if evidence["summary"].get("rows_loaded") != marker.rows:
        raise _mismatch(parts, "the load marker counts other rows than the run loaded")
    _check_dlq(parts, entry, evidence["dlq"])


def check_rolled_back(parts: Components, entry: JournalEntry) -> DlqIndex | None:
    """The DLQ run recovery is about to abort must be the journal's run (load, pipeline)."""
    if parts.dlq is None:
        return None
    try:
        index = parts.dlq.read_index(entry.run_id)
    except DlqRunNotFound:
        return None
    if index.load_id != entry.load_id or index.pipeline not in (None, parts.plan.name):
        raise _mismatch(parts, "the DLQ run of the journal's run names another load or pipeline")
    return index


def _check_dlq(parts: Components, entry: JournalEntry, dlq: Mapping[str, Any]) -> None:
    if dlq.get("index_ref") is None:
        if dlq.get("record_count"):
            raise _mismatch(parts, "the journal's evidence counts dead letters but has no index")
        return
    index = check_rolled_back(parts, entry)
    if index is None:
        raise _mismatch(parts, "the DLQ run the journal's evidence names does not exist")
    if (
        index.status != "closed"
        or index.fingerprint != dlq.get("index_fingerprint")
        or index.record_count != dlq.get("record_count")
    ):
        raise _mismatch(parts, "the DLQ index is not the closed index the journal's evidence pins")


__all__ = ["RecoveryMismatch", "check_committed", "check_rolled_back"]
