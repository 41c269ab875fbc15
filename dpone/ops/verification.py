"""Whole-store integrity check (``dpone ops dlq verify``).

Verify reads everything and changes nothing. Each problem becomes a :class:`Finding` with a
stable code (listed in :data:`FINDING_CODES`), the path of the file relative to the store's
root and, for a segment or ack line, the line number. A run whose writer is alive is in
progress and only its index is checked.

The findings marked ``repairable`` are what a crash leaves behind: :mod:`dpone.ops.repair`
fixes them, and nothing else.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dpone.dlq import fsio
from dpone.dlq.acks import ACK_FILE, MAX_ACK_SEGMENT_BYTES, parse_ack_line
from dpone.dlq.compaction import leftover_segments
from dpone.dlq.errors import (
    DlqError,
    DlqIndexMissing,
    DlqIndexSignatureInvalid,
    DlqPathEscape,
    DlqRunNotFound,
)
from dpone.dlq.fsio import check_identifier
from dpone.dlq.index import DlqIndex
from dpone.dlq.indexfile import read_index_at
from dpone.dlq.integrity import (
    ACK_ORPHAN,
    CHECKSUM,
    DRIFT,
    RUN_ABANDONED,
    STRAY_FILE,
    TORN_SEGMENT,
    UNLISTED,
    Finding,
    finding_of,
    structural,
)
from dpone.dlq.layout import (
    ACKS_DIR,
    INDEX_FILE,
    LOCK_FILE,
    NEW_RUN_PREFIX,
    RUNS_DIR,
    segment_where,
)
from dpone.dlq.lock import name_exists, writer_alive
from dpone.dlq.scan import SegmentScan, scan_segments
from dpone.dlq.segments import SEGMENTS_DIR
from dpone.ids import is_identifier
from dpone.records import frozen

if TYPE_CHECKING:
    from dpone.dlq.store import DlqStore

FINDING_CODES: Mapping[str, str] = {
    CHECKSUM: "a segment or one of its lines does not verify (content changed, or not JSON)",
    "DPONE_DLQ_RECORD_INVALID": "a line verifies but breaks the dpone.dlq.v1 contract or order",
    TORN_SEGMENT: "a temporary file of an interrupted segment publish (repair removes it)",
    UNLISTED: "a segment the run's index does not list (repair removes a compaction leftover)",
    "DPONE_DLQ_INDEX_MISSING": "a run folder without index.json (repair closes the run as aborted)",
    "DPONE_DLQ_INDEX_CHECKSUM_MISMATCH": "a run index does not verify",
    "DPONE_DLQ_INDEX_SIGNATURE_INVALID": "a run index is unsigned (where required) or its "
    "keyed signature does not verify",
    "DPONE_DLQ_INDEX_INVALID": "a run index verifies but breaks the dpone.dlq-index.v1 contract",
    DRIFT: "the segments or records on disk are not the ones the index lists",
    RUN_ABANDONED: "an open run whose writer is gone (repair closes it as aborted)",
    "DPONE_DLQ_ACK_CHECKSUM_MISMATCH": "an acknowledgement does not verify",
    "DPONE_DLQ_ACK_INVALID": "an acknowledgement breaks the dpone.dlq-replay-ack.v1 contract",
    ACK_ORPHAN: "an acknowledgement of a record the run's index does not list (repair removes it)",
    "DPONE_DLQ_ACK_MISMATCH": "an acknowledgement names another checksum than the record's",
    "DPONE_DLQ_PATH_ESCAPE": "a symbolic link or special file inside the store",
    STRAY_FILE: "a file the store did not write (temporary leftovers are removed by repair)",
}


@frozen
class Verification:
    """What ``dpone ops dlq verify`` found (and, with ``repair``, fixed)."""

    directory: str
    run_id: str | None
    findings: tuple[Finding, ...]
    repaired: tuple[Finding, ...] = ()

    @property
    def clean(self) -> bool:
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        return {
            "dir": self.directory,
            "run_id": self.run_id,
            "clean": self.clean,
            "findings": [f.to_json() for f in self.findings],
            "repaired": [f.to_json() for f in self.repaired],
        }


def verify_store(store: DlqStore, run_id: str | None = None, *, deep: bool = True) -> list[Finding]:
    """Every finding of the store, or of one run (its records, index and acknowledgements).

    ``deep=False`` checks an ended run's listed segments by the SHA-256 of their bytes only
    (every byte is still pinned by the checksummed index; the lines are not decoded again):
    what retention uses to prove it kept exactly what the new index lists. It does not read
    the acknowledgements.
    """
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
        findings.extend(_verify_run(store, name, deep))
    if deep:
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
                findings.append(finding_of(err, None, None, name))
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


def signature_findings(store: DlqStore, run_id: str | None = None) -> list[Finding]:
    """Every ended run's index must carry a signature that verifies (``--require-signature``).

    Other problems of an index are :func:`verify_store`'s findings; only signatures here.
    """
    findings = []
    for name in [run_id] if run_id is not None else store.run_ids():
        where = f"{RUNS_DIR}/{name}/{INDEX_FILE}"
        try:
            with store.open_path(RUNS_DIR, name) as run_fd:
                read_index_at(run_fd, name, require_signature=True)
        except DlqIndexSignatureInvalid as err:
            findings.append(finding_of(err, name, None, where))
        except DlqError:
            continue
    return findings


def _creation_in_progress(runs_fd: int, name: str, where: str) -> bool:
    try:
        tmp_fd, _ = fsio.open_dir(runs_fd, name, where)
    except DlqError:
        return False
    try:
        return writer_alive(tmp_fd, where)
    finally:
        os.close(tmp_fd)


def _verify_run(store: DlqStore, run_id: str, deep: bool = True) -> list[Finding]:
    where = f"{RUNS_DIR}/{run_id}"
    findings: list[Finding] = []
    try:
        with store.open_path(RUNS_DIR, run_id) as run_fd:
            index: DlqIndex | None = None
            try:
                index = read_index_at(run_fd, run_id)
            except DlqIndexMissing as err:
                # No crash leaves a run folder without its index (a run is created whole and
                # its index replaced atomically); with a key, rebuilding one would sign
                # whatever segments sit in the folder, so it is left to the operator.
                repairable = not store.signatures_required
                findings.append(
                    Finding(
                        err.code, err.message, run_id, None, f"{where}/{INDEX_FILE}", repairable
                    )
                )
            except DlqError as err:
                findings.append(finding_of(err, run_id, None, f"{where}/{INDEX_FILE}"))
            if index is not None and index.status == "open" and writer_alive(run_fd, where):
                return findings  # in progress: its records are the writer's business
            if index is not None and index.status == "open":
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
            if not deep and index is not None and index.status != "open":
                findings.extend(structural(run_fd, index))
                return findings
            scan = _scan(run_fd, run_id, findings)
            if scan is None:
                return findings
            findings.extend(_segment_findings(scan, run_id))
            if index is not None and index.status != "open":
                findings.extend(_drift(scan, index, run_id))
    except DlqError as err:
        findings.append(finding_of(err, run_id, None, where))
    return findings


def _run_folder_findings(run_fd: int, run_id: str) -> list[Finding]:
    findings = []
    for item in fsio.entries(run_fd, f"{RUNS_DIR}/{run_id}"):
        name = item.name
        where = f"{RUNS_DIR}/{run_id}/{name}"
        if name in (INDEX_FILE, LOCK_FILE, SEGMENTS_DIR):
            if name == LOCK_FILE and item.is_symlink():
                findings.append(finding_of(fsio.escape(where), run_id, None, where))
            continue
        temp = name.startswith(f".{INDEX_FILE}.tmp-") and not item.is_symlink()
        message = (
            f"{where} is left over from an interrupted index write"
            if temp
            else f"{where} is not a file the store writes"
        )
        findings.append(Finding(STRAY_FILE, message, run_id, None, where, temp))
    return findings


def _scan(run_fd: int, run_id: str, findings: list[Finding]) -> SegmentScan | None:
    where = f"{RUNS_DIR}/{run_id}/{SEGMENTS_DIR}"
    try:
        segments_fd, _ = fsio.open_dir(run_fd, SEGMENTS_DIR, where)
    except DlqError as err:
        if isinstance(err, DlqPathEscape):
            findings.append(finding_of(err, run_id, None, where))
            return None
        return SegmentScan()  # no segments folder: as if empty (drift reports what is missing)
    try:
        return scan_segments(segments_fd, run_id, remove_temps=False)
    finally:
        os.close(segments_fd)


def _segment_findings(scan: SegmentScan, run_id: str) -> list[Finding]:
    findings = []
    for name in scan.temps:
        where = segment_where(run_id, name)
        message = f"{where} is a temporary file of a segment publish that was interrupted"
        findings.append(Finding(TORN_SEGMENT, message, run_id, None, where, True))
    for name, line, err in scan.bad:
        findings.append(finding_of(err, run_id, None, segment_where(run_id, name), line))
    for name in scan.stray:
        where = segment_where(run_id, name)
        findings.append(Finding(STRAY_FILE, f"{where} is not a segment file", run_id, None, where))
    return findings


def _drift(scan: SegmentScan, index: DlqIndex, run_id: str) -> list[Finding]:
    """What differs between an ended run's index and its segments on disk."""
    findings: list[Finding] = []
    bad = {name for name, _, _ in scan.bad}
    checksums = index.checksums()
    for seg in index.segments:
        where = segment_where(run_id, seg.name)
        if seg.name in bad:
            continue  # reported already, line by line
        if seg.name not in scan.valid:
            message = f"{where} is in the index but not on disk"
            findings.append(Finding(DRIFT, message, run_id, None, where))
            continue
        found, records, _ = scan.valid[seg.name]
        if found.sha256 != seg.sha256:
            message = f"{where} does not verify: its bytes are not the bytes the index lists"
            findings.append(Finding(CHECKSUM, message, run_id, None, where))
        ids = [r.record_id for r in records]
        for number, record in enumerate(records, start=1):
            if checksums.get(record.record_id) != record.sha256:
                message = f"{where} line {number} holds a record the index does not list as is"
                findings.append(
                    Finding(DRIFT, message, run_id, record.record_id, where, line=number)
                )
        on_disk = set(ids)
        for item in index.entries:
            if seg.holds(item.record_id) and item.record_id not in on_disk:
                after = bisect_left(ids, item.record_id)
                message = (
                    f"{where} lacks record {item.record_id} that the index lists "
                    f"(a line removed after line {after})"
                )
                findings.append(Finding(DRIFT, message, run_id, item.record_id, where, line=after))
    leftovers = set(leftover_segments(scan, index))
    listed = {seg.name for seg in index.segments}
    for name in sorted(scan.valid.keys() - listed):
        where = segment_where(run_id, name)
        if name in leftovers:
            message = f"{where} is not in the index and holds nothing it needs (a leftover)"
            findings.append(Finding(UNLISTED, message, run_id, None, where, True))
        else:
            message = f"{where} is not in the index and holds records the index does not list"
            findings.append(Finding(UNLISTED, message, run_id, None, where))
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
                findings.append(finding_of(fsio.escape(where), name, None, where))
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
            if item.is_symlink() or not item.is_file(follow_symlinks=False):
                findings.append(finding_of(fsio.escape(where), run_id, None, where))
                continue
            if ACK_FILE.fullmatch(item.name) is None:
                temp = item.name.startswith(".") and ".tmp-" in item.name
                message = (
                    f"{where} is left over from an interrupted ack write"
                    if temp
                    else f"{where} is not an ack file"
                )
                findings.append(Finding(STRAY_FILE, message, run_id, None, where, temp))
                continue
            try:
                data = fsio.read_file(fd, item.name, where, MAX_ACK_SEGMENT_BYTES) or b""
            except DlqError as err:
                findings.append(finding_of(err, run_id, None, where))
                continue
            findings.extend(_ack_lines(data, run_id, where, checksums))
    finally:
        os.close(fd)
    return findings


