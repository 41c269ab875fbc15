"""Retention of the dead-letter store: mark and sweep, plan first (SPEC §8).

Size (over 500 lines): plan and apply are one mark-and-sweep (apply re-derives what plan
decided), with their two documents.

:func:`plan_retention` marks. It reads every run's index and acknowledgements and decides
record by record (a record's expiry is its segment's, which the index lists: the records of one
segment were written together). Protected, in this order of precedence:

* ``active``: the run is still ``open`` (being written, or dead and not yet recovered);
* ``evidence_pinned``: an evidence bundle under one of the ``evidence_dirs`` points at the
  run's index (``dlq.index_ref``); the whole run stays so the bundle keeps verifying;
* ``unexpired``: ``expires_at`` is after ``now``;
* ``pending_replay``: no acknowledgement, unless ``include_unacknowledged`` (which the plan
  says). Records that can never be acknowledged (of aborted runs, or not replayable) count
  here too: only the flag deletes them.

Everything else (expired and acknowledged, or expired and unacknowledged with the flag) is
planned for deletion, segment by segment (a :class:`Cut`: the whole segment, or the listed
records of it). The plan pins a snapshot of what it looked at: per run its status, the
fingerprint of its records (the index's, or of the segment names of an open run), its record
count and the checksum of its acknowledgements, plus the set of evidence-pinned runs.

:func:`apply_retention` sweeps. It trusts the plan file for nothing but the wish: it refuses a
plan whose ``now`` is in the future or whose folder is another store, recomputes the snapshot
and refuses any drift (``DPONE_DLQ_RETENTION_SNAPSHOT_DRIFT``), and decides again from the
store itself, with the plan's ``now`` and flag, every protection (active, pinned, unexpired,
acknowledged): a record the plan deletes and the store protects is refused
(``DPONE_DLQ_RETENTION_PLAN_INVALID``) before anything is deleted. It deletes through
:meth:`DlqStore.delete_records`, which drops or compacts segments and replaces the run's index
atomically. An apply that was interrupted leaves runs whose index already lost the planned
records: applying the same plan again recognizes exactly that state (the run's planned
``after`` snapshot) and finishes the job.
"""

from __future__ import annotations

import os
from bisect import bisect_left, bisect_right
from collections.abc import Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from itertools import compress
from operator import not_
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

import orjson

from dpone import signing
from dpone.canonical import checksum, verify_checksum
from dpone.clock import format_timestamp
from dpone.dlq import fsio
from dpone.dlq.columns import columns_checksum
from dpone.dlq.index import DlqIndex
from dpone.dlq.layout import INDEX_FILE, RUNS_DIR
from dpone.dlq.model import parse_timestamp
from dpone.dlq.segments import SEGMENT_FILE, SEGMENTS_DIR, SegmentEntry
from dpone.errors import EXIT_CONFIG, DponeError, Stage
from dpone.logs import get_logger
from dpone.ops.retention_guard import check_plan_signature, effective_flags, verify_touched

if TYPE_CHECKING:
    from dpone.dlq.integrity import Finding
    from dpone.dlq.store import DlqStore

log = get_logger("dpone.retention")
_CHECK_WORKERS = 4

PLAN_SCHEMA = "dpone.dlq-retention-plan.v1"
RESULT_SCHEMA = "dpone.dlq-retention-result.v1"
#: The evidence bundle's file name (SPEC §7); ``dlq.index_ref`` is relative to its folder.
EVIDENCE_FILE = "data_contract_evidence.json"

Protection = Literal["active", "evidence_pinned", "unexpired", "pending_replay"]
PROTECTIONS: tuple[str, ...] = get_args(Protection)


class RetentionError(DponeError):
    code = "DPONE_DLQ_RETENTION_ERROR"
    stage: Stage = "retention"


class RetentionSnapshotDrift(RetentionError):
    """The store is not what the plan looked at; nothing was deleted."""

    code = "DPONE_DLQ_RETENTION_SNAPSHOT_DRIFT"


class RetentionPlanInvalid(RetentionError):
    code = "DPONE_DLQ_RETENTION_PLAN_INVALID"
    exit_code = EXIT_CONFIG


class RetentionEvidenceInvalid(RetentionError):
    """A bundle under a pin folder cannot be read: what it pins is unknown, so nothing goes."""

    code = "DPONE_DLQ_RETENTION_EVIDENCE_INVALID"


