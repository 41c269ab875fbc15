"""Errors of contract enforcement: stable codes, counts and column names, never row values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dpone.contracts.reasons import ReasonCode
from dpone.errors import ConfigError, DponeError


class ContractDefinitionError(ConfigError):
    """A contract the engine cannot enforce (unknown type, decimal out of range)."""

    code = "DPONE_CONTRACT_INVALID"
    stage = "compile"


class ContractError(DponeError):
    """The run must stop before the sink commits because of the contract."""

    code = "DPONE_CONTRACT_ERROR"
    stage = "enforce"


class DuplicateColumn(ContractError):
    """The input repeats a column name exactly as written (its message names them)."""

    code = "DPONE_CONTRACT_DUPLICATE_COLUMN"


def _summary(counts: Mapping[tuple[str, ReasonCode], int], limit: int = 8) -> str:
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1]))
    text = ", ".join(f"{col} {code.value} x{n}" for (col, code), n in items[:limit])
    if len(items) > limit:
        text += f", and {len(items) - limit} more"
    return text


class ContractViolation(ContractError):
    """``strict``/``coerce``: at least one row does not fit the contract; nothing may load."""

    code = "DPONE_CONTRACT_VIOLATION"

    def __init__(
        self,
        enforcement: str,
        rejected_rows: int,
        counts: Mapping[tuple[str, ReasonCode], int],
    ) -> None:
        self.enforcement = enforcement
        self.rejected_rows = rejected_rows
        self.counts = dict(counts)
        super().__init__(
            f"{rejected_rows} row(s) violate the contract under enforcement {enforcement!r}: "
            f"{_summary(counts)}",
            fixes=(
                "fix the source data or the contract",
                "or use enforcement: quarantine to load the valid rows, the rest to the DLQ",
            ),
        )


class SchemaFrozen(ContractError):
    """``evolution: freeze`` met a table, column or data type the sink does not hold."""

    code = "DPONE_SCHEMA_FROZEN"

    def __init__(self, entity: str, columns: Sequence[str], rows: int) -> None:
        self.entity = entity
        self.columns = tuple(columns)
        self.rows = rows
        where = f" ({', '.join(self.columns)})" if self.columns else ""
        super().__init__(
            f"evolution.{entity} is frozen and {rows} row(s) would change the sink schema{where}",
            fixes=(
                f"declare the change in the contract or set evolution.{entity} to evolve, "
                "discard_row or discard_value",
            ),
        )
