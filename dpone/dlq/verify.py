"""Whole-store integrity check and the safe repairs (``dpone ops dlq verify [--repair]``).

Verify reads everything and changes nothing. Each problem becomes a :class:`Finding` with a
stable code (listed in :data:`FINDING_CODES`). A run whose writer is alive is in progress and
only its index is checked.

Repair fixes only what a crash can leave behind, never what tampering leaves behind:
an ``open`` run whose writer is gone (or a run folder without an index) is closed as
``aborted`` with an index rebuilt from the records that verify; torn record files of such a
run (empty: the crash came between create and write) are removed; temporary files of an
interrupted index replace or run creation are removed. A record, index or acknowledgement
that does not verify stays exactly as it is, and stays a finding.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dpone.dlq import fsio
from dpone.dlq.errors import DlqError, DlqIndexMissing, DlqPathEscape, DlqRunNotFound
from dpone.dlq.ids import check_identifier, is_identifier
from dpone.dlq.index import DlqIndex
from dpone.dlq.store import (
    ACKS_DIR,
    INDEX_FILE,
    LOCK_FILE,
    MAX_ACK_BYTES,
    NEW_RUN_PREFIX,
    RECORD_FILE,
    RECORDS_DIR,
    RUNS_DIR,
    RecordScan,
    RunHeader,
    name_exists,
    parse_ack,
    read_index_at,
    record_where,
    release_lock,
    scan_records,
    take_lock,
    writer_alive,
)

if TYPE_CHECKING:
    from dpone.dlq.store import DlqStore

RUN_ABANDONED = "DPONE_DLQ_RUN_ABANDONED"
TORN_RECORD = "DPONE_DLQ_TORN_RECORD"
STRAY_FILE = "DPONE_DLQ_STRAY_FILE"
ACK_ORPHAN = "DPONE_DLQ_ACK_ORPHAN"
DRIFT = "DPONE_DLQ_INDEX_DRIFT"

FINDING_CODES: Mapping[str, str] = {
    "DPONE_DLQ_CHECKSUM_MISMATCH": "a record does not verify (content changed, or not JSON)",
    "DPONE_DLQ_RECORD_INVALID": "a record verifies but breaks the dpone.dlq.v1 contract",
    TORN_RECORD: "an empty record file left by a crash in an unfinished run (repair removes it)",
    "DPONE_DLQ_INDEX_MISSING": "a run folder without index.json (repair closes the run as aborted)",
    "DPONE_DLQ_INDEX_CHECKSUM_MISMATCH": "a run index does not verify",
    "DPONE_DLQ_INDEX_INVALID": "a run index verifies but breaks the dpone.dlq-index.v1 contract",
    DRIFT: "the records on disk are not the records the index lists",
    RUN_ABANDONED: "an open run whose writer is gone (repair closes it as aborted)",
    "DPONE_DLQ_ACK_CHECKSUM_MISMATCH": "an acknowledgement does not verify",
    "DPONE_DLQ_ACK_INVALID": "an acknowledgement breaks the dpone.dlq-replay-ack.v1 contract",
    ACK_ORPHAN: "an acknowledgement of a record the run's index does not list",
    "DPONE_DLQ_ACK_MISMATCH": "an acknowledgement names another checksum than the record's",
    "DPONE_DLQ_PATH_ESCAPE": "a symbolic link or special file inside the store",
    STRAY_FILE: "a file the store did not write (temporary leftovers are removed by repair)",
}


@dataclass(frozen=True, slots=True)
class Finding:
    """One integrity problem. ``path`` is relative to the store's root."""

    code: str
    message: str
    run_id: str | None = None
    record_id: str | None = None
    path: str | None = None
    repairable: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": self.message,
            "run_id": self.run_id,
            "record_id": self.record_id,
            "path": self.path,
            "repairable": self.repairable,
        }


def _of(err: DlqError, run_id: str | None, record_id: str | None, path: str) -> Finding:
    return Finding(err.code, err.message, run_id, record_id, path)