# --- the snapshot -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunSnapshot:
    """What retention saw of one run."""

    run_id: str
    status: str
    fingerprint: str
    record_count: int
    acks: str

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "fingerprint": self.fingerprint,
            "record_count": self.record_count,
            "acks": self.acks,
        }

    @classmethod
    def from_json(cls, doc: Any) -> RunSnapshot:
        if not isinstance(doc, dict) or set(doc) != {
            "run_id",
            "status",
            "fingerprint",
            "record_count",
            "acks",
        }:
            raise _invalid("a run snapshot")
        return cls(
            str(doc["run_id"]),
            str(doc["status"]),
            str(doc["fingerprint"]),
            int(doc["record_count"]),
            str(doc["acks"]),
        )


def acks_fingerprint(
    acks: Mapping[str, str], gone: Collection[str] = (), *, plain: bool = False
) -> str:
    """Checksum of the sorted ``[record_id, ack sha256]`` pairs (``acks``: id -> ack sha256),
    leaving out the records in ``gone``. ``plain``: ``acks`` is what the store verified
    (:meth:`DlqStore.ack_checksums`: record ids and ``sha256:`` checksums only)."""
    ids = sorted(acks)
    if gone:
        ids = list(compress(ids, list(map(not_, map(gone.__contains__, ids)))))
    return columns_checksum(ids, list(map(acks.__getitem__, ids)), plain=plain)


def _kept(values: Sequence[str], mask: list[bool]) -> list[str]:
    return list(compress(values, mask))


def snapshot_fingerprint(runs: Iterable[RunSnapshot], pinned: Iterable[str]) -> str:
    return checksum({"runs": [run.to_json() for run in runs], "pinned_runs": sorted(set(pinned))})


@dataclass(slots=True)
class _Seen:
    """One run as read now: its snapshot and acknowledgements (kept to judge a resume)."""

    snapshot: RunSnapshot
    acks: dict[str, str] = field(default_factory=dict)  # record id -> its ack's sha256
    index: DlqIndex | None = None


def _open_names(store: DlqStore, run_id: str) -> list[str]:
    """The segment names of an open run (listed, not read: a writer may be at work)."""
    where = f"{RUNS_DIR}/{run_id}/{SEGMENTS_DIR}"
    if not (store.root / RUNS_DIR / run_id / SEGMENTS_DIR).exists():
        return []
    with store.open_path(RUNS_DIR, run_id, SEGMENTS_DIR) as fd:
        return sorted(e.name for e in fsio.entries(fd, where) if SEGMENT_FILE.fullmatch(e.name))


def _see(store: DlqStore) -> dict[str, _Seen]:
    seen: dict[str, _Seen] = {}
    for run_id in store.run_ids():
        index = store.read_index(run_id)
        acks = store.ack_checksums(run_id)
        if index.status == "open":
            names = _open_names(store, run_id)
            snap = RunSnapshot(
                run_id, "open", checksum(names), len(names), acks_fingerprint(acks, plain=True)
            )
        else:
            snap = RunSnapshot(
                run_id,
                index.status,
                index.fingerprint,
                index.record_count,
                acks_fingerprint(acks, plain=True),
            )
        seen[run_id] = _Seen(snap, acks, index)
    return seen


def pinned_runs(store: DlqStore, evidence_dirs: Sequence[str]) -> list[str]:
    """Runs of this store whose index an evidence bundle under ``evidence_dirs`` points at."""
    runs_dir = (store.root / RUNS_DIR).resolve()
    pinned: set[str] = set()
    for folder in evidence_dirs:
        base = Path(folder)
        if not base.is_dir():
            raise RetentionEvidenceInvalid(
                f"the evidence folder {folder} does not exist",
                fixes=("pass folders that hold the evidence bundles to keep (--pin-evidence)",),
            )
        for path in sorted(base.rglob(EVIDENCE_FILE)):
            ref = _index_ref(path, base)
            if ref is None:
                continue
            target = (path.parent / ref).resolve()
            if target.name == INDEX_FILE and target.parent.parent == runs_dir:
                pinned.add(target.parent.name)
    return sorted(pinned)


def _index_ref(path: Path, base: Path) -> str | None:
    shown = os.path.relpath(path, base)
    try:
        doc = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        raise RetentionEvidenceInvalid(f"the evidence bundle {shown} cannot be read") from None
    if not isinstance(doc, dict) or not verify_checksum(doc):
        raise RetentionEvidenceInvalid(
            f"the evidence bundle {shown} does not verify; what it pins is unknown",
            fixes=("restore the bundle, or move it out of the pinned folder",),
        )
    dlq = doc.get("dlq")
    ref = dlq.get("index_ref") if isinstance(dlq, dict) else None
    return ref if isinstance(ref, str) else None


