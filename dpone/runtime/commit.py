"""The state move of a run: decided once, recorded, then applied after the sink committed.

:func:`state_move` decides where a run moves its pipeline's state; the evidence records that
move and the sink's load marker carries its cursor, both before the sink commits.
:func:`advance_state` applies it once the sink committed (a live run), and :func:`commit_state`
is the one write of an advanced state, for a live run and for a dead one that recovery
finishes from its journal and marker (``runtime/recovery.py``). SPEC §6: the state moves only
after the DLQ is durable and the sink committed.
"""

from __future__ import annotations

from dpone.clock import Clock, iso_utc
from dpone.errors import DponeError
from dpone.faults import checkpoint
from dpone.logs import get_logger
from dpone.manifest.plan import Plan
from dpone.runtime.identity import RunIdentity
from dpone.runtime.report import StateSection
from dpone.state.model import Boundary, Cursor, PipelineState
from dpone.state.store import StateStore

log = get_logger("dpone.run")


def holds_state(plan: Plan, rejected: int) -> bool:
    """``coerce`` holds the state when the contract rejected rows: the next run reads them
    again (SPEC §3; the compiler refuses ``append``, where that would load a row twice)."""
    return plan.sink.contract.enforcement == "coerce" and rejected > 0


def state_move(
    plan: Plan,
    state: PipelineState,
    *,
    failure: DponeError | None,
    cursor_to: str | None,
    held: bool = False,
) -> StateSection:
    """The state move the evidence records: to ``cursor_to`` once the run commits, none when
    it failed or holds its state."""
    committed = state.cursor.value if state.cursor else None
    if failure is not None or held:
        return StateSection(False, committed, committed, state.revision)
    return StateSection(plan.state_type == "file", committed, cursor_to, state.revision + 1)


def advance_state(
    plan: Plan,
    states: StateStore,
    state: PipelineState,
    move: StateSection,
    *,
    identity: RunIdentity,
    held: bool,
    rejected: int,
    unplaced: dict[str, list[int]] | None,
    boundary: Boundary | None,
    clock: Clock,
) -> StateSection:
    """Apply ``move`` (:func:`state_move` of a run whose sink committed); what the report
    says of the state."""
    if plan.state_type == "disabled":
        return StateSection(False, None, None, None)
    if held:
        log.info("state.held", pipeline=plan.name, rows_rejected=rejected)
        return move
    commit_state(
        plan,
        states,
        identity=identity,
        expected_revision=state.revision,
        cursor_to=move.cursor_to,
        unplaced=unplaced,
        boundary=boundary,
        clock=clock,
    )
    log.info("state.advanced", pipeline=plan.name, revision=move.revision)
    return move


def commit_state(
    plan: Plan,
    states: StateStore,
    *,
    identity: RunIdentity,
    expected_revision: int,
    cursor_to: str | int | None,
    unplaced: dict[str, list[int]] | None,
    clock: Clock,
    boundary: Boundary | None = None,
) -> None:
    """Advance the pipeline's state to the committed load of ``identity`` (a live run's, or a
    dead one's)."""
    inc = plan.source.incremental
    cursor = None
    if inc is not None and cursor_to is not None:
        declared = plan.sink.contract.column(inc.cursor_column)
        cursor = Cursor(inc.cursor_column, declared.type if declared else "string", cursor_to)
    with states.commit(plan.name, expected_revision=expected_revision) as txn:
        txn.set(
            txn.current.advanced(
                run_id=identity.run_id,
                load_id=identity.load_id,
                cursor=cursor,
                manifest_fingerprint=plan.fingerprint,
                updated_at=iso_utc(clock()),
                unplaced=unplaced,
                boundary=boundary,
            )
        )
        txn.before_publish = lambda: checkpoint("during_state_replace")


__all__ = ["advance_state", "commit_state", "holds_state", "state_move"]