def _ack_lines(
    data: bytes, run_id: str, where: str, checksums: dict[str, str] | None
) -> list[Finding]:
    findings: list[Finding] = []
    lines = data.split(b"\n")
    if lines.pop():
        message = f"{where} line {len(lines) + 1} is truncated"
        findings.append(Finding("DPONE_DLQ_ACK_CHECKSUM_MISMATCH", message, run_id, None, where))
    for number, line in enumerate(lines, start=1):
        try:
            ack = parse_ack_line(line, run_id, f"{where} line {number}")
        except DlqError as err:
            findings.append(finding_of(err, run_id, None, where, number))
            continue
        rid = ack.record_id
        if checksums is None or rid not in checksums:
            message = f"{where} line {number} acknowledges a record the run's index does not list"
            # With a verified index, the acknowledgement of a record the run no longer holds
            # is what an interrupted retention leaves (it removes acknowledgements last); it
            # acknowledges nothing, so removing it loses nothing.
            findings.append(
                Finding(ACK_ORPHAN, message, run_id, rid, where, checksums is not None, number)
            )
        elif checksums[rid] != ack.record_sha256:
            message = f"{where} line {number} names another checksum than the record's"
            findings.append(
                Finding("DPONE_DLQ_ACK_MISMATCH", message, run_id, rid, where, line=number)
            )
    return findings


__all__ = ["FINDING_CODES", "Finding", "Verification", "signature_findings", "verify_store"]
