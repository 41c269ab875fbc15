"""``ContractEnforcementService(quarantine=...).enforce(rows=...)``: seed 004's Python API.

A thin façade over the real engine (:class:`dpone.contracts.enforcer.ContractEnforcementService`)
for rows given as Python mappings:

1. the rows become one Arrow batch, once: a column per key (in order of first appearance); a
   key a row lacks is NULL in that row, a key no row has is no column at all (a declared
   column then reads as NULL). A column whose values share one Python type keeps it (Arrow
   infers it); a column that mixes types (``"12.30"`` beside ``12.3``) becomes text, so the
   contract's text parsing judges every value exactly as it judges a CSV field;
2. the engine enforces the contract (inference and enforcement, SPEC §3);
3. the rejected rows become ``dpone.dlq.v1`` records through the injected quarantine service,
   durably (one DLQ run per call), each named ``dpone://runs/<run>/loads/<load>/rows/<n>``
   (``n`` counts from 1 in the given order); row values reach the DLQ only under the
   policy's ``masked``/``preserve``;
4. the result says what may load (``target_rows``: the valid rows as the caller gave them),
   whether the state may advance (SPEC §3's table) and the data outcome (SPEC §7).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import pyarrow as pa
import rfc8785

from dpone.clock import format_timestamp
from dpone.contracts.enforcer import ContractEnforcementService as _Engine
from dpone.contracts.errors import NAMED_ROWS, ContractError, ContractViolation
from dpone.contracts.result import EnforcementResult
from dpone.contracts.spec import ContractSpec
from dpone.dlq.refs import run_row_refs
from dpone.dlq.rejects import RejectedRow, rejected_rows
from dpone.errors import ConfigError
from dpone.evidence.model import DataOutcome
from dpone.ids import new_ulid
from dpone.records import frozen

if TYPE_CHECKING:
    from dpone.contracts.dlq import DlqPolicy
    from dpone.dlq.result import RunResult
    from dpone.readiness.schema_contracts import SchemaContract


class QuarantineRequired(ConfigError):
    """Quarantine enforcement without a DLQ to keep the rejected rows (seed 004)."""

    code = "DPONE_DLQ_REQUIRED"
    stage = "preflight"


class QuarantineWriter(Protocol):
    """Keeps one call's rejected rows durably (``dpone.ops.dlq.DlqService``)."""

    @property
    def policy(self) -> DlqPolicy: ...

    def write_run(self, run_id: str, load_id: str, rows: Sequence[RejectedRow]) -> RunResult:
        """Write ``rows`` as one closed DLQ run; return once every record is durable."""
        ...


@frozen
class EnforcementOutcome:
    """What one ``enforce`` call decided. Names, counts and ids only; row values are only in
    ``target_rows``, which are the caller's own rows."""

    run_id: str
    load_id: str
    enforcement: str
    target_rows: list[dict[str, Any]] = field(repr=False)
    rows_read: int
    rows_loaded: int
    rows_rejected: int
    rows_warned: int
    #: rejected rows kept out of the load without a DLQ record (no DLQ service given)
    rows_dropped: int
    #: values per (column, reason code), every violation of every row
    violations: Mapping[tuple[str, str], int]
    state_commit_allowed: bool
    data_outcome: DataOutcome
    failure_code: str | None
    #: a strict failure's first failing rows (at most 10), by record_ref (never values)
    failure_record_refs: tuple[str, ...]
    dlq_record_ids: tuple[str, ...]
    dlq_reasons: Mapping[str, int]
    #: the DLQ run's index, relative to the DLQ root (None: nothing quarantined)
    index_ref: str | None
    index_fingerprint: str | None
    dlq_run_status: str | None
    #: the DLQ root the records were written under (None: nothing quarantined)
    dlq_directory: str | None
    variant_columns: tuple[str, ...]
    #: ``sha256:`` of the RFC 8785 JSON of the contract enforced (the evidence's fingerprint)
    contract_fingerprint: str
    started_at: str
    finished_at: str
    #: the valid rows as the engine typed them for the sink
    target_batch: pa.RecordBatch = field(repr=False, compare=False)
    #: the error that failed the call (strict, a frozen schema), or None
    error: ContractError | None = field(default=None, repr=False, compare=False)

    @property
    def rows_quarantined(self) -> int:
        return len(self.dlq_record_ids)

    def raise_for_failure(self) -> None:
        """Raise the error that failed the call, if one did (names rows by record_ref)."""
        if self.error is not None:
            raise self.error


