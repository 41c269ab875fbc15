"""The write path's record encoder: canonical record bytes from precomputed fragments.

A record is RFC 8785 canonical JSON (sorted keys, no whitespace) sealed with its checksum
(:func:`dpone.dlq.model.record_canonical_json`). Building a dict per record and handing it to
orjson costs about 6 µs a record on the reference VM, more than the DLQ's whole budget at
100,000 records/s. Most of a record is the same for every row of a chunk (run, load, times,
policy) or takes few distinct values (reason and column, the diagnostics' types and file), so
this encoder serializes those parts once per distinct value and joins bytes per record: only
the record id, the ``record_ref`` and the row offset are new per row (and the payload under
``masked``/``preserve``, which goes through the general canonical path).

The bytes are the canonical bytes, not an approximation: a property test compares them with
``record_canonical_json(build_record_doc(...))`` over generated rows.
"""

from __future__ import annotations

from typing import Any

import orjson

from dpone.canonical import canonical_json
from dpone.contracts.reasons import ReasonCode
from dpone.dlq.model import (
    RECORD_SCHEMA,
    RejectedRow,
    payload_value,
    reason_block,
)
from dpone.dlq.policy import PiiPolicy
from dpone.dlq.refs import is_replayable

_SORTED = orjson.OPT_SORT_KEYS
_REPLAY = {
    True: orjson.dumps({"replayable": True, "status": "pending"}),
    False: orjson.dumps({"replayable": False, "status": "not_replayable"}),
}
_DiagKey = tuple[str | None, str | None, str | None, str | None, str | None]


class RecordEncoder:
    """Canonical bytes of the records of one run and chunk (one ``created_at``)."""

    def __init__(
        self, *, run_id: str, load_id: str, policy: PiiPolicy, created_at: str, expires_at: str
    ) -> None:
        self._policy = policy
        self.expires_at = expires_at
        self._head = b'{"created_at":' + orjson.dumps(created_at) + b',"diagnostics":'
        self._after_diag = b',"expires_at":' + orjson.dumps(expires_at) + b',"load_id":'
        self._after_diag += orjson.dumps(load_id) + b',"payload":'
        self._tail = b',"run_id":' + orjson.dumps(run_id) + b',"schema":'
        self._tail += orjson.dumps(RECORD_SCHEMA) + b"}"
        self._no_value = orjson.dumps({"policy": policy, "value": None})
        self._reasons: dict[tuple[ReasonCode, str | None], bytes] = {}
        self._diags: dict[_DiagKey, tuple[bytes, bytes]] = {}

    def _reason(self, code: ReasonCode, column: str | None) -> bytes:
        key = (code, column)
        found = self._reasons.get(key)
        if found is None:
            found = self._reasons[key] = canonical_json(reason_block(code, column))
        return found

    def _diagnostics(self, row: RejectedRow) -> tuple[bytes, bytes]:
        """The diagnostics around ``source_offset`` (its keys sort between the two parts)."""
        key = (row.actual_type, row.column, row.expected_type, row.rule_id, row.source_partition)
        found = self._diags.get(key)
        if found is None:
            head = canonical_json(
                {
                    "actual_type": row.actual_type,
                    "column": row.column,
                    "expected_type": row.expected_type,
                    "rule_id": row.rule_id,
                }
            )
            tail = canonical_json({"source_partition": row.source_partition})
            found = self._diags[key] = (head[:-1] + b',"source_offset":', b"," + tail[1:])
        return found

    def encode(self, row: RejectedRow, code: ReasonCode, record_id: str) -> tuple[bytes, int]:
        """The canonical JSON of the record without its ``sha256`` member, and the size of
        its ``diagnostics`` object (bounded by ``max_diagnostic_bytes``)."""
        head, tail = self._diagnostics(row)
        offset = row.source_offset
        number = b"null" if offset is None else str(offset).encode()
        if self._policy == "reference_only" or row.value is None:
            payload = self._no_value
        else:
            value: Any = payload_value(self._policy, row.value)
            payload = canonical_json({"policy": self._policy, "value": value})
        record = b"".join(
            (
                self._head,
                head,
                number,
                tail,
                self._after_diag,
                payload,
                b',"reason":',
                self._reason(code, row.column),
                b',"record_id":',
                orjson.dumps(record_id),
                b',"record_ref":',
                orjson.dumps(row.record_ref),
                b',"replay":',
                _REPLAY[is_replayable(row.record_ref)],
                self._tail,
            )
        )
        return record, len(head) + len(number) + len(tail)


__all__ = ["RecordEncoder"]
