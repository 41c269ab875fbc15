"""The ``dpone.dlq.v1`` record (SPEC §5) as read back, and the constants of its contract.

Pure code: no IO. Reads turn documents into the frozen :class:`DlqRecord` through
:meth:`DlqRecord.from_json`, which checks everything the published schema checks and the
fixed reason vocabulary on top. How a record is built from a rejected row is
:mod:`dpone.dlq.rejects`.
"""

from __future__ import annotations

import re
from dataclasses import field
from datetime import datetime
from typing import Any, ClassVar, Literal, get_args

from dpone.canonical import CHECKSUM_PATTERN
from dpone.contracts.dlq import PII_POLICIES, PiiPolicy
from dpone.contracts.reasons import REASONS, ReasonCode
from dpone.dlq.errors import DlqRecordInvalid
from dpone.dlq.refs import MAX_REF_LENGTH, is_replayable
from dpone.ids import is_identifier, is_ulid
from dpone.records import frozen

RECORD_SCHEMA = "dpone.dlq.v1"
REDACTED = "[REDACTED]"
ReplayStatus = Literal["pending", "not_replayable"]
REPLAY_STATUSES: tuple[str, ...] = get_args(ReplayStatus)

TIMESTAMP_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$"
# Type names and rule ids are metadata ("decimal(18,2)", "timestamp[us, tz=UTC]",
# "quality:known_kind"). The narrow alphabet keeps a value from riding along by mistake.
SAFE_TOKEN_PATTERN = r"^[A-Za-z0-9 _.,:;()\[\]<>=+/-]{1,200}$"
MAX_SAFE_INT = 2**53 - 1
MAX_NAME_LENGTH = 1024

_TIMESTAMP = re.compile(TIMESTAMP_PATTERN)
_SAFE_TOKEN = re.compile(SAFE_TOKEN_PATTERN)
_CHECKSUM = re.compile(CHECKSUM_PATTERN)
REASON_BY_VALUE: dict[str, ReasonCode] = {code.value: code for code in ReasonCode}

RECORD_KEYS = frozenset(
    {
        "schema",
        "record_id",
        "run_id",
        "load_id",
        "record_ref",
        "reason",
        "diagnostics",
        "payload",
        "replay",
        "created_at",
        "expires_at",
        "sha256",
    }
)
DIAGNOSTIC_KEYS = (
    "actual_type",
    "column",
    "expected_type",
    "rule_id",
    "source_offset",
    "source_partition",
)


def parse_timestamp(text: str) -> datetime:
    return datetime.fromisoformat(text)


# --- the fixed reason blocks -------------------------------------------------------------------


def _reason_template(code: ReasonCode) -> dict[str, Any]:
    info = REASONS[code]
    return {
        "category": code.category,
        "code": code.value,
        "stage": info.stage,
        "message": info.message,
    }


_REASON_TEMPLATES: dict[ReasonCode, dict[str, Any]] = {c: _reason_template(c) for c in ReasonCode}


def reason_block(code: ReasonCode, column: str | None) -> dict[str, Any]:
    """The record's ``reason``: the code's fixed category, stage and message, and the column."""
    block = dict(_REASON_TEMPLATES[code])
    if column is not None:
        block["column"] = column
    return block


# --- the record as read back --------------------------------------------------------------------


@frozen
class Reason:
    """The record's ``reason``: its code (with its fixed category, stage, message) and column."""

    category: str
    code: ReasonCode
    stage: str
    message: str
    column: str | None = None

    def to_json(self) -> dict[str, Any]:
        return reason_block(self.code, self.column)


@frozen
class Diagnostics:
    """The record's ``diagnostics``: value-free metadata (types, column, rule, source position)."""

    actual_type: str | None = None
    column: str | None = None
    expected_type: str | None = None
    rule_id: str | None = None
    source_offset: int | None = None
    source_partition: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in DIAGNOSTIC_KEYS}


@frozen
class Payload:
    """The record's ``payload``: the row's values as its PII policy allows (none, masked, kept)."""

    policy: PiiPolicy
    value: Any = field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {"policy": self.policy, "value": self.value}


@frozen
class Replay:
    """The record's ``replay``: whether its row can be re-read from the source, and its status."""

    status: ReplayStatus
    replayable: bool

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "replayable": self.replayable}


def _invalid(pointer: str) -> DlqRecordInvalid:
    return DlqRecordInvalid(f"the DLQ record is not a valid dpone.dlq.v1 document at {pointer}")


def _exact_keys(
    doc: Any, keys: set[str] | frozenset[str], pointer: str, optional: str = ""
) -> None:
    if not isinstance(doc, dict):
        raise _invalid(pointer or "/")
    present = set(doc)
    if optional:
        present.discard(optional)
    if present != keys:
        raise _invalid(pointer or "/")


def _opt_str(value: Any, pointer: str, pattern: re.Pattern[str] | None = None) -> str | None:
    if value is None:
        return None
    if type(value) is not str or not value or len(value) > MAX_NAME_LENGTH:
        raise _invalid(pointer)
    if pattern is not None and not pattern.match(value):
        raise _invalid(pointer)
    return value


def _only_redacted(value: Any) -> bool:
    if isinstance(value, dict):
        return all(_only_redacted(v) for v in value.values())
    if isinstance(value, list):
        return all(_only_redacted(v) for v in value)
    return bool(value == REDACTED)