def to_batch(rows: Sequence[Mapping[str, Any]]) -> pa.RecordBatch:
    """The rows as one Arrow batch (see the module docstring, step 1)."""
    names: dict[str, None] = {}
    for row in rows:
        names.update(dict.fromkeys(row))
    arrays = [_column([row.get(name) for row in rows]) for name in names]
    return pa.RecordBatch.from_arrays(arrays, names=list(names)) if names else _no_columns(rows)


def _no_columns(rows: Sequence[Mapping[str, Any]]) -> pa.RecordBatch:
    """Rows without a single key: as many rows, no column."""
    return pa.RecordBatch.from_struct_array(pa.array([{}] * len(rows), pa.struct([])))


def _column(values: list[Any]) -> pa.Array:
    kinds = {type(v) for v in values if v is not None}
    if kinds <= {str}:
        return pa.array(values, pa.string())
    if len(kinds) == 1:
        try:
            return pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
            pass
    return pa.array([None if v is None else _text(v) for v in values], pa.string())


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list)):
        return json.dumps(value, default=str, ensure_ascii=False)
    isoformat = getattr(value, "isoformat", None)
    return str(isoformat() if callable(isoformat) else value)


class ContractEnforcementService:
    """Seed 004's service: ``enforce`` Python rows under a :class:`SchemaContract`."""

    def __init__(self, quarantine: QuarantineWriter | None = None) -> None:
        self.quarantine = quarantine

    def enforce(
        self,
        *,
        rows: Sequence[Mapping[str, Any]],
        contract: SchemaContract | ContractSpec,
        run_id: str | None = None,
        load_id: str | None = None,
        existing_schema: pa.Schema | None = None,
    ) -> EnforcementOutcome:
        """Enforce ``contract`` on ``rows`` (see the module docstring).

        ``existing_schema`` is the target table's schema when it exists (the contract's
        ``evolution`` then judges new columns and type changes against it); None treats
        the target as a table this load creates. Ids default to new ULIDs.
        """
        spec = contract if isinstance(contract, ContractSpec) else contract.spec
        run_id = run_id or new_ulid(datetime.now(UTC))
        load_id = load_id or new_ulid(datetime.now(UTC))
        if spec.enforcement == "quarantine" and (
            self.quarantine is None or not self.quarantine.policy.enabled
        ):
            raise QuarantineRequired(
                "quarantine enforcement needs a DLQ to keep the rejected rows; it cannot be "
                "disabled",
                fixes=(
                    "pass ContractEnforcementService(quarantine=DlqService(...))",
                    "or use enforcement: strict",
                ),
            )
        started_at = format_timestamp(datetime.now(UTC))
        given = list(rows)
        result = _Engine(spec).enforce(to_batch(given), existing_schema=existing_schema)
        positions = result.rejects.positions.to_pylist()
        # Coerce's rejected rows hold the state but do not stop the valid rows (SPEC §3);
        # strict's and a frozen schema's stop everything, and nothing is dead-lettered.
        fatal = result.error is not None and not (
            spec.enforcement == "coerce" and isinstance(result.error, ContractViolation)
        )
        dlq: RunResult | None = None
        keeper = self.quarantine
        if positions and not fatal and keeper is not None and keeper.policy.enabled:
            rejected = _rejects(
                result, given, positions, (run_id, load_id), keeper.policy.pii_policy
            )
            dlq = keeper.write_run(run_id, load_id, rejected)
        valid = result.valid_positions.to_pylist()
        error = result.error
        refs: tuple[str, ...] = ()
        if isinstance(error, ContractViolation):
            first = [p + 1 for p in positions[:NAMED_ROWS]]
            refs = tuple(run_row_refs(run_id, load_id, first))
            error = error.naming(refs)
        quarantined = dlq.record_count if dlq else 0
        return EnforcementOutcome(
            run_id=run_id,
            load_id=load_id,
            enforcement=spec.enforcement,
            target_rows=[] if fatal else [dict(given[i]) for i in valid],
            rows_read=len(given),
            rows_loaded=0 if fatal else len(valid),
            rows_rejected=len(positions),
            rows_warned=result.warned_rows,
            rows_dropped=0 if fatal else len(positions) - quarantined,
            violations={(c, code.value): n for (c, code), n in sorted(result.counts.items())},
            state_commit_allowed=_state_allowed(spec.enforcement, fatal, positions, dlq),
            data_outcome=_outcome(fatal, positions, result.warned_rows),
            failure_code=error.code if error is not None else None,
            failure_record_refs=refs,
            dlq_record_ids=dlq.record_ids if dlq else (),
            dlq_reasons=dict(dlq.reason_counts) if dlq else {},
            index_ref=dlq.index_ref if dlq else None,
            index_fingerprint=dlq.fingerprint if dlq else None,
            dlq_run_status=dlq.status if dlq else None,
            dlq_directory=keeper.policy.directory if dlq and keeper else None,
            variant_columns=result.variant_columns,
            contract_fingerprint=fingerprint(spec),
            started_at=started_at,
            finished_at=format_timestamp(datetime.now(UTC)),
            target_batch=result.valid.slice(0, 0) if fatal else result.valid,
            error=error,
        )


