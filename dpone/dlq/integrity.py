"""The writer's own post-write check: an ended run that this process just wrote must be on
disk exactly as written (:meth:`dpone.dlq.store.DlqStore.check_written`), and the
:class:`Finding` every integrity check reports.

The whole-store verify and the safe repairs (``dpone ops dlq verify [--repair]``) are an
operator plane: :mod:`dpone.ops.verification`, built on what is here.
"""

from __future__ import annotations

import os
from typing import Any

from dpone import durable
from dpone.dlq import fsio
from dpone.dlq.errors import DlqError, DlqRunNotFound
from dpone.dlq.index import DlqIndex
from dpone.dlq.indexfile import read_index_at
from dpone.dlq.layout import HARD_MAX_SEGMENT_BYTES, INDEX_FILE, RUNS_DIR, segment_where
from dpone.dlq.rundir import RunDir
from dpone.dlq.segments import SEGMENTS_DIR, bytes_checksum
from dpone.records import frozen

RUN_ABANDONED = "DPONE_DLQ_RUN_ABANDONED"
TORN_SEGMENT = "DPONE_DLQ_TORN_SEGMENT"
UNLISTED = "DPONE_DLQ_SEGMENT_UNLISTED"
STRAY_FILE = "DPONE_DLQ_STRAY_FILE"
ACK_ORPHAN = "DPONE_DLQ_ACK_ORPHAN"
DRIFT = "DPONE_DLQ_INDEX_DRIFT"
CHECKSUM = "DPONE_DLQ_CHECKSUM_MISMATCH"


@frozen
class Finding:
    """One integrity problem. ``path`` is relative to the store's root."""

    code: str
    message: str
    run_id: str | None = None
    record_id: str | None = None
    path: str | None = None
    repairable: bool = False
    line: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "message": self.message,
            "run_id": self.run_id,
            "record_id": self.record_id,
            "path": self.path,
            "line": self.line,
            "repairable": self.repairable,
        }


def finding_of(
    err: DlqError, run_id: str | None, record_id: str | None, path: str, line: int | None = None
) -> Finding:
    return Finding(err.code, err.message, run_id, record_id, path, line=line)


def verify_written(runs: RunDir, index: DlqIndex) -> list[Finding]:
    """The findings of an ended run that this process just wrote ``index`` for: the file
    must hold that very index, and every segment it lists the bytes it lists (checked by
    their SHA-256; the lines were verified when they were written or compacted)."""
    run_id = index.run_id
    where = f"{RUNS_DIR}/{run_id}/{INDEX_FILE}"
    with runs.open_path(RUNS_DIR, run_id, missing=DlqRunNotFound) as run_fd:
        try:
            found = read_index_at(run_fd, run_id, index)
        except DlqError as err:
            return [finding_of(err, run_id, None, where)]
        if found is not index:
            message = f"{where} is not the index this process wrote"
            return [Finding(DRIFT, message, run_id, None, where)]
        return structural(run_fd, index)


def structural(run_fd: int, index: DlqIndex) -> list[Finding]:
    """An ended run's segments against its index by their bytes' SHA-256 (``deep=False``)."""
    run_id = index.run_id
    folder = f"{RUNS_DIR}/{run_id}/{SEGMENTS_DIR}"
    findings: list[Finding] = []
    segments_fd, _ = fsio.open_dir(run_fd, SEGMENTS_DIR, folder, create=True)
    try:
        names = {e.name for e in fsio.entries(segments_fd, folder)}
        listed = {seg.name for seg in index.segments}
        for seg in index.segments:
            where = segment_where(run_id, seg.name)
            data = fsio.read_file(segments_fd, seg.name, where, HARD_MAX_SEGMENT_BYTES)
            if data is None:
                message = f"{where} is in the index but not on disk"
                findings.append(Finding(DRIFT, message, run_id, None, where))
            elif bytes_checksum(data) != seg.sha256:
                message = f"{where} does not verify: its bytes are not the bytes the index lists"
                findings.append(Finding(CHECKSUM, message, run_id, None, where))
        for name in sorted(names - listed):
            where = segment_where(run_id, name)
            if durable.is_temp_name(name):
                message = f"{where} is a temporary file of a segment publish that was interrupted"
                findings.append(Finding(TORN_SEGMENT, message, run_id, None, where, True))
            else:
                message = f"{where} is not a segment the index lists"
                findings.append(Finding(UNLISTED, message, run_id, None, where))
    finally:
        os.close(segments_fd)
    return findings


__all__ = [
    "ACK_ORPHAN",
    "CHECKSUM",
    "DRIFT",
    "RUN_ABANDONED",
    "STRAY_FILE",
    "TORN_SEGMENT",
    "UNLISTED",
    "Finding",
    "finding_of",
    "structural",
    "verify_written",
]
