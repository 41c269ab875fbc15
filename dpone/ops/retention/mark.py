"""Retention, mark: decide record by record what may be deleted (``dpone ops retention plan``).

:func:`plan_retention` reads every run's index and acknowledgements and decides record by
record (a record's expiry is its segment's, which the index lists: the records of one segment
were written together). Protected, in this order of precedence:

* ``active``: the run is still ``open`` (being written, or dead and not yet recovered);
* ``evidence_pinned``: an evidence bundle under one of the ``evidence_dirs`` points at the
  run's index (``dlq.index_ref``); the whole run stays so the bundle keeps verifying;
* ``unexpired``: ``expires_at`` is after ``now``;
* ``pending_replay``: no acknowledgement, unless ``include_unacknowledged`` (which the plan
  says). Records that can never be acknowledged (of aborted runs, or not replayable) count
  here too: only the flag deletes them.

Everything else (expired and acknowledged, or expired and unacknowledged with the flag) is
planned for deletion, segment by segment (a :class:`~dpone.ops.retention.model.Cut`: the whole
segment, or the listed records of it). The plan pins a snapshot of what it looked at: per run
its status, the fingerprint of its records (the index's, or of the segment names of an open
run), its record count and the checksum of its acknowledgements, plus the set of
evidence-pinned runs. The sweep (:mod:`dpone.ops.retention.sweep`) decides again with the
same functions.
"""

from __future__ import annotations

import os
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import compress
from operator import not_
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from dpone.canonical import checksum, verify_checksum
from dpone.clock import format_timestamp
from dpone.dlq import fsio
from dpone.dlq.columns import columns_checksum
from dpone.dlq.index import DlqIndex
from dpone.dlq.layout import INDEX_FILE, RUNS_DIR
from dpone.dlq.segments import SEGMENT_FILE, SEGMENTS_DIR, SegmentEntry
from dpone.evidence.writer import EVIDENCE_FILE
from dpone.ops.retention.model import (
    Cut,
    RetentionEvidenceInvalid,
    RetentionPlan,
    RunDecision,
    RunSnapshot,
    acks_fingerprint,
    counts,
)

if TYPE_CHECKING:
    from dpone.dlq.store import DlqStore


def _kept(values: Sequence[str], mask: list[bool]) -> list[str]:
    return list(compress(values, mask))


@dataclass(slots=True)
class Seen:
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


def see(store: DlqStore) -> dict[str, Seen]:
    seen: dict[str, Seen] = {}
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
        seen[run_id] = Seen(snap, acks, index)
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
    seen = see(store)
    return RetentionPlan(
        directory=str(store.root.resolve()),
        now=moment,
        include_unacknowledged=include_unacknowledged,
        evidence_dirs=folders,
        pinned_runs=tuple(pinned),
        snapshot=tuple(entry.snapshot for entry in seen.values()),
        runs=decisions(seen, pinned, moment, include_unacknowledged),
        created_at=format_timestamp(store.now()),
    )


def decisions(
    seen: Mapping[str, Seen],
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
    entry: Seen, index: DlqIndex, now: str, include_unacknowledged: bool, *, after: bool = True
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


__all__ = ["Seen", "decisions", "pinned_runs", "plan_retention", "see", "segment_records"]