def _rejects(
    result: EnforcementResult,
    given: Sequence[Mapping[str, Any]],
    positions: list[int],
    ids: tuple[str, str],
    pii_policy: str,
) -> list[RejectedRow]:
    """The rejected rows as the DLQ writer takes them: refs by position (from 1), the first
    violation's reason and types; the row itself only where the policy keeps values."""
    rejects = result.rejects
    columns: list[str | None] = list(rejects.columns.to_pylist())
    rows = [dict(given[p]) for p in positions] if pii_policy != "reference_only" else None
    numbers = [p + 1 for p in positions]
    return rejected_rows(
        run_row_refs(*ids, numbers),
        [str(r) for r in rejects.reasons.to_pylist()],
        columns=columns,
        actual_types=[result.actual_types.get(c) if c else None for c in columns],
        expected_types=[result.expected_types.get(c) if c else None for c in columns],
        source_offsets=numbers,
        rows=rows,
    )


def fingerprint(spec: ContractSpec) -> str:
    """``sha256:`` + hex SHA-256 of the RFC 8785 JSON of the contract."""
    return "sha256:" + hashlib.sha256(rfc8785.dumps(spec.to_json())).hexdigest()


def _state_allowed(
    enforcement: str, fatal: bool, rejected: list[int], dlq: RunResult | None
) -> bool:
    """SPEC §3's state column: strict and coerce hold the state when a row was rejected;
    quarantine advances once every rejected row is durable; warn advances."""
    if fatal:
        return False
    if enforcement in ("strict", "coerce"):
        return not rejected
    if enforcement == "quarantine":
        return not rejected or (dlq is not None and dlq.status == "closed")
    return True


def _outcome(fatal: bool, rejected: list[int], warned: int) -> DataOutcome:
    """SPEC §7's data axis, as the evidence model reads it: rows kept out of the load
    (dead-lettered, or only counted without a DLQ) read as quarantine's."""
    if fatal:
        return "failed_quality_gate"
    if rejected:
        return "passed_with_quarantine"
    if warned:
        return "passed_with_warnings"
    return "passed"


__all__ = [
    "ContractEnforcementService",
    "EnforcementOutcome",
    "QuarantineRequired",
    "QuarantineWriter",
    "to_batch",
]
