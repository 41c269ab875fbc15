"""What one enforcement of one chunk returns: Arrow-backed, value-free diagnostics."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from enum import StrEnum
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dpone.contracts.errors import ContractError
from dpone.contracts.reasons import ReasonCode
from dpone.records import frozen

#: The ``column`` of a violation that concerns the whole table (``evolution.tables``).
TABLE_SCOPE = "*"


class Action(StrEnum):
    """What the engine did with a violation."""

    REJECT = "reject"  # the row is rejected (fails strict; the DLQ or a count otherwise)
    NULL = "null"  # the value loads as NULL (warn, evolution discard_value)
    VARIANT = "variant_column"  # the text goes to __dpone__nc__<column>, the column gets NULL
    DROP_COLUMN = "drop_column"  # a column the sink may not gain is left out (discard_value)
    FAIL = "fail"  # evolution freeze: the run fails before the sink commits


@frozen
class Violation:
    """One value of one row that broke the contract. Names and types only, never the value."""

    column: str
    code: ReasonCode
    expected_type: str | None = None
    actual_type: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "column": self.column,
            "code": self.code.value,
            "expected_type": self.expected_type,
            "actual_type": self.actual_type,
        }


@frozen
class RowRejection:
    """One rejected row of a chunk by position; ``reason``/``column`` name its first violation.

    Not to be confused with ``dpone.dlq.rejects.RejectedRow``, a row as the DLQ store takes it.
    """

    position: int
    reason: ReasonCode
    column: str
    violations: tuple[Violation, ...]


@frozen
class Diagnostic:
    """A warning: how many values of a column were handled by ``action``, first positions only."""

    column: str
    code: ReasonCode
    action: Action
    count: int
    positions: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "column": self.column,
            "code": self.code.value,
            "action": self.action.value,
            "count": self.count,
            "positions": list(self.positions),
        }


VIOLATIONS_SCHEMA = pa.schema(
    [
        pa.field("position", pa.int64(), nullable=False),
        pa.field("column", pa.string(), nullable=False),
        pa.field("reason", pa.string(), nullable=False),
    ]
)


Hit = tuple[str, ReasonCode, pa.BooleanArray]


class Rejects:
    """The rejected rows of a chunk, column-oriented and computed lazily.

    ``positions`` (ascending) index the input batch; ``reasons``/``columns`` are aligned with
    it and name each row's first violation in column order; ``violations`` is a table of every
    violation of every rejected row (position, column, reason), sorted by position then column
    order. Only the reject mask is kept until a caller asks: a chunk that nobody inspects (a
    failed strict run, a benchmark) costs nothing more.
    """

    __slots__ = ("_cache", "_hits", "_mask", "actual_types", "expected_types")

    def __init__(
        self,
        mask: pa.BooleanArray | None,
        hits: tuple[Hit, ...] = (),
        expected_types: Mapping[str, str] | None = None,
        actual_types: Mapping[str, str] | None = None,
    ) -> None:
        self._mask = mask if mask is not None and mask.true_count else None
        self._hits = hits  # in column order, the table scope first
        self.expected_types: Mapping[str, str] = expected_types or {}
        self.actual_types: Mapping[str, str] = actual_types or {}
        self._cache: dict[str, Any] = {}

    @classmethod
    def empty(cls) -> Rejects:
        return cls(None)

    def __len__(self) -> int:
        return 0 if self._mask is None else int(self._mask.true_count)

    def __bool__(self) -> bool:
        return self._mask is not None

    @property
    def mask(self) -> pa.BooleanArray | None:
        """Clean mask over the input batch, true for rejected rows (None: no rejects)."""
        return self._mask

    @property
    def hits(self) -> tuple[Hit, ...]:
        """Every violation's (column, reason, mask over the input batch), in column order."""
        return self._hits

    @property
    def positions(self) -> pa.Int64Array:
        if "positions" not in self._cache:
            self._cache["positions"] = (
                pa.array([], pa.int64())
                if self._mask is None
                else pc.indices_nonzero(self._mask).cast(pa.int64())
            )
        positions: pa.Int64Array = self._cache["positions"]
        return positions

    def _first(self) -> tuple[pa.StringArray, pa.StringArray]:
        if "first" not in self._cache and self._mask is None:
            empty = pa.array([], pa.string())
            self._cache["first"] = (empty, empty)
        if "first" not in self._cache:
            k = len(self)
            first = pa.nulls(k, pa.int32())
            for rank in range(len(self._hits) - 1, -1, -1):
                hit = self._restricted(rank)
                if hit.true_count:
                    first = pc.if_else(hit, pa.scalar(rank, pa.int32()), first)
            names = pa.array([h[0] for h in self._hits], pa.string())
            codes = pa.array([h[1].value for h in self._hits], pa.string())
            self._cache["first"] = (codes.take(first), names.take(first))
        first_pair: tuple[pa.StringArray, pa.StringArray] = self._cache["first"]
        return first_pair

    def _restricted(self, rank: int) -> pa.BooleanArray:
        """Hit ``rank``'s mask restricted to the rejected rows."""
        key = f"hit{rank}"
        if key not in self._cache:
            assert self._mask is not None
            self._cache[key] = clean(pc.filter(self._hits[rank][2], self._mask))
        restricted: pa.BooleanArray = self._cache[key]
        return restricted

    @property
    def reasons(self) -> pa.StringArray:
        """The first violation's reason code of each rejected row."""
        return self._first()[0]

    @property
    def columns(self) -> pa.StringArray:
        """The first violation's column of each rejected row (``*`` for the whole table)."""
        return self._first()[1]

    @property
    def violations(self) -> pa.Table:
        if "violations" not in self._cache:
            self._cache["violations"] = self._violations()
        table: pa.Table = self._cache["violations"]
        return table

    def _violations(self) -> pa.Table:
        if self._mask is None:
            return VIOLATIONS_SCHEMA.empty_table()
        positions = self.positions
        where: list[pa.Array] = []
        ranks: list[pa.Array] = []
        for rank in range(len(self._hits)):
            hit = self._restricted(rank)
            if hit.true_count:
                where.append(pc.filter(positions, hit))
                ranks.append(_repeat(rank, hit.true_count, pa.int32()))
        if not where:
            return VIOLATIONS_SCHEMA.empty_table()
        pos = pa.concat_arrays(where)
        rank_arr = pa.concat_arrays(ranks)
        order = pc.sort_indices(
            pa.table({"p": pos, "r": rank_arr}), sort_keys=[("p", "ascending"), ("r", "ascending")]
        )
        rank_arr = rank_arr.take(order)
        names = pa.array([h[0] for h in self._hits], pa.string())
        codes = pa.array([h[1].value for h in self._hits], pa.string())
        return pa.table(
            [pos.take(order), names.take(rank_arr), codes.take(rank_arr)], schema=VIOLATIONS_SCHEMA
        )

    def _violation(self, column: str, reason: str) -> Violation:
        return Violation(
            column,
            ReasonCode(reason),
            self.expected_types.get(column),
            self.actual_types.get(column),
        )

    def rows(self) -> list[RowRejection]:
        """One Python object per rejected row (for the DLQ writer; not for the hot path)."""
        table = self.violations
        by_position: dict[int, list[Violation]] = {}
        for pos, col, reason in zip(
            table.column("position").to_pylist(),
            table.column("column").to_pylist(),
            table.column("reason").to_pylist(),
            strict=True,
        ):
            by_position.setdefault(pos, []).append(self._violation(col, reason))
        return [
            RowRejection(pos, ReasonCode(reason), col, tuple(by_position.get(pos, ())))
            for pos, reason, col in zip(
                self.positions.to_pylist(),
                self.reasons.to_pylist(),
                self.columns.to_pylist(),
                strict=True,
            )
        ]


