"""The declared contract, as the manifest compiler hands it to the enforcement engine.

Pure data: frozen, slotted dataclasses whose vocabularies mirror the enums of
``schemas/dpone.manifest.v1.schema.json`` (a test checks they match).
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, Literal, get_args

from dpone.records import frozen

LogicalType = Literal[
    "string",
    "integer",
    "bigint",
    "float",
    "decimal",
    "boolean",
    "date",
    "time",
    "timestamp",
    "json",
    "binary",
]
Enforcement = Literal["strict", "coerce", "quarantine", "warn"]
EvolutionMode = Literal["evolve", "freeze", "discard_row", "discard_value"]
Coercion = Literal["none", "safe"]
ConflictPolicy = Literal["fail", "quarantine", "variant_column"]

LOGICAL_TYPES: tuple[str, ...] = get_args(LogicalType)
ENFORCEMENTS: tuple[str, ...] = get_args(Enforcement)
EVOLUTION_MODES: tuple[str, ...] = get_args(EvolutionMode)
CONFLICT_POLICIES: tuple[str, ...] = get_args(ConflictPolicy)
COERCIONS: tuple[str, ...] = get_args(Coercion)

VARIANT_PREFIX = "__dpone__nc__"


@frozen
class ColumnSpec:
    """One declared column. ``precision``/``scale`` only for decimal, ``timezone`` for timestamp.
    ``source``: the source column's name as written, when it is not ``name`` (a rename)."""

    name: str
    type: LogicalType
    nullable: bool = True
    precision: int | None = None
    scale: int | None = None
    timezone: bool | None = None
    source: str | None = None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"type": self.type, "nullable": self.nullable}
        if self.precision is not None:
            doc["precision"] = self.precision
        if self.scale is not None:
            doc["scale"] = self.scale
        if self.timezone is not None:
            doc["timezone"] = self.timezone
        if self.source is not None:
            doc["source"] = self.source
        return doc


@frozen
class EvolutionSpec:
    """dlt's vocabulary for what the contract does not declare (see SPEC §3)."""

    tables: EvolutionMode = "evolve"
    columns: EvolutionMode = "evolve"
    data_type: EvolutionMode = "evolve"

    def to_json(self) -> dict[str, Any]:
        return {"tables": self.tables, "columns": self.columns, "data_type": self.data_type}


@frozen
class TypeInferenceSpec:
    """``type_inference``: how the columns the contract does not declare get their types."""

    enabled: bool = True
    sample_rows: int = 10_000
    empty_string_is_null: bool = False
    conflict_policy: ConflictPolicy = "fail"

    def to_json(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "sample_rows": self.sample_rows,
            "empty_string_is_null": self.empty_string_is_null,
            "conflict_policy": self.conflict_policy,
        }


@frozen
class ContractSpec:
    """The whole declared contract of one sink table."""

    enforcement: Enforcement = "strict"
    columns: tuple[ColumnSpec, ...] = ()
    #: ``safe``: coerce's lossless repairs apply before the checks (``coerce`` always has them)
    coercion: Coercion = "none"
    evolution: EvolutionSpec = field(default_factory=EvolutionSpec)
    type_inference: TypeInferenceSpec = field(default_factory=TypeInferenceSpec)

    def column(self, name: str) -> ColumnSpec | None:
        for col in self.columns:
            if col.name == name:
                return col
        return None

    @property
    def safe_coercion(self) -> bool:
        """Whether values may be repaired losslessly (``1e2`` -> 100) or must be canonical."""
        return self.enforcement == "coerce" or self.coercion == "safe"

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def to_json(self) -> dict[str, Any]:
        return {
            "enforcement": self.enforcement,
            "coercion": "safe" if self.safe_coercion else "none",
            "columns": {c.name: c.to_json() for c in self.columns},
            "evolution": self.evolution.to_json(),
            "type_inference": self.type_inference.to_json(),
        }
