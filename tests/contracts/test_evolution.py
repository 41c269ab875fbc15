"""evolution (tables / columns / data_type) with dlt's precedence, and type inference."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from dpone.contracts import (
    TABLE_SCOPE,
    Action,
    ColumnSpec,
    ContractEnforcementService,
    EnforcementResult,
    ReasonCode,
    SchemaFrozen,
)
from dpone.contracts.spec import EvolutionMode, EvolutionSpec, TypeInferenceSpec
from tests.contracts.helpers import batch, contract, text_batch

CNA = ReasonCode.COLUMN_NOT_ALLOWED
TM = ReasonCode.TYPE_MISMATCH
DECLARED = ColumnSpec("id", "integer", nullable=False)
EXISTING = pa.schema([("id", pa.int64())])


def _svc(
    enforcement: str = "quarantine",
    inference: bool = True,
    **evolution: EvolutionMode,
) -> ContractEnforcementService:
    return ContractEnforcementService(
        contract(
            DECLARED,
            enforcement=enforcement,  # type: ignore[arg-type]
            evolution=EvolutionSpec(**evolution),
            type_inference=TypeInferenceSpec(enabled=inference),
        )
    )


ROWS = text_batch(id=["1", "2", "3"], extra=["a", None, "c"])


# --- tables ------------------------------------------------------------------------------------


def test_tables_evolve_creates_the_table() -> None:
    result = _svc(tables="evolve").enforce(ROWS, existing_schema=None)
    assert result.valid.num_rows == 3
    assert not result.failed


def test_tables_freeze_fails_a_new_table() -> None:
    result = _svc(tables="freeze").enforce(ROWS, existing_schema=None)
    assert isinstance(result.error, SchemaFrozen)
    assert result.error.code == "DPONE_SCHEMA_FROZEN"
    assert result.error.entity == "tables"
    assert result.valid.num_rows == 0


@pytest.mark.parametrize("mode", ["discard_row", "discard_value"])
def test_tables_discard_rejects_every_row_of_a_new_table(mode: EvolutionMode) -> None:
    result = _svc(tables=mode).enforce(ROWS, existing_schema=None)
    assert result.valid.num_rows == 0
    assert result.rejects.positions.to_pylist() == [0, 1, 2]
    assert result.rejects.columns.to_pylist() == [TABLE_SCOPE] * 3
    assert result.counts == {(TABLE_SCOPE, CNA): 3}


def test_tables_contract_ignores_an_existing_table() -> None:
    result = _svc(tables="freeze").enforce(ROWS, existing_schema=EXISTING)
    assert not result.failed
    assert result.valid.num_rows == 3


# --- columns -----------------------------------------------------------------------------------


def test_columns_contract_does_not_apply_to_a_new_table() -> None:
    """dlt precedence: a table this run creates takes all its columns."""
    result = _svc(columns="freeze").enforce(ROWS, existing_schema=None)
    assert not result.failed
    assert result.valid.schema.names == ["id", "extra"]


def test_columns_evolve_adds_the_column() -> None:
    result = _svc(columns="evolve").enforce(ROWS, existing_schema=EXISTING)
    assert result.valid.column("extra").to_pylist() == ["a", None, "c"]


def test_columns_freeze_fails_on_a_value_in_a_new_column() -> None:
    result = _svc(columns="freeze").enforce(ROWS, existing_schema=EXISTING)
    assert isinstance(result.error, SchemaFrozen)
    assert result.error.entity == "columns"
    assert result.error.columns == ("extra",)
    assert result.error.rows == 2
    assert "extra" not in result.valid.schema.names


def test_columns_freeze_ignores_a_column_without_values() -> None:
    rows = text_batch(id=["1"], extra=[None])
    result = _svc(columns="freeze").enforce(rows, existing_schema=EXISTING)
    assert not result.failed
    assert result.valid.schema.names == ["id"]


def test_columns_discard_row_rejects_the_rows_that_have_the_column() -> None:
    result = _svc(columns="discard_row").enforce(ROWS, existing_schema=EXISTING)
    assert result.rejects.positions.to_pylist() == [0, 2]
    assert result.rejects.reasons.to_pylist() == [CNA, CNA]
    assert result.valid.to_pydict() == {"id": [2]}


def test_columns_discard_value_drops_the_column() -> None:
    result = _svc(columns="discard_value").enforce(ROWS, existing_schema=EXISTING)
    assert result.valid.to_pydict() == {"id": [1, 2, 3]}
    (diag,) = result.warnings
    assert (diag.column, diag.code, diag.action, diag.count) == (
        "extra",
        CNA,
        Action.DROP_COLUMN,
        2,
    )


def test_discard_row_fails_strict_runs() -> None:
    result = _svc(enforcement="strict", columns="discard_row").enforce(
        ROWS, existing_schema=EXISTING
    )
    assert result.failed


def test_a_column_the_sink_already_holds_is_not_new() -> None:
    sink = pa.schema([("id", pa.int64()), ("extra", pa.string())])
    result = _svc(columns="freeze").enforce(ROWS, existing_schema=sink)
    assert not result.failed
    assert result.valid.column("extra").to_pylist() == ["a", None, "c"]


# --- data_type ---------------------------------------------------------------------------------

HELD_INT = pa.schema([("id", pa.int64()), ("qty", pa.int64())])
QTY = text_batch(id=["1", "2", "3"], qty=["10", "many", None])


def test_data_type_evolve_moves_the_value_to_a_variant_column() -> None:
    result = _svc(data_type="evolve").enforce(QTY, existing_schema=HELD_INT)
    assert result.valid.to_pydict() == {
        "id": [1, 2, 3],
        "qty": [10, None, None],
        "__dpone__nc__qty": [None, "many", None],
    }


def test_data_type_freeze_fails() -> None:
    result = _svc(data_type="freeze").enforce(QTY, existing_schema=HELD_INT)
    assert isinstance(result.error, SchemaFrozen)
    assert result.error.entity == "data_type"
    assert result.error.columns == ("qty",)


def test_data_type_discard_row_rejects() -> None:
    result = _svc(data_type="discard_row").enforce(QTY, existing_schema=HELD_INT)
    assert result.rejects.positions.to_pylist() == [1]
    assert result.rejects.reasons.to_pylist() == [TM]


def test_data_type_discard_value_nulls() -> None:
    result = _svc(data_type="discard_value").enforce(QTY, existing_schema=HELD_INT)
    assert result.valid.column("qty").to_pylist() == [10, None, None]
    (diag,) = result.warnings
    assert diag.action is Action.NULL


def test_data_type_uses_the_sink_type_not_the_inferred_one() -> None:
    sink = pa.schema([("id", pa.int64()), ("qty", pa.string())])
    result = _svc(data_type="freeze").enforce(QTY, existing_schema=sink)
    assert not result.failed
    assert result.valid.column("qty").to_pylist() == ["10", "many", None]


def test_json_metadata_of_a_sink_column_is_honoured() -> None:
    field = pa.field("doc", pa.string(), metadata={b"dpone.type": b"json"})
    sink = pa.schema([pa.field("id", pa.int64()), field])
    rows = text_batch(id=["1", "2"], doc=['{"a": 1}', "{oops"])
    result = _svc(data_type="discard_row").enforce(rows, existing_schema=sink)
    assert result.rejects.positions.to_pylist() == [1]


# --- inference ---------------------------------------------------------------------------------


def _types(result: EnforcementResult) -> dict[str, str]:
    """The logical type of each column as the sink receives it (the ``dpone.type`` metadata)."""
    return {f.name: (f.metadata or {})[b"dpone.type"].decode() for f in result.valid.schema}


def test_inference_picks_the_narrowest_type_that_fits_every_sampled_value() -> None:
    svc = _svc()
    rows = text_batch(
        id=["1", "2"],
        n=["1", "-2"],
        f=["1.5", "2"],
        b=["true", "false"],
        d=["2024-01-01", "2024-02-29"],
        t=["2024-01-01T00:00:00Z", "2024-01-01T00:00:00+01:00"],
        naive=["2024-01-01T00:00:00", "2024-01-01T10:00:00"],
        clock=["10:00:00", "23:59:59"],
        s=["1", "x"],
        empty=[None, None],
    )
    result = svc.enforce(rows, existing_schema=None)
    assert _types(result) == {
        "id": "integer",  # declared
        "n": "integer",
        "f": "float",
        "b": "boolean",
        "d": "date",
        "t": "timestamp(tz)",
        "naive": "timestamp",
        "clock": "time",
        "s": "string",
        "empty": "string",
    }
    assert result.valid.column("d").to_pylist() == [dt.date(2024, 1, 1), dt.date(2024, 2, 29)]


def test_inferred_types_are_fixed_after_the_sample() -> None:
    svc = ContractEnforcementService(
        contract(DECLARED, type_inference=TypeInferenceSpec(sample_rows=2))
    )
    first = svc.enforce(text_batch(id=["1", "2", "3"], n=["1", "2", "x"]))
    assert _types(first)["n"] == "integer"
    assert first.rejects.positions.to_pylist() == [2]  # beyond the sample: a conflict
    later = svc.enforce(text_batch(id=["4"], n=["4.5"]))
    assert later.counts == {("n", TM): 1}


def test_prime_fixes_types_from_several_chunks() -> None:
    svc = ContractEnforcementService(
        contract(DECLARED, type_inference=TypeInferenceSpec(sample_rows=2))
    )
    svc.prime([text_batch(id=["1"], n=["1"]), text_batch(id=["2", "3"], n=["2.5", "x"])])
    later = svc.enforce(text_batch(id=["4"], n=["4"]))
    assert _types(later)["n"] == "float"  # "x" is the 3rd row: outside the sample


def test_inference_disabled_keeps_text_as_string_and_typed_as_typed() -> None:
    svc = _svc(inference=False)
    result = svc.enforce(batch(id=pa.array(["1"]), n=pa.array(["1"]), k=pa.array([1], pa.int32())))
    assert result.valid.schema.field("n").type == pa.string()
    assert result.valid.schema.field("k").type == pa.int64()
    assert _types(result) == {"id": "integer", "n": "string", "k": "integer"}


def test_inference_respects_empty_string_is_null() -> None:
    svc = ContractEnforcementService(
        contract(DECLARED, type_inference=TypeInferenceSpec(empty_string_is_null=True))
    )
    result = svc.enforce(text_batch(id=["1", "2"], n=["", "5"]))
    assert _types(result)["n"] == "integer"
    assert result.valid.column("n").to_pylist() == [None, 5]
