"""``dpone pipeline reset|drop``: forget a pipeline's state, or remove the pipeline's files.

Forgetting the state makes the next run read the source from its start again. Into a
``merge`` or ``replace`` table that loads nothing twice (rows replace their own key, or the
whole table); into an ``append`` table every row would land a second time. So a reset is
allowed only when the strategy is known to be merge or replace: given a manifest, the one
the next run will use; else the one the last committed run recorded in its evidence
(``sink.mode``). When neither says, it is refused: dpone does not guess. ``drop_table``
empties the sink table first, through the sink connector (an empty ``replace`` load, with its
own load marker), so the reload starts from nothing: for duckdb, postgres and filesystem sinks
only.

Every change runs under the pipeline's lock (no run of it may be in progress) and is refused
while the journal says a run died midway: the next run finishes or rolls that one back from
the state it committed, which a reset would take away.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dpone.durable import fsync_dir
from dpone.errors import UsageError
from dpone.ops.pipeline_files import PipelineDirs, check_name
from dpone.ops.pipelines import PipelineInfo, pipeline_info
from dpone.records import frozen

CHANGE_SCHEMA = "dpone.pipeline-change.v1"
#: Strategies a reset cannot load twice into.
SAFE_MODES = ("merge", "replace")
#: Sinks whose table ``--drop-table`` can empty through the connector.
EMPTYABLE_SINKS = ("duckdb", "postgres", "filesystem")


class ResetRefused(UsageError):
    code = "DPONE_PIPELINE_RESET_REFUSED"


class RunUnfinished(UsageError):
    code = "DPONE_PIPELINE_RUN_UNFINISHED"


class DropTableUnsupported(UsageError):
    code = "DPONE_PIPELINE_DROP_TABLE_UNSUPPORTED"


@frozen
class ResetDecision:
    """What a reset of ``pipeline`` will do, decided before anything changes."""

    pipeline: str
    state_exists: bool
    recorded_mode: str | None
    manifest_mode: str | None
    table: str | None
    drop_table: bool
    #: DLQ runs with records from before the reset: the reload quarantines the same bad rows
    #: again in a new run, so replaying these as well would apply a fixed row twice
    earlier_dlq_runs: tuple[str, ...] = ()

    def describe(self) -> str:
        what = "forget the state" if self.state_exists else "find no state to forget"
        if self.drop_table:
            what = f"empty the sink table {self.table} and {what}"
        return f"reset pipeline {self.pipeline}: {what}"

    def warning(self) -> str | None:
        """What the operator must not do after the reset, if anything."""
        if not self.earlier_dlq_runs:
            return None
        return (
            f"{len(self.earlier_dlq_runs)} DLQ run(s) from before the reset keep their "
            "records; the reload quarantines the same bad rows again, so replay only the "
            "runs after the reset"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "pipeline": self.pipeline,
            "state_exists": self.state_exists,
            "recorded_mode": self.recorded_mode,
            "manifest_mode": self.manifest_mode,
            "table": self.table,
            "drop_table": self.drop_table,
            "earlier_dlq_runs": list(self.earlier_dlq_runs),
        }


@frozen
class ResetResult:
    """What a reset did: whether it removed the state and emptied the table, and what it removed."""

    decision: ResetDecision
    state_removed: bool
    table_emptied: bool
    reset_load_id: str | None = None
    removed: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """``dpone.pipeline-change.v1``."""
        decision = self.decision
        return {
            "schema": CHANGE_SCHEMA,
            "action": "reset",
            "pipeline": decision.pipeline,
            "state_removed": self.state_removed,
            "table_emptied": self.table_emptied,
            "table": decision.table,
            "reset_load_id": self.reset_load_id,
            "recorded_mode": decision.recorded_mode,
            "manifest_mode": decision.manifest_mode,
            "removed": list(self.removed),
            "earlier_dlq_runs": list(decision.earlier_dlq_runs),
        }


@frozen
class DropResult:
    """What a drop did: the pipeline's files it removed (relative to the work dir)."""

    pipeline: str
    removed: tuple[str, ...]
    state_removed: bool = False

    def to_json(self) -> dict[str, Any]:
        """``dpone.pipeline-change.v1``."""
        return {
            "schema": CHANGE_SCHEMA,
            "action": "drop",
            "pipeline": self.pipeline,
            "state_removed": self.state_removed,
            "table_emptied": False,
            "table": None,
            "reset_load_id": None,
            "recorded_mode": None,
            "manifest_mode": None,
            "removed": list(self.removed),
            "earlier_dlq_runs": [],
        }


