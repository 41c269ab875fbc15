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


#: How many failing rows a strict failure names (by record_ref, never by value).
NAMED_ROWS = 10


class ContractViolation(ContractError):
    """``strict``: at least one row does not fit the contract; nothing may load.

    ``record_refs`` name the first failing rows (at most :data:`NAMED_ROWS`), so the user finds
    them without a rerun; the enforcer knows positions only, the run adds the refs
    (:meth:`naming`).
    """

    code = "DPONE_CONTRACT_VIOLATION"

    def __init__(
        self,
        enforcement: str,
        rejected_rows: int,
        counts: Mapping[tuple[str, ReasonCode], int],
        record_refs: Sequence[str] = (),
    ) -> None:
        self.enforcement = enforcement
        self.rejected_rows = rejected_rows
        self.counts = dict(counts)
        named = ""
        if record_refs:
            named = f"; the first {len(record_refs)} failing row(s) are in record_refs"
        super().__init__(
            f"{rejected_rows} row(s) violate the contract under enforcement {enforcement!r}: "
            f"{_summary(counts)}{named}",
            fixes=(
                "fix the source data or the contract",
                "or use enforcement: quarantine to load the valid rows, the rest to the DLQ",
            ),
            record_refs=tuple(record_refs)[:NAMED_ROWS],
        )

    def naming(self, record_refs: Sequence[str]) -> ContractViolation:
        """This violation, naming its first failing rows."""
        return ContractViolation(self.enforcement, self.rejected_rows, self.counts, record_refs)


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