def verify_store(store: DlqStore, run_id: str | None = None) -> list[Finding]:
    """Every finding of the store, or of one run (its records, index and acknowledgements)."""
    if run_id is not None:
        check_identifier(run_id, "run id")
        with store.open_path(RUNS_DIR, missing=DlqRunNotFound) as runs_fd:
            if not _exists_quietly(runs_fd, run_id):
                raise DlqRunNotFound(f"{RUNS_DIR}/{run_id} does not exist")
        run_ids = [run_id]
    else:
        run_ids = []
    findings: list[Finding] = []
    if run_id is None and not store.exists():
        return findings  # nothing written yet: nothing to distrust
    if run_id is None:
        findings.extend(_verify_top(store))
        run_ids = _run_names(store, findings)
    for name in run_ids:
        findings.extend(_verify_run(store, name))
    findings.extend(_verify_acks(store, run_id))
    return findings


def _exists_quietly(dir_fd: int, name: str) -> bool:
    try:
        return name_exists(dir_fd, name, name)
    except DlqError:
        return True  # a symlink: it exists, and the run check will report it


def _verify_top(store: DlqStore) -> list[Finding]:
    findings = []
    with store.open_path() as root_fd:
        for name in (RUNS_DIR, ACKS_DIR):
            try:
                name_exists(root_fd, name, name)
            except DlqError as err:
                findings.append(_of(err, None, None, name))
    return findings


def _run_names(store: DlqStore, findings: list[Finding]) -> list[str]:
    if any(f.path == RUNS_DIR for f in findings) or not (store.root / RUNS_DIR).is_dir():
        return []
    names = []
    with store.open_path(RUNS_DIR) as runs_fd:
        for item in sorted(fsio.entries(runs_fd, RUNS_DIR), key=lambda e: e.name):
            where = f"{RUNS_DIR}/{item.name}"
            if item.name.startswith(NEW_RUN_PREFIX) and not item.is_symlink():
                if not _creation_in_progress(runs_fd, item.name, where):
                    findings.append(
                        Finding(
                            STRAY_FILE,
                            f"{where} is left over from a run creation that died",
                            path=where,
                            repairable=True,
                        )
                    )
            elif not is_identifier(item.name):
                findings.append(Finding(STRAY_FILE, f"{where} is not a run folder", path=where))
            else:
                names.append(item.name)
    return names


def _creation_in_progress(runs_fd: int, name: str, where: str) -> bool:
    try:
        tmp_fd, _ = fsio.open_dir(runs_fd, name, where)
    except DlqError:
        return False
    try:
        return writer_alive(tmp_fd, where)
    finally:
        os.close(tmp_fd)


def _verify_run(store: DlqStore, run_id: str) -> list[Finding]:
    where = f"{RUNS_DIR}/{run_id}"
    findings: list[Finding] = []
    try:
        with store.open_path(RUNS_DIR, run_id) as run_fd:
            index: DlqIndex | None = None
            # A run that never ended: its records may include a torn file of the crash.
            unfinished = False
            try:
                index = read_index_at(run_fd, run_id)
            except DlqIndexMissing as err:
                unfinished = True
                findings.append(
                    Finding(err.code, err.message, run_id, None, f"{where}/{INDEX_FILE}", True)
                )
            except DlqError as err:
                findings.append(_of(err, run_id, None, f"{where}/{INDEX_FILE}"))
            if index is not None and index.status == "open" and writer_alive(run_fd, where):
                return findings  # in progress: its records are the writer's business
            if index is not None and index.status == "open":
                unfinished = True
                findings.append(
                    Finding(
                        RUN_ABANDONED,
                        f"run {run_id} is open but its writer is gone",
                        run_id,
                        None,
                        where,
                        True,
                    )
                )
            findings.extend(_run_folder_findings(run_fd, run_id))
            scan = _scan(run_fd, run_id, findings)
            if scan is None:
                return findings
            findings.extend(_record_findings(scan, run_id, unfinished))
            if index is not None and index.status != "open":
                findings.extend(_drift(scan, index, run_id))
    except DlqError as err:
        findings.append(_of(err, run_id, None, where))
    return findings