def _arange(n: int) -> pa.Int64Array:
    return pc.indices_nonzero(pc.fill_null(pa.nulls(n, pa.bool_()), True)).cast(pa.int64())


def _repeat(value: object, n: int, dtype: pa.DataType) -> pa.Array:
    return pc.fill_null(pa.nulls(n, dtype), pa.scalar(value, dtype))


def clean(mask: pa.Array) -> pa.BooleanArray:
    return mask if mask.null_count == 0 else pc.fill_null(mask, False)


@frozen
class EnforcementResult:
    """The outcome of enforcing a contract on one chunk.

    ``valid`` holds the rows that may load, typed with the sink schema, in input order, and
    ``valid_positions`` their positions in the input. Under ``strict`` a non-empty
    ``rejects`` means ``failed``: nothing of the run may load (``raise_for_failure``).
    """

    valid: pa.RecordBatch
    rejects: Rejects
    warnings: tuple[Diagnostic, ...]
    counts: dict[tuple[str, ReasonCode], int]
    input_rows: int
    error: ContractError | None = None
    expected_types: Mapping[str, str] = field(default_factory=dict)
    actual_types: Mapping[str, str] = field(default_factory=dict)
    variant_columns: tuple[str, ...] = ()
    #: Clean mask aligned with ``valid``: rows that loaded with at least one warning (a value
    #: nulled, moved to a variant column or dropped). None: no such row.
    warned: pa.BooleanArray | None = None

    @property
    def warned_rows(self) -> int:
        """Rows (not values) of ``valid`` that loaded with at least one warning."""
        return 0 if self.warned is None else int(self.warned.true_count)

    @property
    def valid_positions(self) -> pa.Int64Array:
        """Positions in the input batch of the rows of ``valid`` (ascending)."""
        mask = self.rejects.mask
        if self.valid.num_rows == 0:
            return pa.array([], pa.int64())
        if mask is None:
            return _arange(self.input_rows)
        return pc.indices_nonzero(pc.invert(mask)).cast(pa.int64())

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def rejected_rows(self) -> int:
        return len(self.rejects)

    def raise_for_failure(self) -> None:
        if self.error is not None:
            raise self.error
