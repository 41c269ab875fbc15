"""Dead-letter store: record model, create-only segments, index, acknowledgements, the writer.

The lifecycle uses::

    store = DlqStore(root, policy, clock=clock, environment=manifest.environment)
    store.recover_abandoned(pipeline=name)          # before the first chunk
    writer = store.open_run(run_id, load_id, pipeline=name)
    ids = writer.write_chunk(rejected_rows(refs, reasons, columns=...))   # durable on return
    result = writer.close()                         # or writer.abort() on failure
"""

from dpone.canonical import canonical_json, checksum
from dpone.dlq.ack import ACK_SCHEMA, ReplayAck
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
from dpone.dlq.model import (
    RECORD_SCHEMA,
    REDACTED,
    DlqRecord,
    RejectedRow,
    rejected_rows,
)
from dpone.dlq.policy import DlqPolicy
from dpone.dlq.refs import file_ref, file_refs, parse_ref, run_row_ref, run_row_refs
from dpone.dlq.store import DlqStore
from dpone.dlq.writer import RunResult, RunWriter

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
