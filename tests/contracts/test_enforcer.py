"""ContractEnforcementService: the four modes, nulls, rejects, warnings, counts and errors."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from dpone.contracts import (
    Action,
    ColumnSpec,
    ContractDefinitionError,
    ContractEnforcementService,
    ContractError,
    ContractViolation,
    ReasonCode,
    sink_schema,
)
from dpone.contracts.spec import TypeInferenceSpec
from tests.contracts.helpers import batch, contract, text_batch

TM = ReasonCode.TYPE_MISMATCH
RN = ReasonCode.REQUIRED_NULL
SECRET = "s3cr3t-value-42x"

ORDERS = (
    ColumnSpec("id", "integer", nullable=False),
    ColumnSpec("amount", "decimal", nullable=False, precision=12, scale=2),
    ColumnSpec("at", "timestamp", timezone=True),
)


def _orders() -> pa.RecordBatch:
    return text_batch(
        id=["1", "2", SECRET, None, "5", " 6"],
        amount=["1.00", "12.345", "3", "4", None, "+6.5"],
        at=[
            "2024-01-01T00:00:00Z",
            "2024-02-30T00:00:00Z",
            None,
            "2024-01-01T00:00:00",
            "2024-01-01T00:00:00+05:30",
            "2024-01-01 10:00:00+00",
        ],
    )


def _service(enforcement: str, **kw: object) -> ContractEnforcementService:
    """The modes with coerce's repairs (the ORDERS rows exercise them); canonical-only
    quarantine and warn are tested on their own below."""
    if enforcement != "strict":
        kw.setdefault("coercion", "safe")
    return ContractEnforcementService(contract(*ORDERS, enforcement=enforcement, **kw))  # type: ignore[arg-type]


def test_quarantine_splits_rows_and_names_the_first_violation_in_column_order() -> None:
    result = _service("quarantine").enforce(_orders())
    assert result.valid.to_pydict() == {
        "id": [1, 6],
        "amount": [Decimal("1.00"), Decimal("6.50")],
        "at": [
            dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
            dt.datetime(2024, 1, 1, 10, tzinfo=dt.UTC),
        ],
    }
    assert result.valid_positions.to_pylist() == [0, 5]
    assert result.rejects.positions.to_pylist() == [1, 2, 3, 4]
    assert result.rejects.columns.to_pylist() == ["amount", "id", "id", "amount"]
    assert result.rejects.reasons.to_pylist() == [TM, TM, RN, RN]
    rows = result.rejects.rows()
    assert [(v.column, v.code) for v in rows[0].violations] == [("amount", TM), ("at", TM)]
    assert [(v.column, v.code) for v in rows[2].violations] == [("id", RN), ("at", TM)]
    assert rows[0].violations[0].expected_type == "decimal(12,2)"
    assert rows[0].violations[0].actual_type == "string"
    assert result.counts == {
        ("id", TM): 1,
        ("id", RN): 1,
        ("amount", TM): 1,
        ("amount", RN): 1,
        ("at", TM): 2,
    }
    assert not result.failed
    assert result.warnings == ()


def test_violations_table_lists_every_violation_sorted() -> None:
    table = _service("quarantine").enforce(_orders()).rejects.violations
    assert table.column_names == ["position", "column", "reason"]
    assert table.to_pylist() == [
        {"position": 1, "column": "amount", "reason": TM.value},
        {"position": 1, "column": "at", "reason": TM.value},
        {"position": 2, "column": "id", "reason": TM.value},
        {"position": 3, "column": "id", "reason": RN.value},
        {"position": 3, "column": "at", "reason": TM.value},
        {"position": 4, "column": "amount", "reason": RN.value},
    ]


def test_strict_fails_on_any_reject_and_accepts_only_canonical_forms() -> None:
    result = _service("strict").enforce(_orders())
    assert result.failed
    assert isinstance(result.error, ContractViolation)
    assert result.error.code == "DPONE_CONTRACT_VIOLATION"
    assert result.rejects.positions.to_pylist() == [1, 2, 3, 4, 5]  # " 6" is not canonical
    with pytest.raises(ContractViolation):
        result.raise_for_failure()


def test_coerce_accepts_lossless_variants_and_rejects_lossy_rows() -> None:
    result = _service("coerce").enforce(_orders())
    assert not result.failed  # the run dead-letters the rejects and holds its state
    assert result.valid_positions.to_pylist() == [0, 5]
    assert result.rejects.positions.to_pylist() == [1, 2, 3, 4]
    clean = _service("coerce").enforce(
        text_batch(id=[" 7", "+8"], amount=["1.500", "2e1"], at=["2024-01-01t00:00:00z", None])
    )
    assert not clean.failed
    assert clean.valid.column("id").to_pylist() == [7, 8]
    assert clean.valid.column("amount").to_pylist() == [Decimal("1.50"), Decimal("20.00")]


def test_warn_nulls_what_does_not_fit_and_rejects_rows_a_not_null_column_cannot_hold() -> None:
    result = _service("warn").enforce(_orders())
    assert not result.failed
    # id and amount are NOT NULL: rows 1 (amount lossy), 2 (id), 3 (id NULL), 4 (amount NULL)
    # cannot load without a NULL there; row 5's values fit.
    assert result.rejects.positions.to_pylist() == [1, 2, 3, 4]
    assert result.valid.column("id").to_pylist() == [1, 6]
    assert result.valid.schema.field("id").nullable is False
    assert result.valid.schema.field("amount").nullable is False
    by_key = {(d.column, d.code): d for d in result.warnings}
    assert by_key[("at", TM)].action is Action.NULL  # nullable: a warning, the row loads
    assert by_key[("at", TM)].count == 2
    assert ("id", TM) not in by_key
    assert result.counts[("id", RN)] == 1
    # rows, not values: of the loaded rows none had a value nulled (row 1's bad `at` and
    # row 3's were rejected with their rows)
    assert result.warned_rows == 0


def test_warned_rows_exclude_rejected_rows() -> None:
    svc = ContractEnforcementService(
        contract(
            ColumnSpec("a", "integer"),
            ColumnSpec("b", "integer"),
            type_inference=TypeInferenceSpec(conflict_policy="variant_column"),
        )
    )
    result = svc.enforce(text_batch(a=["x", "1", "y"], b=["1", "2", "3"]))
    assert result.warned_rows == 2
    assert result.warned is not None
    assert len(result.warned) == result.valid.num_rows


def test_messages_and_diagnostics_never_contain_values() -> None:
    for mode in ("strict", "coerce", "quarantine", "warn"):
        result = _service(mode).enforce(_orders())
        text = repr(result.counts) + repr(result.warnings) + repr(result.rejects.rows())
        if result.error is not None:
            text += str(result.error) + repr(result.error.to_json())
        assert SECRET not in text


def test_missing_not_null_column_rejects_every_row() -> None:
    result = _service("quarantine").enforce(text_batch(id=["1", "2"], at=[None, None]))
    assert result.valid.num_rows == 0
    assert result.counts == {("amount", RN): 2}
    assert result.rejects.columns.to_pylist() == ["amount", "amount"]


def test_missing_nullable_column_loads_as_null() -> None:
    result = _service("quarantine").enforce(text_batch(id=["1"], amount=["2"]))
    assert result.valid.column("at").to_pylist() == [None]
    assert result.valid.schema.names == ["id", "amount", "at"]


def test_empty_string_is_null_runs_before_any_check() -> None:
    spec = (ColumnSpec("n", "integer"), ColumnSpec("s", "string", nullable=False))
    on = ContractEnforcementService(
        contract(*spec, type_inference=TypeInferenceSpec(empty_string_is_null=True))
    ).enforce(text_batch(n=["", "1"], s=["", "x"]))
    assert on.valid.to_pydict() == {"n": [1], "s": ["x"]}
    assert on.counts == {("s", RN): 1}
    off = ContractEnforcementService(contract(*spec)).enforce(text_batch(n=["", "1"], s=["", "x"]))
    assert off.counts == {("n", TM): 1}
    assert off.valid.to_pydict() == {"n": [1], "s": ["x"]}


def test_variant_column_keeps_the_row_unless_the_column_is_not_null() -> None:
    spec = (ColumnSpec("n", "integer"), ColumnSpec("m", "integer", nullable=False))
    svc = ContractEnforcementService(
        contract(*spec, type_inference=TypeInferenceSpec(conflict_policy="variant_column"))
    )
    result = svc.enforce(text_batch(n=["1", "x", "3"], m=["1", "2", "y"]))
    assert result.valid.to_pydict() == {
        "n": [1, None],
        "m": [1, 2],
        "__dpone__nc__n": [None, "x"],
    }
    assert result.variant_columns == ("__dpone__nc__n",)
    assert result.rejects.positions.to_pylist() == [2]
    assert result.counts == {("n", TM): 1, ("m", TM): 1}
    (diag,) = result.warnings
    assert diag.action is Action.VARIANT


def test_variant_text_of_typed_values_is_canonical() -> None:
    svc = ContractEnforcementService(
        contract(
            ColumnSpec("n", "integer"),
            coercion="safe",
            type_inference=TypeInferenceSpec(conflict_policy="variant_column"),
        )
    )
    result = svc.enforce(batch(n=pa.array([1.5, 2.0])))
    assert result.valid.to_pydict() == {"n": [None, 2], "__dpone__nc__n": ["1.5", None]}


def test_conflict_policy_quarantine_rejects_even_in_warn_mode() -> None:
    svc = ContractEnforcementService(
        contract(
            ColumnSpec("n", "integer"),
            enforcement="warn",
            type_inference=TypeInferenceSpec(conflict_policy="quarantine"),
        )
    )
    result = svc.enforce(text_batch(n=["1", "x"]))
    assert result.rejects.positions.to_pylist() == [1]
    assert not result.failed


def test_typed_input_strict_and_coerce() -> None:
    typed = batch(n=pa.array([1.0, 3.5]), f=pa.array([1, 2], pa.int32()))
    spec = (ColumnSpec("n", "integer"), ColumnSpec("f", "float"))
    strict = ContractEnforcementService(contract(*spec, enforcement="strict")).enforce(typed)
    assert strict.counts == {("n", TM): 2, ("f", TM): 2}
    safe = contract(*spec, enforcement="quarantine", coercion="safe")
    coerce = ContractEnforcementService(safe).enforce(typed)
    assert coerce.valid.to_pydict() == {"n": [1], "f": [1.0]}
    assert coerce.counts == {("n", TM): 1}
    canonical = ContractEnforcementService(contract(*spec, enforcement="quarantine"))
    assert canonical.enforce(typed).counts == {("n", TM): 2, ("f", TM): 2}


@pytest.mark.parametrize("mode", ["quarantine", "warn"])
def test_quarantine_and_warn_are_canonical_only_unless_coercion_safe(mode: str) -> None:
    spec = (ColumnSpec("n", "integer"), ColumnSpec("b", "boolean"))
    rows = text_batch(n=["1e2", "7", " 8"], b=["yes", "true", "false"])
    canonical = ContractEnforcementService(contract(*spec, enforcement=mode))  # type: ignore[arg-type]
    assert canonical.enforce(rows).counts == {("n", TM): 2, ("b", TM): 1}
    safe = contract(*spec, enforcement=mode, coercion="safe")  # type: ignore[arg-type]
    result = ContractEnforcementService(safe).enforce(rows)
    assert result.counts == {}
    assert result.valid.to_pydict() == {"n": [100, 7, 8], "b": [True, True, False]}


def test_sink_schema_and_result_schema_agree() -> None:
    c = contract(*ORDERS)
    result = ContractEnforcementService(c).enforce(_orders())
    assert result.valid.schema == sink_schema(c)
    assert sink_schema(c).field("id").nullable is False
    assert sink_schema(contract(*ORDERS, enforcement="warn")).field("id").nullable is False


def test_empty_batch() -> None:
    result = _service("strict").enforce(text_batch(id=[], amount=[], at=[]))
    assert result.valid.num_rows == 0
    assert not result.failed
    assert result.valid_positions.to_pylist() == []


def test_table_input_is_accepted() -> None:
    table = pa.Table.from_batches([_orders(), _orders()])
    result = _service("quarantine").enforce(table)
    assert result.input_rows == 12
    assert result.rejects.positions.to_pylist() == [1, 2, 3, 4, 7, 8, 9, 10]


def test_duplicate_input_columns_are_an_error() -> None:
    dup = pa.RecordBatch.from_arrays([pa.array(["1"]), pa.array(["2"])], names=["id", "id"])
    with pytest.raises(ContractError) as info:
        _service("quarantine").enforce(dup)
    assert info.value.code == "DPONE_CONTRACT_DUPLICATE_COLUMN"


def test_invalid_contract_is_refused_up_front() -> None:
    with pytest.raises(ContractDefinitionError):
        ContractEnforcementService(contract(ColumnSpec("d", "decimal", precision=40, scale=2)))
    with pytest.raises(ContractDefinitionError):
        ContractEnforcementService(contract(ColumnSpec("d", "decimal", precision=4, scale=5)))


def test_bigint_is_an_alias_of_integer() -> None:
    result = ContractEnforcementService(contract(ColumnSpec("b", "bigint"))).enforce(
        text_batch(b=["9223372036854775807"])
    )
    assert result.valid.schema.field("b").type == pa.int64()
    assert result.valid.column("b").to_pylist() == [2**63 - 1]


def test_counts_are_by_column_and_reason_and_value_free() -> None:
    result = _service("quarantine").enforce(_orders())
    first = min(result.counts)
    assert first == ("amount", RN)
    assert result.counts[first] == 1
    assert SECRET not in repr(result.counts)
