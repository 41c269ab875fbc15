"""Opening a run for its writer: a new run's folder built aside and renamed into place, or an
open run whose writer died taken over with the records it left on disk.

A run folder appears atomically: it is built as ``runs/.new-<run_id>-<token>`` (lock taken,
``open`` index durable) and renamed into place, so a run folder without an index or without a
lock holder at birth never exists.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import shutil
from contextlib import suppress

from dpone.dlq import fsio
from dpone.dlq.errors import DlqRunLocked, DlqRunMismatch, DlqRunNotOpen
from dpone.dlq.fsio import check_identifier
from dpone.dlq.index import PIPELINE_PATTERN
from dpone.dlq.indexfile import read_index_at
from dpone.dlq.layout import INDEX_FILE, NEW_RUN_PREFIX, RUNS_DIR, dumps
from dpone.dlq.lock import name_exists, take_lock
from dpone.dlq.rundir import RunDir, RunHeader
from dpone.dlq.scan import scan_segments
from dpone.dlq.segments import SEGMENTS_DIR
from dpone.dlq.writer import RunWriter
from dpone.logs import get_logger

_PIPELINE = re.compile(PIPELINE_PATTERN)
log = get_logger("dpone.dlq")


def open_run(runs: RunDir, run_id: str, load_id: str, *, pipeline: str | None = None) -> RunWriter:
    """Start (or resume, after its writer died) a run; its ``open`` index is durable."""
    check_identifier(run_id, "run id")
    check_identifier(load_id, "load id")
    if pipeline is not None and not _PIPELINE.match(pipeline):
        raise DlqRunMismatch("the pipeline name is not a safe identifier")
    with runs.open_path(RUNS_DIR, create=True) as runs_fd:
        if not name_exists(runs_fd, run_id, f"{RUNS_DIR}/{run_id}"):
            created = _create_run(runs, runs_fd, run_id, load_id, pipeline)
            if created is not None:
                return _start(runs, created)
        return _resume(runs, runs_fd, run_id, load_id, pipeline)


def _create_run(
    runs: RunDir, runs_fd: int, run_id: str, load_id: str, pipeline: str | None
) -> tuple[int, int, int, RunHeader] | None:
    """Build the run folder aside and rename it into place; ``None`` if one appeared."""
    tmp = f"{NEW_RUN_PREFIX}{run_id}-{secrets.token_hex(4)}"
    where = f"{RUNS_DIR}/{run_id}"
    fds: list[int] = []
    try:
        run_fd, _ = fsio.open_dir(runs_fd, tmp, where, create=True)
        fds.append(run_fd)
        lock_fd = take_lock(run_fd, where, create=True)
        if lock_fd is None:  # a folder nobody else knows of: cannot be locked already
            raise DlqRunLocked(f"{where} is being created by another process")
        fds.append(lock_fd)
        segments_fd, _ = fsio.open_dir(run_fd, SEGMENTS_DIR, f"{where}/{SEGMENTS_DIR}", create=True)
        fds.append(segments_fd)
        header = runs.header(run_id, load_id, pipeline)
        doc = runs.index_doc(header, "open", None, owner=True, entries=[])
        fsio.replace_atomic(run_fd, INDEX_FILE, dumps(doc), f"{where}/{INDEX_FILE}")
        with fsio.os_errors("create", where):
            try:
                os.rename(tmp, run_id, src_dir_fd=runs_fd, dst_dir_fd=runs_fd)
            except OSError as exc:
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR):
                    raise
                _close_all(fds)
                shutil.rmtree(tmp, dir_fd=runs_fd, ignore_errors=True)
                return None
            os.fsync(runs_fd)
    except BaseException:
        _close_all(fds)
        shutil.rmtree(tmp, dir_fd=runs_fd, ignore_errors=True)
        raise
    return run_fd, segments_fd, lock_fd, header


def _start(runs: RunDir, created: tuple[int, int, int, RunHeader]) -> RunWriter:
    run_fd, segments_fd, lock_fd, header = created
    writer = RunWriter(runs, header, (run_fd, segments_fd, lock_fd))
    log.info(
        "dlq.run.opened",
        run_id=header.run_id,
        load_id=header.load_id,
        pipeline=header.pipeline,
    )
    return writer


def _resume(
    runs: RunDir, runs_fd: int, run_id: str, load_id: str, pipeline: str | None
) -> RunWriter:
    """Take over an open run whose writer is gone; its records on disk count."""
    where = f"{RUNS_DIR}/{run_id}"
    run_fd, _ = fsio.open_dir(runs_fd, run_id, where)
    fds = [run_fd]
    try:
        lock_fd = take_lock(run_fd, where, create=True)
        if lock_fd is None:
            raise DlqRunLocked(f"{where} is being written by a live process")
        fds.append(lock_fd)
        # The resumed index is written (and signed) again: only from one that verifies.
        index = read_index_at(run_fd, run_id, require_signature=runs.signatures_required)
        if index.status != "open":
            raise DlqRunNotOpen(f"run {run_id} is {index.status}; it cannot be written again")
        if index.load_id != load_id or (pipeline is not None and index.pipeline != pipeline):
            raise DlqRunMismatch(f"run {run_id} belongs to another load or pipeline")
        if index.pii_policy != runs.policy.pii_policy:
            raise DlqRunMismatch(f"run {run_id} was started under another pii_policy")
        segments_fd, _ = fsio.open_dir(run_fd, SEGMENTS_DIR, f"{where}/{SEGMENTS_DIR}", create=True)
        fds.append(segments_fd)
        scan = scan_segments(segments_fd, run_id, remove_temps=True)
        if scan.bad:
            raise scan.bad[0][2]
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    header = RunHeader.of(index)
    existing = scan.adoptable()
    writer = RunWriter(runs, header, (run_fd, segments_fd, lock_fd), existing=existing)
    writer.write_open_index()
    log.info("dlq.run.resumed", run_id=run_id, load_id=load_id, records=len(existing[1]))
    return writer


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        if fd >= 0:
            with suppress(OSError):
                os.close(fd)
    fds.clear()


__all__ = ["open_run"]
