"""The evidence's ``compatibility`` facet: each schema change of a run, additive or breaking.

A change is judged from the side of whoever reads the table: **additive** when every query
that worked before still works and returns what it returned (a new table, a new column, a
variant column, a type that widens the old one), **breaking** otherwise (a column the load no
longer carries, a type that is not a widening, a column that became required). The rule is
documented in ``docs/contracts.md`` ("Compatibility of schema changes"); the widening table
is :func:`widens`. Names and logical types only, never a value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import pyarrow as pa

from dpone.contracts.spec import VARIANT_PREFIX
from dpone.contracts.types import spec_from_arrow, type_label
from dpone.evidence.model import SchemaChange
from dpone.records import frozen

Compatibility = Literal["additive", "breaking"]
Level = Literal["none", "additive", "breaking"]
ChangeKind = Literal[
    "table_created",
    "column_added",
    "variant_column_created",
    "type_widened",
    "type_changed",
    "column_missing",
    "nullability_tightened",
]
_CLASS: dict[ChangeKind, Compatibility] = {
    "table_created": "additive",
    "column_added": "additive",
    "variant_column_created": "additive",
    "type_widened": "additive",
    "type_changed": "breaking",
    "column_missing": "breaking",
    "nullability_tightened": "breaking",
}
#: Integers are 64-bit: a decimal holds every one of them with 19 integer digits.
_INTEGER_DIGITS = 19
#: Logical types stored as the same text: a sink may report a JSON column as a string.
_SAME = {frozenset({"string", "json"})}


@frozen
class CompatibilityChange:
    """One change of the table's schema, ``before`` and ``after`` as logical type labels."""

    change: ChangeKind
    table: str
    column: str | None
    before: str | None
    after: str | None

    @property
    def compatibility(self) -> Compatibility:
        return _CLASS[self.change]

    def to_json(self) -> dict[str, Any]:
        return {
            "change": self.change,
            "table": self.table,
            "column": self.column,
            "before": self.before,
            "after": self.after,
            "compatibility": self.compatibility,
        }


@frozen
class CompatibilityReport:
    """The schema changes of a run, each additive or breaking (the evidence's ``compatibility``)."""

    changes: tuple[CompatibilityChange, ...] = ()

    @property
    def level(self) -> Level:
        """The worst of the changes: ``none`` when the schema did not change."""
        if any(c.compatibility == "breaking" for c in self.changes):
            return "breaking"
        return "additive" if self.changes else "none"

    def to_json(self) -> dict[str, Any]:
        return {"level": self.level, "changes": [c.to_json() for c in self.changes]}


def label(f: pa.Field) -> str:
    """The logical type of an Arrow field (``decimal(12,2)``, ``timestamp(tz)``...)."""
    return type_label(spec_from_arrow(f.name, f.type, f.metadata))


def widens(before: str, after: str) -> bool:
    """Whether every value of the logical type ``before`` is a value of ``after``.

    The widening table: a decimal to one with at least as many integer and fraction digits;
    an integer (64-bit) to a decimal with at least 19 integer digits; a date to a timestamp
    (midnight). Everything else that differs is a change of type.
    """
    if before == after or frozenset({before, after}) in _SAME:
        return True
    target = _decimal(after)
    if target is not None:
        p2, s2 = target
        if before == "integer":
            return p2 - s2 >= _INTEGER_DIGITS
        source = _decimal(before)
        if source is not None:
            p, s = source
            return s2 >= s and p2 - s2 >= p - s
    return before == "date" and after in ("timestamp", "timestamp(tz)")


def _decimal(label_: str) -> tuple[int, int] | None:
    if not label_.startswith("decimal("):
        return None
    precision, scale = label_[len("decimal(") : -1].split(",")
    return int(precision), int(scale)


def compatibility(
    table: str,
    existing: pa.Schema | None,
    written: Mapping[str, pa.Field],
    changes: tuple[SchemaChange, ...],
) -> CompatibilityReport:
    """Classify the run's ``changes`` (:func:`dpone.evidence.model.schema_changes`) and how
    the load's columns (``written``) differ from the table before it (``existing``)."""
    found = [
        CompatibilityChange(c.change, c.table, c.column, None, c.type)
        for c in changes
        if c.change != "table_created" or existing is None
    ]
    if existing is None:
        return CompatibilityReport(tuple(found))
    for before in existing:
        after = written.get(before.name)
        if after is None:
            # A variant column holds only a run's non-fitting values: a run without any
            # writes none, and the column stays.
            if not before.name.startswith(VARIANT_PREFIX):
                found.append(
                    CompatibilityChange("column_missing", table, before.name, label(before), None)
                )
            continue
        old, new = label(before), label(after)
        if old != new and frozenset({old, new}) not in _SAME:
            kind: ChangeKind = "type_widened" if widens(old, new) else "type_changed"
            found.append(CompatibilityChange(kind, table, before.name, old, new))
        if before.nullable and not after.nullable:
            found.append(CompatibilityChange("nullability_tightened", table, before.name, old, new))
    return CompatibilityReport(tuple(found))


__all__ = ["CompatibilityChange", "CompatibilityReport", "compatibility", "label", "widens"]
