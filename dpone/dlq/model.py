"""The ``dpone.dlq.v1`` record (SPEC §5) and the rejected-row descriptor the writer takes.

Size (over 500 lines): the record's shape, its checks and its document builder are the published
schema's Python twin and change together.

Pure code: no IO. The writer builds record documents with :func:`build_record_doc` on its hot
path (plain dicts, no intermediate objects); reads turn documents back into the frozen
:class:`DlqRecord` through :meth:`DlqRecord.from_json`, which checks everything the published
schema checks and the fixed reason vocabulary on top.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any, ClassVar, Literal, get_args

import orjson

from dpone.canonical import CHECKSUM_PATTERN, canonical_json, fast_path_ok
from dpone.contracts.reasons import REASONS, ReasonCode
from dpone.dlq.errors import DlqInvalidReject, DlqRecordInvalid
from dpone.dlq.policy import PII_POLICIES, PiiPolicy
from dpone.dlq.refs import MAX_REF_LENGTH, has_ref_shape, is_replayable
from dpone.ids import is_identifier, is_ulid

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
_REASON_BY_VALUE: dict[str, ReasonCode] = {code.value: code for code in ReasonCode}

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


# --- the writer's input -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RejectedRow:
    """One rejected row as the lifecycle hands it over. ``value`` is never shown in a repr.

    ``value`` (the row as a mapping) is read only under ``masked`` and ``preserve``; under
    ``reference_only`` the store never looks at it.
    """

    record_ref: str
    reason: ReasonCode
    column: str | None = None
    actual_type: str | None = None
    expected_type: str | None = None
    rule_id: str | None = None
    source_offset: int | None = None
    source_partition: str | None = None
    value: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)


def _as_list(values: Any, count: int, name: str) -> list[Any]:
    """A per-row list from a scalar (broadcast), a sequence or an Arrow array."""
    if values is None or isinstance(values, (str, int)):
        return [values] * count
    to_pylist = getattr(values, "to_pylist", None)
    out = list(to_pylist() if callable(to_pylist) else values)
    if len(out) != count:
        raise DlqInvalidReject(f"{name} has {len(out)} entries for {count} rejected rows")
    return out


def rejected_rows(
    record_refs: Sequence[str] | Any,
    reasons: ReasonCode | str | Sequence[ReasonCode | str] | Any,
    *,
    columns: str | Sequence[str | None] | Any | None = None,
    actual_types: str | Sequence[str | None] | Any | None = None,
    expected_types: str | Sequence[str | None] | Any | None = None,
    rule_ids: str | Sequence[str | None] | Any | None = None,
    source_offsets: int | Sequence[int | None] | Any | None = None,
    source_partitions: str | Sequence[str | None] | Any | None = None,
    rows: Sequence[Mapping[str, Any]] | Any | None = None,
) -> list[RejectedRow]:
    """Build a chunk of descriptors from columnar data.

    Every argument is a scalar (the same for every row), a sequence, or an Arrow array /
    chunked array (anything with ``to_pylist``). ``rows`` is a sequence of mappings or an
    Arrow RecordBatch / Table, converted once; pass it only under ``masked``/``preserve``.
    """
    refs = _as_list(record_refs, len(record_refs), "record_refs")
    count = len(refs)
    try:
        codes = [_REASON_BY_VALUE[r] for r in _as_list(reasons, count, "reasons")]
    except (KeyError, TypeError):
        raise DlqInvalidReject("a reason is not one of the stable reason codes") from None
    cols = _as_list(columns, count, "columns")
    actual = _as_list(actual_types, count, "actual_types")
    expected = _as_list(expected_types, count, "expected_types")
    rules = _as_list(rule_ids, count, "rule_ids")
    offsets = _as_list(source_offsets, count, "source_offsets")
    partitions = _as_list(source_partitions, count, "source_partitions")
    values = [None] * count if rows is None else _as_list(rows, count, "rows")
    return [
        RejectedRow(*fields)
        for fields in zip(
            refs, codes, cols, actual, expected, rules, offsets, partitions, values, strict=True
        )
    ]


# --- payload by pii_policy ----------------------------------------------------------------------


def mask(value: Any) -> Any:
    """Keep the shape (mappings, sequences), replace every scalar with ``[REDACTED]``.

    Text sources hand a nested JSON value over as its text; an object or array text keeps its
    shape too (keys are structure, not values, as for a mapping)."""
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return REDACTED
    if isinstance(value, Mapping):
        return {str(k): mask(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [mask(v) for v in value]
    return REDACTED


def to_json_safe(value: Any) -> Any:
    """A JSON (and RFC 8785) representable copy of a row value, for ``preserve``."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value if -MAX_SAFE_INT <= value <= MAX_SAFE_INT else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Mapping):
        return {str(k): to_json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json_safe(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "base64:" + base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    return str(value)


def payload_value(policy: PiiPolicy, value: Mapping[str, Any] | None) -> Any:
    if policy == "reference_only" or value is None:
        return None
    if policy == "masked":
        return mask(value)
    return to_json_safe(value)


# --- building and checking records --------------------------------------------------------------


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


def check_reject(row: RejectedRow) -> ReasonCode:
    """Refuse a descriptor that cannot become a safe record. Messages carry no values."""
    if not has_ref_shape(row.record_ref):
        raise DlqInvalidReject(
            "record_ref is not a dpone:// reference (use dpone.dlq.refs to build it)"
        )
    code = _REASON_BY_VALUE.get(row.reason) if isinstance(row.reason, str) else None
    if code is None:
        raise DlqInvalidReject("reason is not one of the stable reason codes")
    for name in ("column", "source_partition"):
        text = getattr(row, name)
        if text is not None and (type(text) is not str or not 0 < len(text) <= MAX_NAME_LENGTH):
            raise DlqInvalidReject(f"{name} must be a string of 1..{MAX_NAME_LENGTH} characters")
    for name in ("actual_type", "expected_type", "rule_id"):
        text = getattr(row, name)
        if text is not None and (type(text) is not str or not _SAFE_TOKEN.match(text)):
            raise DlqInvalidReject(
                f"{name} must be a type name or rule id ({SAFE_TOKEN_PATTERN}), never a value"
            )
    offset = row.source_offset
    if offset is not None and (type(offset) is not int or not 0 <= offset <= MAX_SAFE_INT):
        raise DlqInvalidReject("source_offset must be an integer in 0..2**53-1")
    return code


def build_record_doc(
    *,
    record_id: str,
    run_id: str,
    load_id: str,
    row: RejectedRow,
    code: ReasonCode,
    policy: PiiPolicy,
    created_at: str,
    expires_at: str,
) -> dict[str, Any]:
    """The record document without its checksum (the hot path: one dict per record)."""
    replayable = is_replayable(row.record_ref)
    return {
        "schema": RECORD_SCHEMA,
        "record_id": record_id,
        "run_id": run_id,
        "load_id": load_id,
        "record_ref": row.record_ref,
        "reason": reason_block(code, row.column),
        "diagnostics": {
            "actual_type": row.actual_type,
            "column": row.column,
            "expected_type": row.expected_type,
            "rule_id": row.rule_id,
            "source_offset": row.source_offset,
            "source_partition": row.source_partition,
        },
        "payload": {"policy": policy, "value": payload_value(policy, row.value)},
        "replay": {
            "status": "pending" if replayable else "not_replayable",
            "replayable": replayable,
        },
        "created_at": created_at,
        "expires_at": expires_at,
    }


_SORTED = orjson.OPT_SORT_KEYS


def record_canonical_json(doc: dict[str, Any]) -> bytes:
    """RFC 8785 bytes of a record that :func:`build_record_doc` made from a checked row.

    Everything but ``payload.value`` is in the fast-path domain of
    :func:`dpone.canonical.canonical_json` by construction: fixed ASCII keys, strings,
    ``None``, booleans and integers that :func:`check_reject` bounded. Only the payload needs
    the check, which keeps the per-record cost of the checksum near one orjson call (a
    property test compares this with the ``rfc8785`` package).
    """
    if fast_path_ok(doc["payload"]["value"]):
        return orjson.dumps(doc, option=_SORTED)
    return canonical_json(doc)


def sealed_record_bytes(canonical: bytes, sha256: str) -> bytes:
    """The file bytes of a record: its canonical JSON with ``sha256`` added, and a newline.

    ``sha256`` sorts after every other record key, so the sealed document is the canonical
    document with one member appended, still in canonical key order.
    """
    return canonical[:-1] + b',"sha256":"' + sha256.encode("ascii") + b'"}\n'


# --- the record as read back --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reason:
    category: str
    code: ReasonCode
    stage: str
    message: str
    column: str | None = None

    def to_json(self) -> dict[str, Any]:
        return reason_block(self.code, self.column)


@dataclass(frozen=True, slots=True)
class Diagnostics:
    actual_type: str | None = None
    column: str | None = None
    expected_type: str | None = None
    rule_id: str | None = None
    source_offset: int | None = None
    source_partition: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in DIAGNOSTIC_KEYS}


@dataclass(frozen=True, slots=True)
class Payload:
    policy: PiiPolicy
    value: Any = field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {"policy": self.policy, "value": self.value}


@dataclass(frozen=True, slots=True)
class Replay:
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


@dataclass(frozen=True, slots=True)
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
    code = _REASON_BY_VALUE.get(doc["code"]) if type(doc["code"]) is str else None
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
    "RECORD_SCHEMA",
    "REDACTED",
    "REPLAY_STATUSES",
    "Diagnostics",
    "DlqRecord",
    "Payload",
    "Reason",
    "RejectedRow",
    "Replay",
    "ReplayStatus",
    "build_record_doc",
    "check_reject",
    "mask",
    "payload_value",
    "record_canonical_json",
    "rejected_rows",
    "sealed_record_bytes",
    "to_json_safe",
]