def _run_folder_findings(run_fd: int, run_id: str) -> list[Finding]:
    findings = []
    for item in fsio.entries(run_fd, f"{RUNS_DIR}/{run_id}"):
        name = item.name
        where = f"{RUNS_DIR}/{run_id}/{name}"
        if name in (INDEX_FILE, LOCK_FILE, RECORDS_DIR):
            if name == LOCK_FILE and item.is_symlink():
                findings.append(_of(fsio.escape(where), run_id, None, where))
            continue
        temp = name.startswith(f".{INDEX_FILE}.tmp-") and not item.is_symlink()
        message = (
            f"{where} is left over from an interrupted index write"
            if temp
            else f"{where} is not a file the store writes"
        )
        findings.append(Finding(STRAY_FILE, message, run_id, None, where, temp))
    return findings


def _scan(run_fd: int, run_id: str, findings: list[Finding]) -> RecordScan | None:
    where = f"{RUNS_DIR}/{run_id}/{RECORDS_DIR}"
    try:
        records_fd, _ = fsio.open_dir(run_fd, RECORDS_DIR, where)
    except DlqError as err:
        if isinstance(err, DlqPathEscape):
            findings.append(_of(err, run_id, None, where))
            return None
        return RecordScan()  # no records folder: as if empty (drift reports what is missing)
    try:
        return scan_records(records_fd, run_id, remove_torn=False)
    finally:
        os.close(records_fd)


def _stem(name: str) -> str | None:
    match = RECORD_FILE.match(name)
    return match[1] if match else None


def _record_findings(scan: RecordScan, run_id: str, unfinished: bool) -> list[Finding]:
    findings = []
    for name in scan.torn:
        where = record_where(run_id, name)
        if unfinished:
            message = f"{where} is empty: a crash came between its creation and its write"
            findings.append(Finding(TORN_RECORD, message, run_id, _stem(name), where, True))
        else:
            message = f"{where} does not verify: it is empty"
            findings.append(
                Finding("DPONE_DLQ_CHECKSUM_MISMATCH", message, run_id, _stem(name), where)
            )
    for name, err in scan.bad:
        findings.append(_of(err, run_id, _stem(name), record_where(run_id, name)))
    for name in scan.stray:
        where = record_where(run_id, name)
        findings.append(Finding(STRAY_FILE, f"{where} is not a record file", run_id, None, where))
    return findings


def _drift(scan: RecordScan, index: DlqIndex, run_id: str) -> list[Finding]:
    unreadable = {_stem(name) for name in scan.torn} | {_stem(name) for name, _ in scan.bad}
    on_disk = {rid: record.sha256 for rid, record in scan.valid.items()}
    findings = []
    for item in index.entries:
        where = record_where(run_id, f"{item.record_id}.json")
        if item.record_id in unreadable:
            continue  # reported already, with its own code
        if item.record_id not in on_disk:
            message = f"{where} is in the index but not on disk"
            findings.append(Finding(DRIFT, message, run_id, item.record_id, where))
        elif on_disk[item.record_id] != item.sha256:
            message = f"{where} verifies but differs from its index entry"
            findings.append(Finding(DRIFT, message, run_id, item.record_id, where))
    listed = {item.record_id for item in index.entries}
    for rid in sorted(on_disk.keys() - listed):
        where = record_where(run_id, f"{rid}.json")
        message = f"{where} is on disk but not in the index"
        findings.append(Finding(DRIFT, message, run_id, rid, where))
    return findings


