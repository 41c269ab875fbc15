"""The rejected-row descriptor the writer takes, and the ``dpone.dlq.v1`` document built from it.

Pure code: no IO. The writer builds record documents on its hot path as plain dicts
(:func:`build_record_doc`; :mod:`dpone.dlq.encode` builds their bytes column by column and a
property test holds the two equal). A descriptor that cannot become a safe record is refused
(:func:`check_reject`), with messages that carry no values.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import field
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

import orjson

from dpone.canonical import canonical_json, fast_path_ok
from dpone.contracts.dlq import PiiPolicy
from dpone.contracts.reasons import ReasonCode
from dpone.dlq.errors import DlqInvalidReject
from dpone.dlq.model import (
    MAX_NAME_LENGTH,
    MAX_SAFE_INT,
    REASON_BY_VALUE,
    RECORD_SCHEMA,
    REDACTED,
    SAFE_TOKEN_PATTERN,
    reason_block,
)
from dpone.dlq.refs import has_ref_shape, is_replayable
from dpone.records import frozen

_SAFE_TOKEN = re.compile(SAFE_TOKEN_PATTERN)


# --- the writer's input -------------------------------------------------------------------------


@frozen
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
        codes = [REASON_BY_VALUE[r] for r in _as_list(reasons, count, "reasons")]
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


def check_reject(row: RejectedRow) -> ReasonCode:
    """Refuse a descriptor that cannot become a safe record. Messages carry no values."""
    if not has_ref_shape(row.record_ref):
        raise DlqInvalidReject(
            "record_ref is not a dpone:// reference (use dpone.dlq.refs to build it)"
        )
    code = REASON_BY_VALUE.get(row.reason) if isinstance(row.reason, str) else None
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


__all__ = [
    "RejectedRow",
    "build_record_doc",
    "check_reject",
    "mask",
    "payload_value",
    "record_canonical_json",
    "rejected_rows",
    "sealed_record_bytes",
    "to_json_safe",
]