def _recorded_mode(info: PipelineInfo) -> str | None:
    """The strategy of the run the state last advanced to, else of the newest committed run."""
    committed = [r for r in info.runs if r.committed]
    for run in committed:
        if run.run_id == info.state.last_run_id:
            return run.mode
    return committed[0].mode if committed else None


def decide_reset(name: str, dirs: PipelineDirs, *, drop_table: bool = False) -> ResetDecision:
    """The reset's decision, or the typed refusal (nothing is changed here)."""
    info = pipeline_info(name, dirs, limit=None)
    if info.journal.unfinished:
        raise _unfinished(name)
    recorded = _recorded_mode(info)
    plan = dirs.plan
    manifest_mode = plan.sink.strategy.mode if plan is not None else None
    table = f"{plan.sink.dataset}.{plan.sink.table}" if plan is not None else None
    if table is None and info.sink is not None:
        table = str(info.sink["table"])
    if drop_table:
        if plan is None:
            raise UsageError(
                "--drop-table needs the manifest: the sink's connection is in it",
                fixes=(f"dpone pipeline reset {name} --manifest M --drop-table",),
            )
        if plan.sink.type not in EMPTYABLE_SINKS:
            raise DropTableUnsupported(
                f"--drop-table empties duckdb, postgres and filesystem tables, not a "
                f"{plan.sink.type} sink",
                fixes=(
                    "empty the table with the destination's own tools, then reset with "
                    "--drop-table left out once the strategy is merge or replace",
                ),
            )
    else:
        # The manifest's strategy is the next run's; without it, the last committed run's.
        mode = manifest_mode if manifest_mode is not None else recorded
        if mode is None:
            raise ResetRefused(
                f"no readable evidence of '{name}' records its sink strategy, so a reset "
                "could load every row a second time",
                fixes=(
                    f"pass the manifest (dpone pipeline reset {name} --manifest M), or empty "
                    "the table with it: --manifest M --drop-table",
                ),
            )
        if mode not in SAFE_MODES:
            raise ResetRefused(
                f"'{name}' loads with strategy {mode}: after a reset the next run would "
                "load every row of the source a second time",
                fixes=(
                    f"dpone pipeline reset {name} --manifest M --drop-table (empties the table, "
                    "then the next run loads each row once)",
                ),
            )
    return ResetDecision(
        pipeline=name,
        state_exists=info.state.status != "none",
        recorded_mode=recorded,
        manifest_mode=manifest_mode,
        table=table,
        drop_table=drop_table,
        earlier_dlq_runs=tuple(
            run.run_id for run in info.dlq_runs if run.records and run.status in ("open", "closed")
        ),
    )


def _unfinished(name: str) -> RunUnfinished:
    return RunUnfinished(
        f"the journal of '{name}' says a run died midway; the next run finishes or rolls it "
        "back from the committed state",
        fixes=(f"run the pipeline once (or let it recover), then reset {name}",),
    )


@contextmanager
def _locked(dirs: PipelineDirs, name: str) -> Iterator[None]:
    from dpone.runtime.journal import RunJournal

    journal = RunJournal(dirs.runs_dir, name)
    journal.lock()  # DPONE_PIPELINE_LOCKED while a run of it is in progress
    try:
        yield
    finally:
        journal.unlock()


