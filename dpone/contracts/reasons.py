"""Stable reason codes for rejected rows and violations (SPEC §5).

Each code has a category, the lifecycle stage that raises it and a fixed message that never
contains a value. Vendor text never becomes a code or a durable diagnostic.
"""

from __future__ import annotations

from enum import StrEnum

from dpone.records import frozen


class ReasonCode(StrEnum):
    REQUIRED_NULL = "schema.required_null"
    TYPE_MISMATCH = "schema.type_mismatch"
    COLUMN_NOT_ALLOWED = "schema.column_not_allowed"
    DECODE_FAILED = "source.decode_failed"
    TRANSFORM_FAILED = "transform.failed"
    RULE_FAILED = "quality.rule_failed"
    SINK_ROW_REJECTED = "sink.row_rejected"
    CDC_POISON = "cdc.poison"
    UNCLASSIFIED = "unknown.unclassified"

    @property
    def category(self) -> str:
        return self.value.split(".", 1)[0]

    @property
    def info(self) -> ReasonInfo:
        return REASONS[self]


@frozen
class ReasonInfo:
    """What a reason code fixes: the lifecycle stage that raises it and its value-free message."""

    stage: str
    message: str


REASONS: dict[ReasonCode, ReasonInfo] = {
    ReasonCode.REQUIRED_NULL: ReasonInfo("enforce", "a required column is null"),
    ReasonCode.TYPE_MISMATCH: ReasonInfo("enforce", "a value does not fit the column's type"),
    ReasonCode.COLUMN_NOT_ALLOWED: ReasonInfo(
        "enforce", "the row has a column the contract does not allow"
    ),
    ReasonCode.DECODE_FAILED: ReasonInfo("read", "the source row could not be decoded"),
    ReasonCode.TRANSFORM_FAILED: ReasonInfo("transform", "a transformation of the row failed"),
    ReasonCode.RULE_FAILED: ReasonInfo("assert", "the row failed a quality assertion"),
    ReasonCode.SINK_ROW_REJECTED: ReasonInfo("sink", "the sink rejected the row"),
    ReasonCode.CDC_POISON: ReasonInfo("read", "a change event could not be applied"),
    ReasonCode.UNCLASSIFIED: ReasonInfo(
        "runtime", "the row was rejected for an unclassified reason"
    ),
}