# --- the plan -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cut:
    """What the plan deletes from one segment: all of it (``whole``) or ``record_ids``."""

    segment: str
    sha256: str
    expires_at: str
    whole: bool
    delete_count: int
    acknowledged: int
    record_ids: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "segment": self.segment,
            "sha256": self.sha256,
            "expires_at": self.expires_at,
            "whole": self.whole,
            "delete_count": self.delete_count,
            "acknowledged": self.acknowledged,
            "record_ids": list(self.record_ids),
        }

    @classmethod
    def from_json(cls, doc: Any) -> Cut:
        return cls(
            str(doc["segment"]),
            str(doc["sha256"]),
            str(doc["expires_at"]),
            bool(doc["whole"]),
            int(doc["delete_count"]),
            int(doc["acknowledged"]),
            tuple(str(r) for r in doc["record_ids"]),
        )


@dataclass(frozen=True, slots=True)
class RunDecision:
    """What the plan does with one run; ``after`` is its snapshot once the deletes are done."""

    run_id: str
    status: str
    record_count: int
    protected: Mapping[str, int]
    delete: tuple[Cut, ...] = ()
    after: RunSnapshot | None = None

    @property
    def delete_count(self) -> int:
        return sum(cut.delete_count for cut in self.delete)

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "record_count": self.record_count,
            "protected": {name: self.protected.get(name, 0) for name in PROTECTIONS},
            "delete": [d.to_json() for d in self.delete],
            "after": None if self.after is None else self.after.to_json(),
        }


