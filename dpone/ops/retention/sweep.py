"""Retention, sweep: delete exactly what a plan marked (``dpone ops retention apply``).

:func:`apply_retention` trusts the plan file for nothing but the wish. It refuses a plan whose
``now`` is in the future or whose folder is another store, recomputes the snapshot and refuses
any drift (``DPONE_DLQ_RETENTION_SNAPSHOT_DRIFT``), and decides again from the store itself,
with the plan's ``now`` and flag, every protection (active, pinned, unexpired, acknowledged): a
record the plan deletes and the store protects is refused (``DPONE_DLQ_RETENTION_PLAN_INVALID``)
before anything is deleted. The protections that decide what may go come from apply's own
command line, not from the plan alone (:func:`effective_flags`), and every segment about to be
deleted from or compacted is read, verified, first (:func:`verify_touched`): a tampered segment
is evidence of tampering, and its records are not deleted.

It deletes through :meth:`DlqStore.delete_many`, which drops or compacts segments and replaces
each run's index atomically. An apply that was interrupted leaves runs whose index already lost
the planned records: applying the same plan again recognizes exactly that state (the run's
planned ``after`` snapshot) and finishes the job.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from dpone.canonical import checksum
from dpone.clock import format_timestamp
from dpone.dlq.index import DlqIndex
from dpone.dlq.model import parse_timestamp
from dpone.dlq.segments import SegmentEntry
from dpone.logs import get_logger
from dpone.ops.retention.mark import Seen, decisions, pinned_runs, see, segment_records
from dpone.ops.retention.model import (
    Cut,
    RetentionPlan,
    RetentionPlanInvalid,
    RetentionResult,
    RetentionSnapshotDrift,
    RunSweep,
    acks_fingerprint,
    snapshot_fingerprint,
)

if TYPE_CHECKING:
    from dpone.dlq.integrity import Finding
    from dpone.dlq.store import DlqStore

log = get_logger("dpone.retention")
_CHECK_WORKERS = 4


def _drift(message: str) -> RetentionSnapshotDrift:
    return RetentionSnapshotDrift(
        f"the store changed since the plan was made: {message}; nothing was deleted",
        fixes=("make a new plan with `dpone ops retention plan` and apply that one",),
    )


def _resumable(plan: RetentionPlan, seen: Mapping[str, Seen], pinned: Sequence[str]) -> set[str]:
    """Refuse drift; return the runs an interrupted apply of this plan already rewrote."""
    current = [entry.snapshot for entry in seen.values()]
    if snapshot_fingerprint(current, pinned) == plan.snapshot_fingerprint:
        return set()
    if list(pinned) != list(plan.pinned_runs):
        raise _drift("other runs are pinned by evidence now")
    planned = {snap.run_id: snap for snap in plan.snapshot}
    if set(planned) != set(seen):
        added = sorted(set(seen) - set(planned))
        removed = sorted(set(planned) - set(seen))
        raise _drift(
            f"runs were added ({', '.join(added) or '-'}) or removed ({', '.join(removed) or '-'})"
        )
    decisions = {run.run_id: run for run in plan.runs}
    resumed = set()
    for run_id, snap in planned.items():
        entry = seen[run_id]
        if entry.snapshot == snap:
            continue
        decision = decisions.get(run_id)
        after = decision.after if decision is not None else None
        if after is not None and decision is not None:
            listed = entry.index.checksums() if entry.index is not None else {}
            # The index already lost the planned records; acknowledgements of those records may
            # still be there (they go last), those of the others must be as planned.
            kept = acks_fingerprint(
                {k: v for k, v in entry.acks.items() if k in listed}, plain=True
            )
            current_snap = entry.snapshot
            if (
                current_snap.status,
                current_snap.fingerprint,
                current_snap.record_count,
                kept,
            ) == (after.status, after.fingerprint, after.record_count, after.acks):
                resumed.add(run_id)
                continue
        raise _drift(f"run {run_id} is not as it was (records, status or acknowledgements)")
    return resumed


def apply_retention(
    store: DlqStore,
    plan: RetentionPlan,
    *,
    evidence_dirs: Sequence[str] = (),
    include_unacknowledged: bool = False,
) -> RetentionResult:
    """Sweep: check the plan against the store, then delete exactly the planned records.

    ``evidence_dirs`` and ``include_unacknowledged`` are apply's own (its command line): the
    plan's are never trusted alone (:func:`effective_flags`)."""
    if Path(plan.directory) != store.root.resolve():
        raise RetentionPlanInvalid(
            "the retention plan was made for another DLQ folder",
            fixes=("make a plan for this folder with `dpone ops retention plan --dir DIR`",),
        )
    if parse_timestamp(plan.now) > store.now():
        raise RetentionPlanInvalid(
            "the retention plan's `now` is in the future: it would expire records early",
            fixes=("make a new plan without --now, or with a time that has passed",),
        )
    pins, unacknowledged = effective_flags(plan, evidence_dirs, include_unacknowledged)
    seen = see(store)
    pinned = pinned_runs(store, pins)
    unprotected = sorted(set(pinned) - set(plan.pinned_runs))
    if unprotected:
        raise _refused(unprotected[0], "an evidence bundle pins the run and the plan does not")
    resumed = _resumable(plan, seen, pinned)
    doomed_by_run = _checked_deletes(plan, seen, pinned, resumed, unacknowledged)
    verify_touched(store, {r: e.index for r, e in seen.items()}, doomed_by_run)
    sweeps = []
    deleted_acks = 0
    written = store.delete_many(
        [(run_id, doomed, seen[run_id].index) for run_id, doomed in doomed_by_run.items()]
    )
    for (run_id, doomed), index in zip(doomed_by_run.items(), written, strict=True):
        acks = seen[run_id].acks
        deleted_acks += sum(map(acks.__contains__, doomed))
        before = seen[run_id].snapshot.record_count
        resumed_run = run_id in resumed
        present = before - index.record_count
        sweeps.append(RunSweep(run_id, present, index.record_count, index.fingerprint, resumed_run))
        log.info("retention.run.swept", run_id=run_id, deleted=present, resumed=resumed_run)
    findings: list[Finding] = []
    # Reading back and hashing what was written waits on the disk and on SHA-256 of whole
    # files, both without the GIL: a few threads check several runs at once.
    with ThreadPoolExecutor(_CHECK_WORKERS, thread_name_prefix="dpone-retention-check") as pool:
        for found in pool.map(store.check_written, written):
            findings.extend(found)
    return RetentionResult(
        plan_id=checksum(plan.body()),
        directory=str(store.root),
        runs=tuple(sweeps),
        deleted_acks=deleted_acks,
        findings=tuple(findings),
        applied_at=format_timestamp(store.now()),
    )


