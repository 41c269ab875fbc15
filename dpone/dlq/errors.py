"""Errors of the dead-letter store, each with a stable ``DPONE_DLQ_*`` code.

Messages name runs, records, limits and relative paths; never a row value. A storage failure
(a full disk, an I/O error) is transient: it fails the run and is never turned into a record.
"""

from __future__ import annotations

import errno
from collections.abc import Sequence
from typing import ClassVar

from dpone.errors import EXIT_CONFIG, DponeError, Stage, TransientError


class DlqError(DponeError):
    """Root of every dead-letter store failure."""

    code = "DPONE_DLQ_ERROR"
    stage: Stage = "dlq"


# --- integrity: what is on disk is not what was written ---------------------------------------


class DlqIntegrityError(DlqError):
    """Something on disk does not verify. Stop replay and retention; investigate."""

    code = "DPONE_DLQ_INTEGRITY"
    default_fixes: ClassVar[tuple[str, ...]] = (
        "run `dpone ops dlq verify --dir DIR` to list every finding",
        "restore the affected files from trusted storage; investigate tampering or partial writes",
    )

    def __init__(self, message: str, *, fixes: Sequence[str] | None = None) -> None:
        super().__init__(message, fixes=self.default_fixes if fixes is None else fixes)


class DlqChecksumMismatch(DlqIntegrityError):
    code = "DPONE_DLQ_CHECKSUM_MISMATCH"


class DlqRecordInvalid(DlqIntegrityError):
    code = "DPONE_DLQ_RECORD_INVALID"


class DlqIndexChecksumMismatch(DlqIntegrityError):
    code = "DPONE_DLQ_INDEX_CHECKSUM_MISMATCH"


class DlqIndexInvalid(DlqIntegrityError):
    code = "DPONE_DLQ_INDEX_INVALID"


class DlqIndexSignatureInvalid(DlqIntegrityError):
    """A run index whose keyed signature does not verify (or is missing where required)."""

    code = "DPONE_DLQ_INDEX_SIGNATURE_INVALID"


class DlqIndexMissing(DlqIntegrityError):
    code = "DPONE_DLQ_INDEX_MISSING"


class DlqIndexDrift(DlqIntegrityError):
    code = "DPONE_DLQ_INDEX_DRIFT"


class DlqAckChecksumMismatch(DlqIntegrityError):
    code = "DPONE_DLQ_ACK_CHECKSUM_MISMATCH"


class DlqAckInvalid(DlqIntegrityError):
    code = "DPONE_DLQ_ACK_INVALID"


# --- create-only conflicts ----------------------------------------------------------------------


class DlqRecordConflict(DlqError):
    """A record id already exists on disk with another checksum; the existing file is kept."""

    code = "DPONE_DLQ_RECORD_CONFLICT"


class DlqAckConflict(DlqError):
    code = "DPONE_DLQ_ACK_CONFLICT"


class DlqAckMismatch(DlqError):
    """An acknowledgement names a record checksum that is not the record's."""

    code = "DPONE_DLQ_ACK_MISMATCH"


# --- paths and identifiers ----------------------------------------------------------------------


class DlqPathEscape(DlqError):
    """A path would resolve outside the store (``..``, an absolute id, a symlink in the tree)."""

    code = "DPONE_DLQ_PATH_ESCAPE"


class DlqInvalidIdentifier(DlqError):
    code = "DPONE_DLQ_INVALID_ID"


class DlqInvalidRef(DlqError):
    code = "DPONE_DLQ_INVALID_REF"


class DlqInvalidReject(DlqError):
    """A rejected-row descriptor the store cannot turn into a safe record (a caller bug)."""

    code = "DPONE_DLQ_INVALID_REJECT"


# --- limits -------------------------------------------------------------------------------------