@dataclass(frozen=True, slots=True)
class RetentionPlan:
    """``dpone.dlq-retention-plan.v1``: what to delete, and the snapshot it was decided on."""

    directory: str
    now: str
    include_unacknowledged: bool
    evidence_dirs: tuple[str, ...]
    pinned_runs: tuple[str, ...]
    snapshot: tuple[RunSnapshot, ...]
    runs: tuple[RunDecision, ...]
    created_at: str

    @property
    def snapshot_fingerprint(self) -> str:
        return snapshot_fingerprint(self.snapshot, self.pinned_runs)

    @property
    def delete_count(self) -> int:
        return sum(run.delete_count for run in self.runs)

    def protected(self) -> dict[str, int]:
        return {name: sum(run.protected.get(name, 0) for run in self.runs) for name in PROTECTIONS}

    def body(self) -> dict[str, Any]:
        """Everything but ``plan_id`` and ``created_at``: what ``plan_id`` is the checksum of."""
        return {
            "schema": PLAN_SCHEMA,
            "dir": self.directory,
            "now": self.now,
            "include_unacknowledged": self.include_unacknowledged,
            "evidence_dirs": list(self.evidence_dirs),
            "pinned_runs": list(self.pinned_runs),
            "snapshot": {
                "fingerprint": self.snapshot_fingerprint,
                "runs": [run.to_json() for run in self.snapshot],
            },
            "runs": [run.to_json() for run in self.runs],
            "totals": {
                "records": sum(run.record_count for run in self.runs),
                "delete": self.delete_count,
                "protected": self.protected(),
            },
        }

    def to_json(self) -> dict[str, Any]:
        body = self.body()
        # Signed when a key is configured: apply refuses an unsigned plan then.
        return signing.sign({"plan_id": checksum(body), **body, "created_at": self.created_at})

    @classmethod
    def from_json(cls, doc: Any) -> RetentionPlan:
        """A plan read back; its ``plan_id`` must be the checksum of its body."""
        if not isinstance(doc, dict) or doc.get("schema") != PLAN_SCHEMA:
            raise _invalid("the document")
        try:
            snapshot = tuple(RunSnapshot.from_json(r) for r in doc["snapshot"]["runs"])
            runs = tuple(_decision_from_json(r) for r in doc["runs"])
            plan = cls(
                directory=str(doc["dir"]),
                now=str(doc["now"]),
                include_unacknowledged=bool(doc["include_unacknowledged"]),
                evidence_dirs=tuple(str(d) for d in doc["evidence_dirs"]),
                pinned_runs=tuple(str(r) for r in doc["pinned_runs"]),
                snapshot=snapshot,
                runs=runs,
                created_at=str(doc["created_at"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            raise _invalid("the document") from None
        body = plan.body()
        expected = {
            k: v for k, v in doc.items() if k not in ("plan_id", "created_at", signing.MEMBER)
        }
        if doc.get("plan_id") != checksum(body) or expected != body:
            raise RetentionPlanInvalid(
                "the retention plan was changed after it was made (its plan_id does not match)",
                fixes=("make a new plan with `dpone ops retention plan`",),
            )
        return plan


def counts(**found: int) -> dict[str, int]:
    """Protected records per reason, every reason present (0 when none)."""
    unknown = set(found) - set(PROTECTIONS)
    if unknown:
        raise ValueError(f"unknown protection {sorted(unknown)[0]}")
    return {name: found.get(name, 0) for name in PROTECTIONS}


def _invalid(what: str) -> RetentionPlanInvalid:
    return RetentionPlanInvalid(f"{what} is not a valid {PLAN_SCHEMA} document")


def _decision_from_json(doc: Any) -> RunDecision:
    after = doc["after"]
    return RunDecision(
        run_id=str(doc["run_id"]),
        status=str(doc["status"]),
        record_count=int(doc["record_count"]),
        protected=counts(**{str(k): int(v) for k, v in doc["protected"].items()}),
        delete=tuple(Cut.from_json(d) for d in doc["delete"]),
        after=None if after is None else RunSnapshot.from_json(after),
    )


def plan_retention(
    store: DlqStore,
    now: datetime,
    *,
    include_unacknowledged: bool = False,
    evidence_dirs: Sequence[str | os.PathLike[str]] = (),
) -> RetentionPlan:
    """Mark: decide, record by record, what may go (see the module docstring)."""
    moment = format_timestamp(now)
    folders = tuple(str(Path(d).resolve()) for d in evidence_dirs)
    pinned = pinned_runs(store, folders)
    seen = _see(store)
    return RetentionPlan(
        directory=str(store.root.resolve()),
        now=moment,
        include_unacknowledged=include_unacknowledged,
        evidence_dirs=folders,
        pinned_runs=tuple(pinned),
        snapshot=tuple(entry.snapshot for entry in seen.values()),
        runs=_decisions(seen, pinned, moment, include_unacknowledged),
        created_at=format_timestamp(store.now()),
    )


def _decisions(
    seen: Mapping[str, _Seen],
    pinned: Sequence[str],
    now: str,
    include_unacknowledged: bool,
    *,
    after: bool = True,
) -> tuple[RunDecision, ...]:
    decisions = []
    for run_id, entry in seen.items():
        snap = entry.snapshot
        if snap.status == "open" or entry.index is None:
            protected = counts(active=snap.record_count)
            decisions.append(RunDecision(run_id, "open", snap.record_count, protected))
        elif run_id in pinned:
            protected = counts(evidence_pinned=snap.record_count)
            decisions.append(RunDecision(run_id, snap.status, snap.record_count, protected))
        else:
            decisions.append(_decide(entry, entry.index, now, include_unacknowledged, after=after))
    return tuple(decisions)


def segment_records(index: DlqIndex) -> list[tuple[SegmentEntry, Sequence[str]]]:
    """Each listed segment with the ids of the index's records in its id range."""
    ids = index.record_ids
    out: list[tuple[SegmentEntry, Sequence[str]]] = []
    for seg in index.segments:
        lo = bisect_left(ids, seg.first_record_id)
        hi = bisect_right(ids, seg.last_record_id)
        out.append((seg, ids[lo:hi]))
    return out


def _decide(
    entry: _Seen, index: DlqIndex, now: str, include_unacknowledged: bool, *, after: bool = True
) -> RunDecision:
    """What may go of one ended run; ``after``: with the run's snapshot once it went."""
    snap = entry.snapshot
    acked_ = entry.acks.__contains__
    protected = counts()
    cuts: list[Cut] = []
    gone: set[str] = set()
    for seg, ids in segment_records(index):
        if seg.expires_at > now:
            protected["unexpired"] += len(ids)
            continue
        doomed = list(ids) if include_unacknowledged else list(compress(ids, map(acked_, ids)))
        protected["pending_replay"] += len(ids) - len(doomed)
        if not doomed:
            continue
        whole = len(doomed) == seg.record_count == len(ids)
        acked = sum(map(acked_, doomed)) if include_unacknowledged else len(doomed)
        cuts.append(
            Cut(
                seg.name,
                seg.sha256,
                seg.expires_at,
                whole,
                len(doomed),
                acked,
                () if whole else tuple(doomed),
            )
        )
        gone.update(doomed)
    snapshot = None
    if gone and after:
        keep = list(map(not_, map(gone.__contains__, index.record_ids)))
        snapshot = RunSnapshot(
            snap.run_id,
            snap.status,
            # Sorted by id, ULIDs and sha256: checksums (the index verified): plain pairs.
            columns_checksum(
                _kept(index.record_ids, keep), _kept(index.record_checksums, keep), plain=True
            ),
            snap.record_count - len(gone),
            acks_fingerprint(entry.acks, gone, plain=True),
        )
    cuts_ = tuple(cuts)
    return RunDecision(snap.run_id, snap.status, snap.record_count, protected, cuts_, snapshot)


# --- the sweep ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunSweep:
    run_id: str
    deleted: int
    record_count: int
    index_fingerprint: str
    resumed: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "deleted": self.deleted,
            "record_count": self.record_count,
            "index_fingerprint": self.index_fingerprint,
            "resumed": self.resumed,
        }


@dataclass(frozen=True, slots=True)
class RetentionResult:
    """``dpone.dlq-retention-result.v1``: what an apply deleted, and the verify afterwards."""

    plan_id: str
    directory: str
    runs: tuple[RunSweep, ...]
    deleted_acks: int
    findings: tuple[Finding, ...]
    applied_at: str

    @property
    def deleted(self) -> int:
        return sum(run.deleted for run in self.runs)

    @property
    def clean(self) -> bool:
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": RESULT_SCHEMA,
            "plan_id": self.plan_id,
            "dir": self.directory,
            "deleted_records": self.deleted,
            "deleted_acks": self.deleted_acks,
            "runs": [run.to_json() for run in self.runs],
            "verify": {"clean": self.clean, "findings": [f.to_json() for f in self.findings]},
            "applied_at": self.applied_at,
        }


def _drift(message: str) -> RetentionSnapshotDrift:
    return RetentionSnapshotDrift(
        f"the store changed since the plan was made: {message}; nothing was deleted",
        fixes=("make a new plan with `dpone ops retention plan` and apply that one",),
    )


def _resumable(plan: RetentionPlan, seen: Mapping[str, _Seen], pinned: Sequence[str]) -> set[str]:
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
    plan's are never trusted alone (``ops/retention_guard.py``)."""
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
    seen = _see(store)
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
    seen: Mapping[str, _Seen],
    pinned: Sequence[str],
    resumed: set[str],
    include_unacknowledged: bool,
) -> dict[str, set[str]]:
    """The record ids to delete per run, each one re-judged from the store, not the plan.

    The plan names segments and records; the store decides again, with the plan's ``now``
    and flag, whether each may go. Anything the store protects now refuses the whole plan.
    """
    fresh = {
        d.run_id: d for d in _decisions(seen, pinned, plan.now, include_unacknowledged, after=False)
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


def load_plan(path: Path, *, require_signature: bool = False) -> RetentionPlan:
    """A plan file written by ``dpone ops retention plan --output``, schema- and
    signature-checked (``require_signature``: an unsigned plan is refused)."""
    from dpone.published import schema_errors

    try:
        doc = orjson.loads(path.read_bytes())
    except OSError as exc:
        raise RetentionPlanInvalid(
            f"cannot read the retention plan {path.name} ({type(exc).__name__})"
        ) from None
    except orjson.JSONDecodeError:
        raise RetentionPlanInvalid(f"the retention plan {path.name} is not JSON") from None
    errors = schema_errors(doc, PLAN_SCHEMA)
    if errors:
        raise RetentionPlanInvalid(f"the retention plan {path.name} breaks its schema: {errors[0]}")
    check_plan_signature(doc, path.name, require=require_signature)
    return RetentionPlan.from_json(doc)


__all__ = [
    "PLAN_SCHEMA",
    "PROTECTIONS",
    "RESULT_SCHEMA",
    "Cut",
    "Protection",
    "RetentionError",
    "RetentionEvidenceInvalid",
    "RetentionPlan",
    "RetentionPlanInvalid",
    "RetentionResult",
    "RetentionSnapshotDrift",
    "RunDecision",
    "RunSnapshot",
    "RunSweep",
    "acks_fingerprint",
    "apply_retention",
    "load_plan",
    "pinned_runs",
    "plan_retention",
    "segment_records",
    "snapshot_fingerprint",
]