def _verify_acks(store: DlqStore, run_id: str | None) -> list[Finding]:
    if not (store.root / ACKS_DIR).is_dir() or (store.root / ACKS_DIR).is_symlink():
        return []
    findings: list[Finding] = []
    with store.open_path(ACKS_DIR) as acks_fd:
        for item in sorted(fsio.entries(acks_fd, ACKS_DIR), key=lambda e: e.name):
            name = item.name
            where = f"{ACKS_DIR}/{name}"
            if run_id is not None and name != run_id:
                continue
            if item.is_symlink() or not item.is_dir(follow_symlinks=False):
                findings.append(_of(fsio.escape(where), name, None, where))
                continue
            if not is_identifier(name):
                findings.append(Finding(STRAY_FILE, f"{where} is not an ack folder", path=where))
                continue
            findings.extend(_verify_run_acks(store, acks_fd, name))
    return findings


def _verify_run_acks(store: DlqStore, acks_fd: int, run_id: str) -> list[Finding]:
    findings: list[Finding] = []
    try:
        checksums: dict[str, str] | None = store.read_index(run_id).checksums()
    except DlqError:
        checksums = None  # the run's own check reports why
    folder = f"{ACKS_DIR}/{run_id}"
    fd, _ = fsio.open_dir(acks_fd, run_id, folder)
    try:
        for item in sorted(fsio.entries(fd, folder), key=lambda e: e.name):
            where = f"{folder}/{item.name}"
            record_id = _stem(item.name)
            if item.is_symlink() or not item.is_file(follow_symlinks=False):
                findings.append(_of(fsio.escape(where), run_id, record_id, where))
                continue
            if record_id is None:
                findings.append(
                    Finding(STRAY_FILE, f"{where} is not an ack file", run_id, None, where)
                )
                continue
            try:
                data = fsio.read_file(fd, item.name, where, MAX_ACK_BYTES) or b""
                ack = parse_ack(data, run_id, record_id, where)
            except DlqError as err:
                findings.append(_of(err, run_id, record_id, where))
                continue
            if checksums is None or record_id not in checksums:
                message = f"{where} acknowledges a record the run's index does not list"
                findings.append(Finding(ACK_ORPHAN, message, run_id, record_id, where))
            elif checksums[record_id] != ack.record_sha256:
                message = f"{where} names another checksum than the record's"
                findings.append(
                    Finding("DPONE_DLQ_ACK_MISMATCH", message, run_id, record_id, where)
                )
    finally:
        os.close(fd)
    return findings


# --- repair -------------------------------------------------------------------------------------


def repair_store(store: DlqStore, run_id: str | None = None) -> list[Finding]:
    """Apply the safe repairs; the findings they resolved."""
    findings = verify_store(store, run_id)
    repaired: list[Finding] = []
    by_run: dict[str, list[Finding]] = {}
    for finding in findings:
        if finding.repairable and finding.run_id is not None:
            by_run.setdefault(finding.run_id, []).append(finding)
    for name, found in by_run.items():
        repaired.extend(_repair_run(store, name, found))
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
    repaired = []
    with store.open_path(RUNS_DIR, run_id) as run_fd:
        temps = [f for f in found if f.code == STRAY_FILE]
        for finding in temps:
            fsio.unlink_quietly(run_fd, _tail(finding.path))
        if temps:
            fsio.fsync_fd(run_fd, where)
            repaired.extend(temps)
        crash = [f for f in found if f.code != STRAY_FILE]
        if not crash:
            return repaired
        lock_fd = take_lock(run_fd, where, create=True)
        if lock_fd is None:
            return repaired  # a writer came back to life meanwhile: leave it alone
        try:
            try:
                index = read_index_at(run_fd, run_id)
            except DlqIndexMissing:
                store.rebuild_aborted(run_fd, run_id, "index_missing")
            else:
                if index.status != "open":
                    return repaired
                store.rebuild_aborted(run_fd, RunHeader.of(index), "writer_gone")
            repaired.extend(crash)
        finally:
            release_lock(run_fd, lock_fd)
    return repaired


__all__ = ["FINDING_CODES", "Finding", "repair_store", "verify_store"]