class DlqLimitExceeded(DlqError):
    """A policy limit would be crossed; nothing of the offending chunk was written."""

    code = "DPONE_DLQ_LIMIT_EXCEEDED"

    def __init__(self, limit: str, value: int, bound: int, what: str) -> None:
        super().__init__(
            f"{what}: {limit} is {bound}, this would make it {value}",
            fixes=(f"raise sink.options.dlq.{limit} (within its hard bound) or fix the source",),
        )
        self.limit = limit
        self.value = value
        self.bound = bound


# --- runs ---------------------------------------------------------------------------------------


class DlqRunNotFound(DlqError):
    code = "DPONE_DLQ_RUN_NOT_FOUND"
    exit_code = EXIT_CONFIG
    default_fixes: ClassVar[tuple[str, ...]] = (
        "list the store's runs with `dpone ops dlq summary --dir DIR`",
        "check --dir: the DLQ root is dlq.directory, by default <work_dir>/dlq",
    )

    def __init__(self, message: str, *, fixes: Sequence[str] | None = None) -> None:
        super().__init__(message, fixes=self.default_fixes if fixes is None else fixes)


class DlqRecordNotFound(DlqError):
    code = "DPONE_DLQ_RECORD_NOT_FOUND"


class DlqRunNotOpen(DlqError):
    """Writing to a run that is closed or aborted, or acknowledging a run that is not closed."""

    code = "DPONE_DLQ_RUN_NOT_OPEN"


class DlqRunLocked(DlqError):
    """Another live process holds the run's writer lock."""

    code = "DPONE_DLQ_RUN_LOCKED"


class DlqRunMismatch(DlqError):
    code = "DPONE_DLQ_RUN_MISMATCH"


class DlqWriterFailed(DlqError):
    """The writer holds records that were never reported durable; it can only abort."""

    code = "DPONE_DLQ_WRITER_FAILED"


# --- configuration (exit 2) ---------------------------------------------------------------------


class DlqPolicyInvalid(DlqError):
    code = "DPONE_DLQ_POLICY_INVALID"
    stage = "preflight"
    exit_code = EXIT_CONFIG


class DlqPreserveRefused(DlqPolicyInvalid):
    code = "DPONE_DLQ_PII_PRESERVE_IN_PRODUCTION"


# --- storage (transient) ------------------------------------------------------------------------


class DlqStorageError(DlqError, TransientError):
    """The operating system refused a read, write or sync. Fails the run; retry later."""

    code = "DPONE_DLQ_STORAGE"

    @classmethod
    def from_oserror(cls, exc: OSError, action: str, where: str) -> DlqStorageError:
        name = errno.errorcode.get(exc.errno or 0, "EIO")
        kind: type[DlqStorageError] = (
            DlqDiskFull if exc.errno in (errno.ENOSPC, errno.EDQUOT) else DlqStorageError
        )
        err = kind(
            f"cannot {action} {where}: {name} ({exc.strerror or 'I/O error'})",
            fixes=("free space or fix the storage, then rerun; nothing was reported durable",),
        )
        err.errno_name = name
        return err

    errno_name: str = "EIO"


class DlqDiskFull(DlqStorageError):
    code = "DPONE_DLQ_DISK_FULL"


__all__ = [
    "DlqAckChecksumMismatch",
    "DlqAckConflict",
    "DlqAckInvalid",
    "DlqAckMismatch",
    "DlqChecksumMismatch",
    "DlqDiskFull",
    "DlqError",
    "DlqIndexChecksumMismatch",
    "DlqIndexDrift",
    "DlqIndexInvalid",
    "DlqIndexMissing",
    "DlqIntegrityError",
    "DlqInvalidIdentifier",
    "DlqInvalidRef",
    "DlqInvalidReject",
    "DlqLimitExceeded",
    "DlqPathEscape",
    "DlqPolicyInvalid",
    "DlqPreserveRefused",
    "DlqRecordConflict",
    "DlqRecordInvalid",
    "DlqRecordNotFound",
    "DlqRunLocked",
    "DlqRunMismatch",
    "DlqRunNotFound",
    "DlqRunNotOpen",
    "DlqStorageError",
    "DlqWriterFailed",
]
