"""The runs of a dead-letter store as every part of it reaches them (SPEC §5).

:class:`RunDir` is what the writer, the acknowledgements (:mod:`dpone.dlq.acks`), deletion
(:mod:`dpone.dlq.compaction`) and the writer's own check (:mod:`dpone.dlq.integrity`) share:
where the store is (every folder reached through directory descriptors, no symlink
followed), the clock that stamps its documents, the policy a new run takes, whether an index
must be signed, the caches of what was verified, and the index documents of a run (written,
read, and rebuilt from the segments on disk when a run is aborted). The layout is
:mod:`dpone.dlq.layout`, the run lock :mod:`dpone.dlq.lock`. The store
(:class:`dpone.dlq.store.DlqStore`) is a :class:`RunDir` with the public operations on top.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from dpone import durable, signing
from dpone.clock import Clock, format_timestamp, utc_now
from dpone.contracts.dlq import DlqPolicy, PiiPolicy
from dpone.dlq import fsio
from dpone.dlq.errors import DlqError, DlqRunLocked, DlqRunNotFound
from dpone.dlq.fsio import check_identifier
from dpone.dlq.index import DlqIndex, DlqRunStatus, StatusReason, build_index_doc, entry
from dpone.dlq.indexfile import IndexCache, read_index_at
from dpone.dlq.layout import INDEX_FILE, RUNS_DIR, dumps, index_where, run_where
from dpone.dlq.lock import release_lock, take_lock
from dpone.dlq.scan import scan_segments
from dpone.dlq.segments import SEGMENTS_DIR, SegmentEntry
from dpone.logs import get_logger
from dpone.records import frozen

log = get_logger("dpone.dlq")


@frozen
class RunHeader:
    """What an index says about its run besides status and records."""

    run_id: str
    load_id: str
    pipeline: str | None
    created_at: str
    pii_policy: PiiPolicy
    retention_days: int

    @classmethod
    def of(cls, index: DlqIndex) -> RunHeader:
        return cls(
            index.run_id,
            index.load_id,
            index.pipeline,
            index.created_at,
            index.pii_policy,
            index.retention_days,
        )


class RunDir:
    """The folder tree of one dead-letter store, its clock and its policy.

    ``clock`` returns aware datetimes (``dpone.testing.FrozenClock`` in tests).
    ``require_signature``: whether an index acted on must carry a signature that verifies
    (``None``: whenever a signing key is configured). ``anchor``: the folder from which
    down to the root every folder is dpone's own, reached without following links; without
    it the root is the user's choice and may be a link.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        policy: DlqPolicy,
        *,
        clock: Clock | None = None,
        require_signature: bool | None = None,
        anchor: str | os.PathLike[str] | None = None,
    ) -> None:
        self.root = Path(root)
        self.policy = policy
        self.clock: Clock = clock if clock is not None else utc_now
        self.require_signature = require_signature
        top = Path(anchor) if anchor is not None else self.root
        self._root_parts = durable.parts_below(top, self.root)
        self._anchor = top if self._root_parts else self.root
        # Indexes verified here, by run and content (see read_index_at).
        self.index_cache = IndexCache()
        # Ack segments verified here, by content (see dpone.dlq.acks).
        self.ack_cache: dict[tuple[str, bytes], tuple[list[str], list[str]]] = {}

    @property
    def signatures_required(self) -> bool:
        if self.require_signature is None:
            return signing.configured()
        return self.require_signature

    def now(self) -> datetime:
        moment = self.clock()
        format_timestamp(moment)  # refuses a naive clock early
        return moment

    @contextmanager
    def open_path(
        self, *parts: str, create: bool = False, missing: type[DlqError] | None = None
    ) -> Iterator[int]:
        """A descriptor of folder ``root/parts...``, reached without following symlinks."""
        with ExitStack() as stack:
            fd = fsio.open_root(self._anchor, create=create, missing=missing)
            stack.callback(os.close, fd)
            for i, part in enumerate(self._root_parts):
                where = "/".join(self._root_parts[: i + 1])
                child, created = fsio.open_dir(fd, part, where, create=create, missing=missing)
                stack.callback(os.close, child)
                if created:
                    fsio.fsync_fd(fd, where)
                fd = child
            where = ""
            for part in parts:
                parent_where = where or "."
                where = f"{where}/{part}" if where else part
                child, created = fsio.open_dir(fd, part, where, create=create, missing=missing)
                stack.callback(os.close, child)
                if created:
                    fsio.fsync_fd(fd, parent_where)
                fd = child
            yield fd

    # --- index documents ------------------------------------------------------------------------

    def header(self, run_id: str, load_id: str, pipeline: str | None) -> RunHeader:
        """The header of a run started now, under this store's policy."""
        return RunHeader(
            run_id,
            load_id,
            pipeline,
            format_timestamp(self.now()),
            self.policy.pii_policy,
            self.policy.retention_days,
        )

    def index_doc(
        self,
        header: RunHeader,
        status: DlqRunStatus,
        status_reason: StatusReason | None,
        *,
        owner: bool,
        entries: list[dict[str, Any]],
        segments: Sequence[SegmentEntry] = (),
    ) -> dict[str, Any]:
        """A full index document (checksum included) stamped with this store's clock."""
        return build_index_doc(
            run_id=header.run_id,
            load_id=header.load_id,
            pipeline=header.pipeline,
            status=status,
            status_reason=status_reason,
            pii_policy=header.pii_policy,
            retention_days=header.retention_days,
            created_at=header.created_at,
            updated_at=format_timestamp(self.now()),
            owner_pid=os.getpid() if owner else None,
            entries=entries,
            segments=segments,
            sign=signing.sign,
        )

    def read_index(self, run_id: str) -> DlqIndex:
        """The verified index of a run (checksum, fingerprint, internal consistency)."""
        check_identifier(run_id, "run id")
        with self.open_path(RUNS_DIR, run_id, missing=DlqRunNotFound) as run_fd:
            return read_index_at(
                run_fd,
                run_id,
                cache=self.index_cache,
                require_signature=self.signatures_required,
            )

    # --- aborting a run -------------------------------------------------------------------------

    def abort_run(self, run_id: str, reason: StatusReason = "run_failed") -> DlqIndex:
        """Mark a run ``aborted``: an open run whose writer is gone, or a closed run whose
        load never committed. An aborted run stays as it is."""
        check_identifier(run_id, "run id")
        with self.open_path(RUNS_DIR, run_id, missing=DlqRunNotFound) as run_fd:
            where = run_where(run_id)
            lock_fd = take_lock(run_fd, where, create=True)
            if lock_fd is None:
                raise DlqRunLocked(f"{where} has a live writer; abort it through its writer")
            try:
                index = read_index_at(run_fd, run_id, require_signature=self.signatures_required)
                if index.status == "aborted":
                    return index
                if index.status == "open":
                    return self.rebuild_aborted(run_fd, RunHeader.of(index), reason)
                doc = self.index_doc(
                    RunHeader.of(index),
                    "aborted",
                    reason,
                    owner=False,
                    entries=index.records_json(),
                    segments=index.segments,
                )
                fsio.replace_atomic(run_fd, INDEX_FILE, dumps(doc), index_where(run_id))
                log.warning("dlq.run.aborted", run_id=run_id, reason=reason)
                return DlqIndex.from_json(doc)
            finally:
                release_lock(run_fd, lock_fd)

    def rebuild_aborted(
        self, run_fd: int, header: RunHeader | str, reason: StatusReason
    ) -> DlqIndex:
        """Write an ``aborted`` index listing exactly the segments that verify on disk.

        ``header`` is the run's (from its index or its writer), or only its id when the index
        is gone. The caller holds the run's lock. Temp files of an interrupted publish are
        removed; segments that do not verify stay on disk, out of the index, for ``verify``
        to report. Every published segment is durable already (fsynced before its link).
        """
        run_id = header if isinstance(header, str) else header.run_id
        where = run_where(run_id)
        segments_fd, _ = fsio.open_dir(run_fd, SEGMENTS_DIR, f"{where}/{SEGMENTS_DIR}", create=True)
        try:
            scan = scan_segments(segments_fd, run_id, remove_temps=True)
        finally:
            os.close(segments_fd)
        listed, records = scan.adoptable()
        if isinstance(header, str):
            header = RunHeader(
                run_id,
                records[0].load_id if records else run_id,
                None,
                format_timestamp(self.now()),
                records[0].payload.policy if records else self.policy.pii_policy,
                self.policy.retention_days,
            )
        doc = self.index_doc(
            header,
            "aborted",
            reason,
            owner=False,
            entries=[
                entry(r.record_id, r.sha256, r.reason.code.value, r.reason.column) for r in records
            ],
            segments=listed,
        )
        fsio.replace_atomic(run_fd, INDEX_FILE, dumps(doc), index_where(run_id))
        log.warning("dlq.run.aborted", run_id=run_id, reason=reason, records=len(records))
        return DlqIndex.from_json(doc)


__all__ = ["RunDir", "RunHeader"]
