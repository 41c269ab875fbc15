"""The contract enforcement engine (SPEC §3): one Arrow chunk in, valid rows and rejects out.

Per chunk, in order:

1. ``evolution.tables`` when the sink table does not exist yet (dlt precedence: a new table
   that may not be created settles every row; nothing else is checked);
2. every output column, declared columns first (contract order), then the undeclared input
   columns (input order): ``empty_string_is_null``, conversion to the column's type
   (:func:`convert`), then the actions of its violations;
3. the rows with a ``reject`` action become :class:`Rejects`, the others are filtered into
   ``valid``; warnings, counts and the error (strict/freeze) are assembled. Under ``coerce``,
   ``quarantine`` and ``warn`` the rejects go back to the caller (DLQ or counted).

Every decision about a row depends only on that row's values, the contract, the types fixed by
inference and the sink schema. That is why enforcing a chunk equals enforcing its rows split
into smaller chunks (a property test checks it), once inference has fixed its types.

The service is pure: no IO, no logging, no value in any message.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from dpone.contracts.convert import as_text, convert
from dpone.contracts.errors import (
    ContractError,
    ContractViolation,
    DuplicateColumn,
    SchemaFrozen,
)
from dpone.contracts.inference import empty_to_null, infer_type
from dpone.contracts.kernels import as_string, falses
from dpone.contracts.reasons import ReasonCode
from dpone.contracts.result import (
    TABLE_SCOPE,
    Action,
    Diagnostic,
    EnforcementResult,
    Rejects,
)
from dpone.contracts.spec import VARIANT_PREFIX, ColumnSpec, ContractSpec, EvolutionMode
from dpone.contracts.types import (
    TYPE_METADATA_KEY,
    arrow_type,
    canonical,
    is_text,
    sink_field,
    spec_from_arrow,
    type_label,
)
from dpone.records import frozen

#: How many positions a warning diagnostic keeps (positions only, never values).
DIAGNOSTIC_POSITIONS = 5
#: Columns between two calls of :attr:`ContractEnforcementService.checkpoint`.
CHECK_EVERY = 64

_DATA_TYPE_ACTIONS: dict[EvolutionMode, Action] = {
    "evolve": Action.VARIANT,  # dlt: a type change becomes a variant column
    "freeze": Action.FAIL,
    "discard_row": Action.REJECT,
    "discard_value": Action.NULL,
}
_NEW_COLUMN_ACTIONS: dict[EvolutionMode, Action] = {
    "freeze": Action.FAIL,
    "discard_row": Action.REJECT,
    "discard_value": Action.DROP_COLUMN,
}


@frozen
class ColumnPlan:
    """What to do with one output column, decided once per (input schema, sink schema)."""

    name: str
    spec: ColumnSpec
    source: int | None  # index in the input batch; None = absent (all NULL)
    on_mismatch: Action
    on_null: Action | None  # None: NULL is allowed
    on_presence: Action | None = None  # a new column the sink may not gain
    nullable: bool = True
    entity: str = "columns"  # the evolution entity a freeze reports

    @property
    def field(self) -> pa.Field:
        return sink_field(self.spec, nullable=self.nullable)


@frozen
class EnforcementPlan:
    """How one input schema (against one sink schema) is enforced, computed once per pair."""

    columns: tuple[ColumnPlan, ...]
    table_action: Action | None  # evolution.tables for a table that does not exist yet
    schema: pa.Schema  # of the output columns, before variant columns
    expected_types: dict[str, str]


@dataclass
class _Chunk:
    """Accumulators of one ``enforce`` call."""

    n: int
    counts: dict[tuple[str, ReasonCode], int] = field(default_factory=dict)
    reject: pa.BooleanArray | None = None
    violations: list[tuple[str, ReasonCode, pa.BooleanArray]] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)
    frozen: dict[str, list[str]] = field(default_factory=dict)
    frozen_rows: pa.BooleanArray | None = None
    warned: pa.BooleanArray | None = None  # rows with a value handled by a warning action

    def violate(self, column: str, code: ReasonCode, mask: pa.BooleanArray, action: Action) -> None:
        k = int(mask.true_count)
        if not k:
            return
        key = (column, code)
        self.counts[key] = self.counts.get(key, 0) + k
        self.violations.append((column, code, mask))
        if action is Action.REJECT:
            self.reject = mask if self.reject is None else pc.or_(self.reject, mask)
        elif action is Action.FAIL:
            self.frozen_rows = mask if self.frozen_rows is None else pc.or_(self.frozen_rows, mask)
        else:
            first = pc.indices_nonzero(mask).slice(0, DIAGNOSTIC_POSITIONS).to_pylist()
            self.warnings.append(Diagnostic(column, code, action, k, tuple(first)))
            self.warned = mask if self.warned is None else pc.or_(self.warned, mask)


class ContractEnforcementService:
    """Enforces one :class:`ContractSpec` on Arrow record batches (see the module docstring).

    Stateful only for type inference: the types of undeclared columns are fixed from the first
    ``sample_rows`` rows seen (:meth:`prime` can fix them from several chunks up front; a column
    first met after them is inferred from no value) and then stay fixed for the life of the
    service, i.e. the run.
    """

    def __init__(self, contract: ContractSpec) -> None:
        self.contract = contract
        self.declared: tuple[ColumnSpec, ...] = tuple(canonical(c) for c in contract.columns)
        self._declared_names = {c.name for c in self.declared}
        self.enforcement = contract.enforcement
        # Lossless repairs (`1e2` -> 100) only under coerce or `coercion: safe` (SPEC §3).
        self.lenient = contract.safe_coercion
        self.warn = contract.enforcement == "warn"
        self._inferred: dict[str, ColumnSpec] = {}
        self._seen = 0  # rows enforced so far: the sample is the run's first sample_rows
        # Columns whose last chunk had bad values skip the whole-column cast (speed only).
        self._dirty: set[str] = set()
        self._plans: dict[tuple[pa.Schema, pa.Schema | None], EnforcementPlan] = {}
        #: Called every :data:`CHECK_EVERY` columns of a chunk (the run's interrupt check):
        #: a chunk of thousands of columns takes seconds, too long to wait for a stop.
        self.checkpoint: Callable[[], None] | None = None
        # Validate every declared type once, up front (raises ContractDefinitionError).
        for col in self.declared:
            arrow_type(col)

    # --- inference -------------------------------------------------------------------------------

    def needs_inference(self, schema: pa.Schema) -> bool:
        """Whether ``schema`` has a column whose type inference has yet to fix."""
        return self.contract.type_inference.enabled and any(
            n not in self._declared_names and n not in self._inferred for n in schema.names
        )

    def prime(self, sample: pa.RecordBatch | pa.Table | Iterable[pa.RecordBatch]) -> None:
        """Fix inferred types from the run's first ``sample_rows`` rows: those of ``sample``
        (may span chunks) that come before the rows enforced so far reach ``sample_rows``.

        Columns already fixed stay as they are. Without a call to ``prime``, the first
        ``enforce`` fixes the types from its own batch.
        """
        ti = self.contract.type_inference
        if not ti.enabled:
            return
        batches: Iterable[pa.RecordBatch]
        if isinstance(sample, pa.RecordBatch):
            batches = [sample]
        elif isinstance(sample, pa.Table):
            batches = sample.to_batches()
        else:
            batches = sample
        # The first sample_rows rows *of the run*; chunks may differ in their columns (files,
        # JSONL keys). A column first met after them had no value in them, as it would have
        # had in one chunk holding every row: its sample is empty (string for text). An
        # iterator is read no further than the sample.
        window: list[pa.RecordBatch] = []
        left = ti.sample_rows - self._seen
        for batch in batches:
            window.append(batch.slice(0, max(left, 0)))
            left -= window[-1].num_rows
            if left <= 0:
                break
        # Name sets built once: a lookup per column in each batch's name list was quadratic
        # in the number of columns (100,000 columns never finished).
        present = [frozenset(batch.schema.names) for batch in window]
        names = dict.fromkeys(n for batch in window for n in batch.schema.names)
        for i, name in enumerate(names):
            self._tick(i)
            if name in self._declared_names or name in self._inferred:
                continue
            arrays = [
                b.column(name) for b, held in zip(window, present, strict=True) if name in held
            ]
            same_type = len({a.type for a in arrays}) == 1
            # Typed chunks that disagree on a column's type: the first chunk's type decides.
            column = pa.concat_arrays(arrays) if same_type else arrays[0]
            self._inferred[name] = infer_type(
                name,
                column,
                lenient=self.lenient,
                empty_string_is_null=ti.empty_string_is_null,
            )

    # --- planning --------------------------------------------------------------------------------

    def _mode_action(self, nullable: bool) -> Action:
        # warn loads NULL where a value does not fit, except into a NOT NULL column: the table
        # keeps its declared NOT NULL, so such a row is rejected (SPEC §3).
        return Action.NULL if self.warn and nullable else Action.REJECT

    def _conflict_action(self, nullable: bool) -> Action:
        policy = self.contract.type_inference.conflict_policy
        if policy == "variant_column" and nullable:
            return Action.VARIANT
        if policy == "quarantine":
            return Action.REJECT
        return self._mode_action(nullable)

    def _undeclared_spec(self, name: str, dtype: pa.DataType) -> ColumnSpec:
        if self.contract.type_inference.enabled and name in self._inferred:
            return canonical(self._inferred[name])
        if is_text(dtype):
            return ColumnSpec(name, "string")
        return canonical(spec_from_arrow(name, dtype))

    def plan(self, schema: pa.Schema, existing_schema: pa.Schema | None = None) -> EnforcementPlan:
        """The column plan for an input schema and the sink's current schema (cached)."""
        key = (schema, existing_schema)
        cached = self._plans.get(key)
        if cached is not None:
            return cached
        names = schema.names
        duplicates = sorted(n for n, k in Counter(names).items() if k > 1)
        if duplicates:
            raise DuplicateColumn(f"the input has duplicate column names: {', '.join(duplicates)}")
        evolution = self.contract.evolution
        new_table = existing_schema is None
        table_action: Action | None = None
        if new_table and evolution.tables != "evolve":
            table_action = Action.FAIL if evolution.tables == "freeze" else Action.REJECT
        # dlt precedence: the columns of a table created by this run are all new; the columns
        # contract applies to columns added to a table that already exists.
        columns_mode: EvolutionMode = "evolve" if new_table else evolution.columns
        sink_names = set(existing_schema.names) if existing_schema is not None else set()
        index = {n: i for i, n in enumerate(names)}

        plans: list[ColumnPlan] = []
        for col in self.declared:
            plans.append(
                ColumnPlan(
                    name=col.name,
                    spec=col,
                    source=index.get(col.name),
                    on_mismatch=self._conflict_action(col.nullable),
                    on_null=None if col.nullable else Action.REJECT,
                    nullable=col.nullable,
                )
            )
        for i, name in enumerate(names):
            if name in self._declared_names:
                continue
            if existing_schema is not None and name in sink_names:
                sink = existing_schema.field(name)
                spec = canonical(spec_from_arrow(name, sink.type, sink.metadata))
                plans.append(
                    ColumnPlan(
                        name,
                        spec,
                        i,
                        on_mismatch=_DATA_TYPE_ACTIONS[evolution.data_type],
                        on_null=None,
                        entity="data_type",
                    )
                )
                continue
            spec = self._undeclared_spec(name, schema.field(name).type)
            presence = None if columns_mode == "evolve" else _NEW_COLUMN_ACTIONS[columns_mode]
            plans.append(
                ColumnPlan(
                    name,
                    spec,
                    i,
                    on_mismatch=self._conflict_action(True),
                    on_null=None,
                    on_presence=presence,
                )
            )
        out = [p for p in plans if p.on_presence is None]
        plan = EnforcementPlan(
            columns=tuple(plans),
            table_action=table_action,
            schema=pa.schema([p.field for p in out]),
            expected_types={p.name: type_label(p.spec) for p in plans},
        )
        self._plans[key] = plan
        return plan

    # --- enforcement -----------------------------------------------------------------------------

    def enforce(  # noqa: C901 (the §3 steps in order; each is a call, the branches are the policies)
        self, batch: pa.RecordBatch, *, existing_schema: pa.Schema | None = None
    ) -> EnforcementResult:
        """Enforce the contract on ``batch``.

        ``existing_schema`` is the sink table's current schema; None means the table does not
        exist yet (``evolution.tables`` applies).
        """
        if isinstance(batch, pa.Table):
            batch = batch.combine_chunks().to_batches()[0] if batch.num_rows else _empty(batch)
        ti = self.contract.type_inference
        if self.needs_inference(batch.schema):
            self.prime(batch)
        plan = self.plan(batch.schema, existing_schema)
        n = batch.num_rows
        self._seen += n
        actual = {
            name: str(t) for name, t in zip(batch.schema.names, batch.schema.types, strict=True)
        }
        chunk = _Chunk(n)

        if plan.table_action is not None and n:
            every = pc.invert(falses(n))
            chunk.violate(TABLE_SCOPE, ReasonCode.COLUMN_NOT_ALLOWED, every, plan.table_action)
            if plan.table_action is Action.FAIL:
                chunk.frozen["tables"] = []
            return self._finish(chunk, plan, batch, [], [], actual, table_only=True)

        arrays: list[pa.Array] = []
        variants: list[tuple[str, pa.Array]] = []
        empty_is_null = ti.empty_string_is_null
        for i, cp in enumerate(plan.columns):
            self._tick(i)
            raw = batch.column(cp.source) if cp.source is not None else None
            if raw is not None and empty_is_null and is_text(raw.type):
                raw = empty_to_null(as_string(raw))
            if cp.on_presence is not None:
                if raw is not None:
                    present = pc.is_valid(raw)
                    chunk.violate(cp.name, ReasonCode.COLUMN_NOT_ALLOWED, present, cp.on_presence)
                    if cp.on_presence is Action.FAIL and present.true_count:
                        chunk.frozen.setdefault("columns", []).append(cp.name)
                continue
            if raw is None:
                values = pa.nulls(n, arrow_type(cp.spec))
                if cp.on_null is not None and n:
                    chunk.violate(
                        cp.name, ReasonCode.REQUIRED_NULL, pc.invert(falses(n)), cp.on_null
                    )
                arrays.append(values)
                continue
            fast = cp.name not in self._dirty
            conv = convert(raw, cp.spec, lenient=self.lenient, fast_path=fast)
            values = conv.values
            failed = conv.failed
            if failed is None:
                self._dirty.discard(cp.name)
            else:
                self._dirty.add(cp.name)
            if failed is not None:
                chunk.violate(cp.name, ReasonCode.TYPE_MISMATCH, failed, cp.on_mismatch)
                if cp.on_mismatch is Action.VARIANT:
                    variants.append((VARIANT_PREFIX + cp.name, _variant_text(raw, failed)))
                elif cp.on_mismatch is Action.FAIL:
                    chunk.frozen.setdefault(cp.entity, []).append(cp.name)
            if cp.on_null is not None and raw.null_count:
                chunk.violate(cp.name, ReasonCode.REQUIRED_NULL, pc.is_null(raw), cp.on_null)
            arrays.append(values)
        return self._finish(chunk, plan, batch, arrays, variants, actual, table_only=False)

    def _tick(self, i: int) -> None:
        if self.checkpoint is not None and i % CHECK_EVERY == CHECK_EVERY - 1:
            self.checkpoint()

    def _finish(
        self,
        chunk: _Chunk,
        plan: EnforcementPlan,
        batch: pa.RecordBatch,
        arrays: list[pa.Array],
        variants: list[tuple[str, pa.Array]],
        actual: dict[str, str],
        *,
        table_only: bool,
    ) -> EnforcementResult:
        n = chunk.n
        if table_only:
            valid = _empty_batch(plan.schema)
        else:
            schema = plan.schema
            if variants:
                fields = list(schema)
                for name, text in variants:
                    meta = {TYPE_METADATA_KEY: b"string"}
                    fields.append(pa.field(name, pa.string(), nullable=True, metadata=meta))
                    arrays.append(text)
                schema = pa.schema(fields)
            valid = pa.RecordBatch.from_arrays(arrays, schema=schema)
            if chunk.reject is not None:
                keep = pc.invert(chunk.reject)
                valid = valid.filter(keep)
                if chunk.warned is not None:
                    chunk.warned = chunk.warned.filter(keep)
                # A variant column exists for the rows that keep a value in it: when each
                # such row is rejected for another column, the chunk has none (one chunk
                # holding every row would not create the column for them either).
                unused = {n for n, _ in variants if valid.column(n).null_count == valid.num_rows}
                if unused:
                    valid = valid.select([n for n in valid.schema.names if n not in unused])
                    variants = [v for v in variants if v[0] not in unused]
        rejects = Rejects(chunk.reject, tuple(chunk.violations), plan.expected_types, actual)
        error: ContractError | None = None
        # Only strict fails on a rejected row (coerce dead-letters a lossy row, SPEC §3).
        violation = bool(len(rejects)) and self.enforcement == "strict"
        if chunk.frozen and violation and _first(chunk.reject) < _first(chunk.frozen_rows):
            # The run fails at its first failing row, wherever a chunk ends: a rejected row
            # before the first frozen one fails it as a smaller chunk would have.
            chunk.frozen.clear()
        if chunk.frozen:
            entity = next(e for e in ("tables", "columns", "data_type") if e in chunk.frozen)
            rows = int(chunk.frozen_rows.true_count) if chunk.frozen_rows is not None else n
            error = SchemaFrozen(entity, chunk.frozen[entity], rows)
        elif violation:
            error = ContractViolation(self.enforcement, len(rejects), chunk.counts)
        return EnforcementResult(
            valid=valid,
            rejects=rejects,
            warnings=tuple(chunk.warnings),
            counts=chunk.counts,
            input_rows=n,
            error=error,
            expected_types=plan.expected_types,
            actual_types=actual,
            variant_columns=tuple(name for name, _ in variants),
            warned=None if table_only else chunk.warned,
        )


def _first(mask: pa.BooleanArray | None) -> int:
    """The first row ``mask`` holds (every row when None: a whole-chunk decision)."""
    return 0 if mask is None else int(pc.index(mask, True).as_py())


def _variant_text(raw: pa.Array, failed: pa.BooleanArray) -> pa.Array:
    text = as_text(raw)
    return pc.if_else(failed, text, pa.scalar(None, pa.string()))


def _empty_batch(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in schema], schema=schema)


def _empty(table: pa.Table) -> pa.RecordBatch:
    return _empty_batch(table.schema)
