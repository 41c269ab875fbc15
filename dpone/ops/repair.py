"""The safe repairs of a DLQ store (``dpone ops dlq verify --repair``).

Repair fixes only what a crash can leave behind, never what tampering leaves behind (with a
signing key, an index that is unsigned or does not verify is never rebuilt, and so never
signed): an ``open`` run whose writer is gone (or a run folder without an index) is closed as
``aborted`` with an index rebuilt from the segments that verify; temporary files of an
interrupted segment publish, index replace or run creation are removed; a segment an ended
run no longer lists and that holds nothing its index needs (what an interrupted retention
compaction leaves) is removed; an acknowledgement of a record the run no longer lists is
removed. A segment, index or acknowledgement that does not verify stays exactly as it is,
and stays a finding of :func:`dpone.ops.verification.verify_store`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from dpone import durable
from dpone.dlq import fsio
from dpone.dlq.compaction import remove_leftovers
from dpone.dlq.errors import DlqIndexMissing, DlqIndexSignatureInvalid
from dpone.dlq.indexfile import read_index_at
from dpone.dlq.integrity import ACK_ORPHAN, STRAY_FILE, TORN_SEGMENT, UNLISTED, Finding
from dpone.dlq.layout import RUNS_DIR
from dpone.dlq.lock import release_lock, take_lock
from dpone.dlq.rundir import RunHeader
from dpone.dlq.segments import SEGMENTS_DIR
from dpone.ops.verification import verify_store

if TYPE_CHECKING:
    from dpone.dlq.store import DlqStore


def repair_store(store: DlqStore, run_id: str | None = None) -> list[Finding]:
    """Apply the safe repairs; the findings they resolved."""
    findings = verify_store(store, run_id)
    repaired: list[Finding] = []
    by_run: dict[str, list[Finding]] = {}
    for finding in findings:
        if finding.repairable and finding.run_id is not None:
            by_run.setdefault(finding.run_id, []).append(finding)
    for name, found in by_run.items():
        orphans = [f for f in found if f.code == ACK_ORPHAN]
        runs = [f for f in found if f.code != ACK_ORPHAN]
        if runs:
            repaired.extend(_repair_run(store, name, runs))
        if orphans:
            store.remove_acks(name, {f.record_id for f in orphans if f.record_id is not None})
            repaired.extend(orphans)
    if run_id is None and any(f.repairable and f.run_id is None for f in findings):
        removed = set(store.remove_stale_new_runs())
        repaired.extend(
            f for f in findings if f.repairable and f.run_id is None and _tail(f.path) in removed
        )
    return repaired


def _tail(path: str | None) -> str:
    return (path or "").rsplit("/", 1)[-1]


def _repair_run(store: DlqStore, run_id: str, found: list[Finding]) -> list[Finding]:
    where = f"{RUNS_DIR}/{run_id}"
    repaired: list[Finding] = []
    with store.open_path(RUNS_DIR, run_id) as run_fd:
        lock_fd = take_lock(run_fd, where, create=True)
        if lock_fd is None:
            return repaired  # a writer came back to life meanwhile: leave it alone
        try:
            temps = [f for f in found if f.code == STRAY_FILE]
            for finding in temps:
                durable.unlink_quietly(run_fd, _tail(finding.path))
            if temps:
                fsio.fsync_fd(run_fd, where)
                repaired.extend(temps)
            try:
                # The aborted index repair writes is signed: only from an index that verifies.
                index = read_index_at(run_fd, run_id, require_signature=store.signatures_required)
            except DlqIndexMissing:
                if store.signatures_required:
                    return repaired
                store.rebuild_aborted(run_fd, run_id, "index_missing")
                return repaired + [f for f in found if f.code != STRAY_FILE]
            except DlqIndexSignatureInvalid:
                return repaired  # a forged or unsigned index stays as it is, and a finding
            if index.status == "open":
                store.rebuild_aborted(run_fd, RunHeader.of(index), "writer_gone")
                return repaired + [f for f in found if f.code != STRAY_FILE]
            segments_fd, _ = fsio.open_dir(run_fd, SEGMENTS_DIR, f"{where}/{SEGMENTS_DIR}")
            try:
                removed = set(remove_leftovers(segments_fd, run_id, index))
            finally:
                os.close(segments_fd)
            repaired.extend(
                f
                for f in found
                if f.code == TORN_SEGMENT or (f.code == UNLISTED and _tail(f.path) in removed)
            )
        finally:
            release_lock(run_fd, lock_fd)
    return repaired


__all__ = ["repair_store"]
