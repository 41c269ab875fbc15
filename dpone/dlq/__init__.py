"""Dead-letter store: record model, create-only segments, index, acknowledgements, the writer.

The lifecycle uses::

    store = DlqStore(root, policy, clock=clock, environment=manifest.environment)
    store.recover_abandoned(pipeline=name)          # before the first chunk
    writer = store.open_run(run_id, load_id, pipeline=name)
    ids = writer.write_chunk(rejected_rows(refs, reasons, columns=...))   # durable on return
    result = writer.close()                         # or writer.abort() on failure

The names below are imported on first use (:mod:`dpone._lazy`): importing a light module of
this package (``dpone.dlq.refs``) loads no writer. ``DlqPolicy`` lives in
:mod:`dpone.contracts.dlq`, which the manifest compiler imports without this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpone._lazy import exports

if TYPE_CHECKING:
    from dpone.canonical import canonical_json, checksum
    from dpone.contracts.dlq import DlqPolicy
    from dpone.dlq.acks import ACK_SCHEMA, ReplayAck
    from dpone.dlq.errors import (
        DlqChecksumMismatch,
        DlqError,
        DlqIntegrityError,
        DlqLimitExceeded,
        DlqPathEscape,
        DlqRecordConflict,
        DlqStorageError,
    )
    from dpone.dlq.index import INDEX_SCHEMA, DlqIndex, IndexEntry
    from dpone.dlq.integrity import Finding
    from dpone.dlq.model import RECORD_SCHEMA, REDACTED, DlqRecord
    from dpone.dlq.refs import file_ref, file_refs, parse_ref, run_row_ref, run_row_refs
    from dpone.dlq.rejects import RejectedRow, rejected_rows
    from dpone.dlq.result import RunResult
    from dpone.dlq.store import DlqStore
    from dpone.dlq.writer import RunWriter

__getattr__, __dir__ = exports(
    __name__,
    {
        "canonical_json": "dpone.canonical",
        "checksum": "dpone.canonical",
        "ACK_SCHEMA": "dpone.dlq.acks",
        "ReplayAck": "dpone.dlq.acks",
        "DlqChecksumMismatch": "dpone.dlq.errors",
        "DlqError": "dpone.dlq.errors",
        "DlqIntegrityError": "dpone.dlq.errors",
        "DlqLimitExceeded": "dpone.dlq.errors",
        "DlqPathEscape": "dpone.dlq.errors",
        "DlqRecordConflict": "dpone.dlq.errors",
        "DlqStorageError": "dpone.dlq.errors",
        "INDEX_SCHEMA": "dpone.dlq.index",
        "DlqIndex": "dpone.dlq.index",
        "IndexEntry": "dpone.dlq.index",
        "Finding": "dpone.dlq.integrity",
        "RECORD_SCHEMA": "dpone.dlq.model",
        "REDACTED": "dpone.dlq.model",
        "DlqRecord": "dpone.dlq.model",
        "RejectedRow": "dpone.dlq.rejects",
        "rejected_rows": "dpone.dlq.rejects",
        "DlqPolicy": "dpone.contracts.dlq",
        "file_ref": "dpone.dlq.refs",
        "file_refs": "dpone.dlq.refs",
        "parse_ref": "dpone.dlq.refs",
        "run_row_ref": "dpone.dlq.refs",
        "run_row_refs": "dpone.dlq.refs",
        "DlqStore": "dpone.dlq.store",
        "RunResult": "dpone.dlq.result",
        "RunWriter": "dpone.dlq.writer",
    },
)

__all__ = [
    "ACK_SCHEMA",
    "INDEX_SCHEMA",
    "RECORD_SCHEMA",
    "REDACTED",
    "DlqChecksumMismatch",
    "DlqError",
    "DlqIndex",
    "DlqIntegrityError",
    "DlqLimitExceeded",
    "DlqPathEscape",
    "DlqPolicy",
    "DlqRecord",
    "DlqRecordConflict",
    "DlqStorageError",
    "DlqStore",
    "Finding",
    "IndexEntry",
    "RejectedRow",
    "ReplayAck",
    "RunResult",
    "RunWriter",
    "canonical_json",
    "checksum",
    "file_ref",
    "file_refs",
    "parse_ref",
    "rejected_rows",
    "run_row_ref",
    "run_row_refs",
]