def _checked_deletes(
    plan: RetentionPlan,
    seen: Mapping[str, Seen],
    pinned: Sequence[str],
    resumed: set[str],
    include_unacknowledged: bool,
) -> dict[str, set[str]]:
    """The record ids to delete per run, each one re-judged from the store, not the plan.

    The plan names segments and records; the store decides again, with the plan's ``now``
    and flag, whether each may go. Anything the store protects now refuses the whole plan.
    """
    fresh = {
        d.run_id: d for d in decisions(seen, pinned, plan.now, include_unacknowledged, after=False)
    }
    out: dict[str, set[str]] = {}
    for decision in plan.runs:
        if not decision.delete:
            continue
        run_id = decision.run_id
        entry = seen[run_id]
        if entry.index is None or entry.snapshot.status == "open":
            raise _refused(run_id, "the run is open (active)")
        if run_id in pinned:
            raise _refused(run_id, "an evidence bundle pins the run")
        by_name = {seg.name: (seg, ids) for seg, ids in segment_records(entry.index)}
        allowed = {rid for cut in fresh[run_id].delete for rid in _cut_ids(cut, by_name)}
        wanted: set[str] = set()
        for cut in decision.delete:
            if cut.segment not in by_name:
                if run_id in resumed:
                    continue  # dropped or compacted by an earlier, interrupted apply
                raise _drift(f"segment {cut.segment} of run {run_id} is not in its index")
            seg, _ = by_name[cut.segment]
            if seg.sha256 != cut.sha256:
                raise _drift(f"segment {cut.segment} of run {run_id} is another segment now")
            ids = _cut_ids(cut, by_name)
            if not allowed.issuperset(ids):
                rid = next(rid for rid in ids if rid not in allowed)
                raise _refused(run_id, f"record {rid} is unexpired or unacknowledged")
            wanted.update(ids)
        if run_id in resumed:
            # The interrupted apply replaced the index but did not get to the acknowledgements
            # of the records it deleted (they go last): those of records no longer listed.
            listed = entry.index.checksums()
            wanted.update(rid for rid in entry.acks if rid not in listed)
        if wanted or run_id in resumed:
            out[run_id] = wanted
    return out


def _cut_ids(cut: Cut, by_name: Mapping[str, tuple[SegmentEntry, Sequence[str]]]) -> Sequence[str]:
    if cut.segment not in by_name:
        return ()
    _, ids = by_name[cut.segment]
    if cut.whole:
        return ids
    present = set(ids)
    return [rid for rid in cut.record_ids if rid in present]


def _refused(run_id: str, why: str) -> RetentionPlanInvalid:
    return RetentionPlanInvalid(
        f"the retention plan deletes what the store protects in run {run_id}: {why}; "
        "nothing was deleted",
        fixes=("make a new plan with `dpone ops retention plan`; do not edit plan files",),
    )


def effective_flags(
    plan: RetentionPlan, evidence_dirs: Sequence[str], include_unacknowledged: bool
) -> tuple[tuple[str, ...], bool]:
    """(the evidence folders to pin, whether unacknowledged records may go) for an apply.

    Pins are never fewer than the command line's; unacknowledged records go only when both
    the plan and the command line say so, and a plan that says so alone is refused."""
    if plan.include_unacknowledged and not include_unacknowledged:
        raise RetentionPlanInvalid(
            "the retention plan deletes expired records that were never acknowledged; apply "
            "does so only when its own command line says so too; nothing was deleted",
            fixes=(
                "if that is what you want, pass --include-unacknowledged to "
                "`dpone ops retention apply` as well",
            ),
        )
    pins = tuple(dict.fromkeys([*plan.evidence_dirs, *evidence_dirs]))
    return pins, plan.include_unacknowledged


def verify_touched(
    store: DlqStore,
    indexes: Mapping[str, DlqIndex | None],
    doomed_by_run: Mapping[str, Collection[str]],
) -> None:
    """Read, verified, every listed segment that holds a record about to be deleted."""
    for run_id, doomed in doomed_by_run.items():
        index = indexes.get(run_id)
        if index is None or not doomed:
            continue
        for seg, ids in segment_records(index):
            if any(rid in doomed for rid in ids):
                store.read_segment(run_id, seg)  # DlqChecksumMismatch names segment and line


__all__ = ["apply_retention", "effective_flags", "verify_touched"]