def reset_pipeline(
    name: str,
    dirs: PipelineDirs,
    *,
    drop_table: bool = False,
    env: Mapping[str, str] | None = None,
) -> ResetResult:
    """Empty the table (``drop_table``), then forget the state; decided again under the lock.

    The table goes first: a crash between the two leaves a state over an emptied table (a
    second reset finishes it), never an append table about to be loaded twice."""
    check_name(name)
    with _locked(dirs, name):
        decision = decide_reset(name, dirs, drop_table=drop_table)
        load_id = None
        if drop_table:
            assert dirs.plan is not None
            from dpone.runtime.context import environment

            load_id = _empty_table(dirs, name, environment(env))
        state = dirs.state_file(name)
        removed = _remove(state)
    shown = (_shown(state, dirs),) if removed else ()
    return ResetResult(decision, removed, load_id is not None, load_id, shown)


def _empty_table(dirs: PipelineDirs, name: str, env: dict[str, str]) -> str | None:
    """Commit an empty ``replace`` load into the sink table; its load id, or None when the
    table does not exist. The connector's own commit empties it atomically with a marker."""
    import pyarrow as pa

    from dpone.clock import utc_now
    from dpone.connectors.base import LoadSpec
    from dpone.connectors.sinks import make_sink
    from dpone.ids import UlidSequence

    assert dirs.plan is not None
    sink = make_sink(dirs.plan.sink.spec, env=env)
    existing = sink.existing_schema()
    if existing is None:
        return None
    # Any one column the table has: a replace load adds no column it already holds.
    kept = [f for f in existing if not f.name.startswith("_dpone")]
    if not kept:
        raise DropTableUnsupported("the sink table holds only dpone's own columns")
    load_id = "reset-" + UlidSequence().batch(1, utc_now())[0]
    spec = LoadSpec(
        pipeline=name,
        run_id=load_id,
        load_id=load_id,
        schema=pa.schema([kept[0]]),
        mode="replace",
    )
    load = sink.begin(spec)
    try:
        load.commit()
    except BaseException:
        load.abort()
        raise
    return load_id


def _remove(path: Path) -> bool:
    if not os.path.lexists(path):
        return False
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
    fsync_dir(path.parent, missing_ok=True)
    return True


def drop_pipeline(name: str, dirs: PipelineDirs, *, with_evidence: bool = False) -> DropResult:
    """Remove the state, the journal and the lock file; ``with_evidence``: also the evidence
    bundles and the DLQ runs of the pipeline (records pending replay included)."""
    from dpone.dlq.layout import ACKS_DIR, RUNS_DIR

    pipeline_info(name, dirs, limit=0)  # a pipeline the folders do not know is refused
    removed: list[str] = []
    with _locked(dirs, name):
        info = pipeline_info(name, dirs, limit=0)
        if info.journal.unfinished:
            raise _unfinished(name)
        state_removed = _remove(dirs.state_file(name))
        if state_removed:
            removed.append(_shown(dirs.state_file(name), dirs))
        if _remove(dirs.journal_file(name)):
            removed.append(_shown(dirs.journal_file(name), dirs))
        if with_evidence:
            folder = dirs.evidence_of(name)
            if _remove(folder):
                removed.append(_shown(folder, dirs))
            for run in info.dlq_runs:
                if run.status == "unreadable":
                    continue  # its index does not verify: whose run it is cannot be told
                for sub in (RUNS_DIR, ACKS_DIR):
                    path = dirs.dlq_dir / sub / run.run_id
                    if _remove(path):
                        removed.append(_shown(path, dirs))
    lock = dirs.lock_file(name)
    if _remove(lock):
        removed.append(_shown(lock, dirs))
    return DropResult(name, tuple(removed), state_removed)


def _shown(path: Path, dirs: PipelineDirs) -> str:
    try:
        return os.path.relpath(path, dirs.work_dir)
    except ValueError:
        return path.name


__all__ = [
    "CHANGE_SCHEMA",
    "DropResult",
    "DropTableUnsupported",
    "ResetDecision",
    "ResetRefused",
    "ResetResult",
    "RunUnfinished",
    "decide_reset",
    "drop_pipeline",
    "reset_pipeline",
]