@frozen
class DlqRecord:
    """One rejected row, as durable metadata. Immutable once written."""

    schema: ClassVar[str] = RECORD_SCHEMA

    record_id: str
    run_id: str
    load_id: str
    record_ref: str
    reason: Reason
    diagnostics: Diagnostics
    payload: Payload
    replay: Replay
    created_at: str
    expires_at: str
    sha256: str

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": RECORD_SCHEMA,
            "record_id": self.record_id,
            "run_id": self.run_id,
            "load_id": self.load_id,
            "record_ref": self.record_ref,
            "reason": self.reason.to_json(),
            "diagnostics": self.diagnostics.to_json(),
            "payload": self.payload.to_json(),
            "replay": self.replay.to_json(),
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "sha256": self.sha256,
        }

    @classmethod
    def from_json(cls, doc: Any) -> DlqRecord:
        """Check ``doc`` against the record contract (not its checksum: the store does that)."""
        _exact_keys(doc, RECORD_KEYS, "")
        if doc["schema"] != RECORD_SCHEMA:
            raise _invalid("/schema")
        for key in ("record_id",):
            if not is_ulid(doc[key]):
                raise _invalid(f"/{key}")
        for key in ("run_id", "load_id"):
            if not is_identifier(doc[key]):
                raise _invalid(f"/{key}")
        ref = doc["record_ref"]
        if type(ref) is not str or not ref.startswith("dpone://") or len(ref) > MAX_REF_LENGTH:
            raise _invalid("/record_ref")
        if type(doc["sha256"]) is not str or not _CHECKSUM.match(doc["sha256"]):
            raise _invalid("/sha256")
        for key in ("created_at", "expires_at"):
            if type(doc[key]) is not str or not _TIMESTAMP.match(doc[key]):
                raise _invalid(f"/{key}")
        if doc["expires_at"] < doc["created_at"]:
            raise _invalid("/expires_at")
        return cls(
            record_id=doc["record_id"],
            run_id=doc["run_id"],
            load_id=doc["load_id"],
            record_ref=ref,
            reason=_reason_from_json(doc["reason"]),
            diagnostics=_diagnostics_from_json(doc["diagnostics"]),
            payload=_payload_from_json(doc["payload"]),
            replay=_replay_from_json(doc["replay"], ref),
            created_at=doc["created_at"],
            expires_at=doc["expires_at"],
            sha256=doc["sha256"],
        )


def _reason_from_json(doc: Any) -> Reason:
    _exact_keys(doc, {"category", "code", "stage", "message"}, "/reason", optional="column")
    code = REASON_BY_VALUE.get(doc["code"]) if type(doc["code"]) is str else None
    if code is None:
        raise _invalid("/reason/code")
    expected = reason_block(code, None)
    for key in ("category", "stage", "message"):
        if doc[key] != expected[key]:
            raise _invalid(f"/reason/{key}")
    column = _opt_str(doc.get("column"), "/reason/column")
    if "column" in doc and column is None:
        raise _invalid("/reason/column")
    return Reason(code.category, code, doc["stage"], doc["message"], column)


def _diagnostics_from_json(doc: Any) -> Diagnostics:
    _exact_keys(doc, set(DIAGNOSTIC_KEYS), "/diagnostics")
    offset = doc["source_offset"]
    if offset is not None and (type(offset) is not int or not 0 <= offset <= MAX_SAFE_INT):
        raise _invalid("/diagnostics/source_offset")
    return Diagnostics(
        actual_type=_opt_str(doc["actual_type"], "/diagnostics/actual_type", _SAFE_TOKEN),
        column=_opt_str(doc["column"], "/diagnostics/column"),
        expected_type=_opt_str(doc["expected_type"], "/diagnostics/expected_type", _SAFE_TOKEN),
        rule_id=_opt_str(doc["rule_id"], "/diagnostics/rule_id", _SAFE_TOKEN),
        source_offset=offset,
        source_partition=_opt_str(doc["source_partition"], "/diagnostics/source_partition"),
    )


def _payload_from_json(doc: Any) -> Payload:
    _exact_keys(doc, {"policy", "value"}, "/payload")
    policy = doc["policy"]
    if policy not in PII_POLICIES:
        raise _invalid("/payload/policy")
    value = doc["value"]
    if policy == "reference_only" and value is not None:
        raise _invalid("/payload/value")
    if policy == "masked" and value is not None and not _only_redacted(value):
        raise _invalid("/payload/value")
    return Payload(policy, value)


def _replay_from_json(doc: Any, ref: str) -> Replay:
    _exact_keys(doc, {"status", "replayable"}, "/replay")
    if type(doc["replayable"]) is not bool or doc["replayable"] != is_replayable(ref):
        raise _invalid("/replay/replayable")
    expected = "pending" if doc["replayable"] else "not_replayable"
    if doc["status"] != expected:
        raise _invalid("/replay/status")
    return Replay(doc["status"], doc["replayable"])


__all__ = [
    "DIAGNOSTIC_KEYS",
    "MAX_NAME_LENGTH",
    "MAX_SAFE_INT",
    "REASON_BY_VALUE",
    "RECORD_KEYS",
    "RECORD_SCHEMA",
    "REDACTED",
    "REPLAY_STATUSES",
    "SAFE_TOKEN_PATTERN",
    "TIMESTAMP_PATTERN",
    "Diagnostics",
    "DlqRecord",
    "Payload",
    "Reason",
    "Replay",
    "ReplayStatus",
    "parse_timestamp",
    "reason_block",
]
