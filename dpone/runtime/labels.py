"""Column names as the run's artifacts may show them.

A column the contract declares is named by the manifest. Any other column is named by the
data: a CSV header, or, when a file has no header row, its first row's values. Under
``pii_policy`` ``reference_only`` or ``masked`` no row value may reach an artifact, a log or a
message (SPEC §5), so such a column is shown by its 1-based position in the source instead
(``column_7``) in the evidence, the DLQ records (``reason.column``, ``diagnostics.column``,
the keys of a masked payload) and contract errors. The sink itself still gets the real names:
it holds the rows anyway. ``preserve`` shows every name as it is.

The lifecycle applies the mapping once, where a chunk's names leave the run: counting
violations, building DLQ rows, raising contract errors and listing schema changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from dpone.contracts.errors import ContractError, ContractViolation, DuplicateColumn, SchemaFrozen
from dpone.contracts.reasons import ReasonCode
from dpone.contracts.spec import VARIANT_PREFIX


class ColumnLabels:
    """Maps a column name to the name artifacts show (see the module docstring)."""

    def __init__(self, declared: Iterable[str], pii_policy: str) -> None:
        self.declared = frozenset(declared)
        self.hide = pii_policy != "preserve"
        self._labels: dict[str, str] = {}
        self._used: set[str] = set(self.declared)

    def see(self, names: Sequence[str]) -> None:
        """Give each undeclared column of a source batch its positional label (first seen)."""
        if not self.hide:
            return
        for position, name in enumerate(names, 1):
            if name not in self.declared and name not in self._labels:
                self._assign(name, f"column_{position}")

    def _assign(self, name: str, label: str) -> str:
        candidate, n = label, 1
        while candidate in self._used:  # another file put another name at this position
            n += 1
            candidate = f"{label}_{n}"
        self._used.add(candidate)
        self._labels[name] = candidate
        return candidate

    def __call__(self, name: str) -> str:
        if not self.hide or not name or name in self.declared:
            return name
        if name.startswith(VARIANT_PREFIX):
            return VARIANT_PREFIX + self(name[len(VARIANT_PREFIX) :])
        label = self._labels.get(name)
        return label if label is not None else self._assign(name, "column_unknown")

    def optional(self, name: str | None) -> str | None:
        return None if name is None else self(name)

    def row(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """A row's mapping with its keys labelled (for masked payloads: shape kept)."""
        return {self(key): value for key, value in row.items()}

    def schema(self, schema: pa.Schema | None) -> pa.Schema | None:
        if schema is None or not self.hide:
            return schema
        return pa.schema([f.with_name(self(f.name)) for f in schema])

    def fields(self, fields: Mapping[str, pa.Field]) -> dict[str, pa.Field]:
        return {self(name): f.with_name(self(name)) for name, f in fields.items()}

    def error(self, err: ContractError) -> ContractError:
        """``err`` with every column name labelled (contract errors name columns)."""
        if not self.hide:
            return err
        if isinstance(err, SchemaFrozen):
            return SchemaFrozen(err.entity, [self(c) for c in err.columns], err.rows)
        if isinstance(err, ContractViolation):
            counts: dict[tuple[str, ReasonCode], int] = {}
            for (column, code), n in err.counts.items():
                key = (self(column), code)
                counts[key] = counts.get(key, 0) + n
            return ContractViolation(err.enforcement, err.rejected_rows, counts)
        if isinstance(err, DuplicateColumn):
            return DuplicateColumn(
                "the input repeats a column name (a header row with a name twice, or a "
                "first data row read as the header)",
                fixes=("give every column a distinct name in the source",),
            )
        return err
