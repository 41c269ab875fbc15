"""The DLQ policy, re-exported from its home in the bottom layer (:mod:`dpone.contracts.dlq`).

The store, the writer and the compiler keep importing it from here.
"""

from __future__ import annotations

from dpone.contracts.dlq import (
    DEFAULT_DIRECTORY,
    LIMITS,
    MAX_DIAGNOSTIC_BYTES,
    MAX_INDEX_BYTES,
    MAX_RECORD_BYTES,
    MAX_RECORDS_PER_RUN,
    MAX_SEGMENT_BYTES,
    PII_POLICIES,
    RETENTION_DAYS,
    DlqPolicy,
    PiiPolicy,
    is_production,
)

__all__ = [
    "DEFAULT_DIRECTORY",
    "LIMITS",
    "MAX_DIAGNOSTIC_BYTES",
    "MAX_INDEX_BYTES",
    "MAX_RECORDS_PER_RUN",
    "MAX_RECORD_BYTES",
    "MAX_SEGMENT_BYTES",
    "PII_POLICIES",
    "RETENTION_DAYS",
    "DlqPolicy",
    "PiiPolicy",
    "is_production",
]
