"""Recovery: what a run does, under the pipeline's lock, about earlier runs that died.

The journal (``runtime/journal.py``) says which run was in flight. If it died before its sink
commit (no load marker), its staging is dropped and its DLQ run aborted: ``rolled_back``. If it
died after (its marker is in the sink), the state is advanced from the marker and the evidence
the journal holds is published: ``finished``. Then, whatever the journal said, the staging of
any dead run of the pipeline is dropped and every open DLQ run whose writer is gone is closed
as aborted (docs/guarantees.md, "Recovery rules"). Before either, the journal, the marker and
the DLQ index are held against each other (``runtime/crosscheck.py``): recovery acts, and
signs, only on what agrees with the evidence the dead run computed itself.
"""

from __future__ import annotations

from dpone.clock import Clock
from dpone.connectors.base import LoadMarker
from dpone.dlq.errors import DlqRunNotFound
from dpone.logs import get_logger
from dpone.runtime.commit import commit_state
from dpone.runtime.crosscheck import check_committed, check_rolled_back
from dpone.runtime.journal import JournalEntry
from dpone.runtime.report import Recovery
from dpone.runtime.wiring import Components
from dpone.state.model import Boundary

log = get_logger("dpone.run")


def recover(parts: Components, clock: Clock) -> list[Recovery]:
    """Finish or roll back the previous run of this pipeline if it died midway."""
    plan, sink, dlq = parts.plan, parts.sink, parts.dlq
    recovered: list[Recovery] = []
    entry = parts.journal.read()
    # First what killed runs left in the sink: staging goes, a committed load whose files were
    # still moving (filesystem sink) is completed, a dlt package dlt was loading is finished
    # or dropped. Only then does the sink's marker say for good whether the run committed.
    dropped = sink.cleanup_abandoned(plan.name)
    if entry is not None and entry.phase == "running":
        marker = sink.committed_load(entry.load_id)
        if marker is not None:
            check_committed(parts, entry, marker)
            recovered.append(_finish_committed(parts, entry, marker, clock))
        else:
            aborted: list[str] = []
            check_rolled_back(parts, entry)
            try:
                if dlq is not None:
                    aborted.append(dlq.abort_run(entry.run_id, "writer_gone").run_id)
            except DlqRunNotFound:
                pass
            recovered.append(
                Recovery(
                    run_id=entry.run_id,
                    action="rolled_back",
                    reason="the run died before its sink commit; nothing of it was loaded",
                    dlq_runs_aborted=tuple(aborted),
                    staging_dropped=tuple(dropped),
                )
            )
        parts.journal.write(JournalEntry.of(entry.identity, "recovered"))
    # Open DLQ runs whose writer died are closed as aborted.
    if dlq is not None:
        dlq.recover_abandoned(pipeline=plan.name)
    for rec in recovered:
        log.warning("run.recovered", run_id=rec.run_id, action=rec.action, reason=rec.reason)
    return recovered


def _finish_committed(
    parts: Components, entry: JournalEntry, marker: LoadMarker, clock: Clock
) -> Recovery:
    plan, states = parts.plan, parts.states
    state = states.read(plan.name)
    # A coerce run that rejected rows holds the state (its evidence says so): finishing it
    # must not advance what the run itself would not have.
    held = entry.evidence is not None and not entry.evidence["state"]["advanced"]
    if state.last_load_id != entry.load_id and plan.state_type == "file" and not held:
        commit_state(
            plan,
            states,
            identity=entry.identity,
            expected_revision=state.revision,
            cursor_to=marker.cursor_to,
            unplaced=entry.unplaced,
            boundary=Boundary.from_json(entry.boundary) if entry.boundary else None,
            clock=clock,
        )
    note = "its evidence was already published"
    if entry.evidence is not None:
        parts.evidence.publish(entry.evidence, exist_ok=True)
        note = "its evidence was published"
    elif not parts.evidence.exists(entry.run_id):
        note = "its evidence could not be rebuilt"
    return Recovery(
        run_id=entry.run_id,
        action="finished",
        reason=f"the run died after its sink commit; its state was advanced and {note}",
    )


__all__ = ["recover"]
