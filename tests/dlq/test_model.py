"""The dpone.dlq.v1 record model, payload policies and the bulk descriptor builder."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from dpone.contracts.reasons import REASONS, ReasonCode
from dpone.dlq.errors import DlqInvalidReject, DlqRecordInvalid
from dpone.dlq.model import REDACTED, DlqRecord
from dpone.dlq.refs import file_ref
from dpone.dlq.rejects import (
    RejectedRow,
    check_reject,
    mask,
    payload_value,
    rejected_rows,
    to_json_safe,
)
from dpone.dlq.store import DlqStore
from tests.support.dlqrows import rows


def test_bulk_builder_from_arrow_columns() -> None:
    batch = pa.record_batch({"id": [1, 2, 3], "amount": ["x", "1.5", None]})
    refs = pa.array([file_ref("a.csv", "0" * 64, n) for n in (1, 2, 3)])
    out = rejected_rows(
        refs,
        pa.array(["schema.type_mismatch", "schema.type_mismatch", "schema.required_null"]),
        columns="amount",
        source_offsets=pa.array([0, 1, 2]),
        rows=batch,
    )
    assert [r.reason for r in out] == [
        ReasonCode.TYPE_MISMATCH,
        ReasonCode.TYPE_MISMATCH,
        ReasonCode.REQUIRED_NULL,
    ]
    assert out[2].value == {"id": 3, "amount": None}
    assert out[1].source_offset == 1
    assert out[1].column == "amount"


def test_bulk_builder_refuses_wrong_lengths_and_codes() -> None:
    refs = [file_ref("a.csv", "0" * 64, 1)]
    with pytest.raises(DlqInvalidReject):
        rejected_rows(refs, ReasonCode.TYPE_MISMATCH, columns=["a", "b"])
    with pytest.raises(DlqInvalidReject):
        rejected_rows(refs, "schema.made_up")


def test_rejected_row_repr_never_shows_the_value() -> None:
    row = RejectedRow(file_ref("a.csv", "0" * 64, 1), ReasonCode.TYPE_MISMATCH, value={"x": "s3"})
    assert "s3" not in repr(row)


def test_mask_keeps_shape() -> None:
    assert mask({"a": 1, "b": [1, {"c": None}], "d": "x"}) == {
        "a": REDACTED,
        "b": [REDACTED, {"c": REDACTED}],
        "d": REDACTED,
    }
    assert payload_value("reference_only", {"a": 1}) is None
    assert payload_value("masked", None) is None


def test_preserve_makes_values_json_safe() -> None:
    value = {
        "big": 2**60,
        "nan": float("nan"),
        "dec": Decimal("12.30"),
        "ts": datetime(2026, 1, 1, tzinfo=UTC),
        "d": date(2026, 1, 2),
        "b": b"\x00\x01",
        "nested": ({"k": 1.5},),
    }
    assert to_json_safe(value) == {
        "big": str(2**60),
        "nan": "nan",
        "dec": "12.30",
        "ts": "2026-01-01T00:00:00+00:00",
        "d": "2026-01-02",
        "b": "base64:AAE=",
        "nested": [{"k": 1.5}],
    }


@pytest.mark.parametrize(
    "change",
    [
        {"record_ref": "dpone:/bad"},
        {"actual_type": "it was 'secret value'!"},
        {"source_offset": -1},
        {"source_offset": True},
        {"column": ""},
    ],
)
def test_check_reject_refuses_unsafe_descriptors(change: dict[str, Any]) -> None:
    fields: dict[str, Any] = {
        "record_ref": file_ref("a.csv", "0" * 64, 1),
        "reason": ReasonCode.TYPE_MISMATCH,
        **change,
    }
    with pytest.raises(DlqInvalidReject):
        check_reject(RejectedRow(**fields))


def test_written_record_round_trips_through_the_model(store: DlqStore) -> None:
    writer = store.open_run("run-1", "load-1")
    [record_id] = writer.write_chunk(rows(1))
    record = store.read_record("run-1", record_id)
    assert DlqRecord.from_json(record.to_json()) == record
    info = REASONS[ReasonCode.TYPE_MISMATCH]
    assert record.reason.message == info.message
    assert record.reason.stage == info.stage
    assert record.reason.category == "schema"
    assert record.reason.column == "amount"
    assert record.payload.value is None
    assert record.payload.policy == "reference_only"
    assert record.replay.replayable
    assert record.replay.status == "pending"
    assert record.created_at == "2026-03-01T12:00:00.000000Z"
    assert record.expires_at == "2026-03-31T12:00:00.000000Z"
    writer.close()


@pytest.mark.parametrize(
    ("pointer", "change"),
    [
        ("/", {"extra": 1}),
        ("/reason/message", {"reason": {"message": "a value 42 was bad"}}),
        ("/reason/category", {"reason": {"category": "quality"}}),
        ("/payload/value", {"payload": {"policy": "reference_only", "value": {"a": 1}}}),
        ("/payload/value", {"payload": {"policy": "masked", "value": {"a": "clear"}}}),
        ("/replay/status", {"replay": {"status": "not_replayable", "replayable": True}}),
        ("/record_id", {"record_id": "not-a-ulid"}),
    ],
)
def test_from_json_refuses_broken_records(
    store: DlqStore, pointer: str, change: dict[str, Any]
) -> None:
    writer = store.open_run("run-1", "load-1")
    [record_id] = writer.write_chunk(rows(1))
    doc = store.read_record("run-1", record_id).to_json()
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(doc.get(key), dict):
            doc[key] = {**doc[key], **value}
        else:
            doc[key] = value
    with pytest.raises(DlqRecordInvalid, match=pointer.replace("/", "/") or "/"):
        DlqRecord.from_json(doc)
    writer.close()
