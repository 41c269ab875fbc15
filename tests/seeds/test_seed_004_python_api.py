"""Seed 004's own Python interface, as the seed writes it (SPEC §11).

Each test body starts with a code block of the seed ("Python API", "Evidence bundle",
"Replay algorithm") verbatim, ids filled in with real ULIDs, then checks what is on disk.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest

from dpone.contracts.errors import ContractViolation
from dpone.dlq.model import DlqRecord
from dpone.errors import ConfigError
from dpone.ids import new_ulid
from dpone.published import schema_errors
from tests.support.processes import dpone_subprocess

RUN_ID = new_ulid(datetime(2026, 1, 2, tzinfo=UTC))
LOAD_ID = new_ulid(datetime(2026, 1, 2, 0, 0, 1, tzinfo=UTC))


def _python_api() -> Any:
    # --- seed 004, "Python API" (verbatim but the ids) ---
    from dpone.contracts.dlq import DlqPolicy
    from dpone.ops.dlq import DlqService
    from dpone.ops.dlq_store import DlqFileStore
    from dpone.readiness.schema_contracts import SchemaContract
    from dpone.type_system import ContractEnforcementService

    contract = SchemaContract.from_config(
        {
            "enforcement": "quarantine",
            "columns": {"amount": {"type": "decimal", "precision": 18, "scale": 2}},
        }
    )
    policy = DlqPolicy.from_config({"pii_policy": "reference_only"})
    dlq = DlqService(
        DlqFileStore(policy.directory, max_record_bytes=policy.max_record_bytes),
        policy=policy,
    )
    result = ContractEnforcementService(quarantine=dlq).enforce(
        rows=[{"amount": "12.30"}, {"amount": "zz-not-money"}],
        contract=contract,
        run_id=RUN_ID,
        load_id=LOAD_ID,
    )

    assert result.target_rows == [{"amount": "12.30"}]
    assert result.state_commit_allowed
    assert result.data_outcome == "passed_with_quarantine"
    # --- end of the seed's block ---
    return result, dlq


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_python_api_block_runs_and_writes_a_verified_reference_only_record(in_tmp: Path) -> None:
    result, dlq = _python_api()
    assert result.rows_read == 2
    assert result.rows_loaded == 1
    assert len(result.dlq_record_ids) == 1
    assert result.violations == {("amount", "schema.type_mismatch"): 1}
    (record,) = dlq.records(RUN_ID)
    assert record.record_ref == f"dpone://runs/{RUN_ID}/loads/{LOAD_ID}/rows/2"
    assert record.reason.code.value == "schema.type_mismatch"
    assert record.payload.value is None  # reference_only: no value anywhere
    segments = list((in_tmp / ".dpone/dlq/runs" / RUN_ID / "segments").glob("*.jsonl"))
    assert segments
    assert all(b"zz-not-money" not in s.read_bytes() for s in segments)
    for line in segments[0].read_text().splitlines():
        assert schema_errors(json.loads(line), "dpone.dlq.v1") == []
    assert dlq.summary(RUN_ID).to_json()["runs"][0]["record_count"] == 1
    verify = dpone_subprocess(
        ["ops", "dlq", "verify", "--dir", ".dpone/dlq", "--format", "json"], cwd=in_tmp, env={}
    )
    assert verify.returncode == 0, verify.stderr
    assert json.loads(verify.stdout)["clean"] is True


def test_evidence_block_writes_a_schema_valid_value_free_bundle(in_tmp: Path) -> None:
    result, _ = _python_api()
    # --- seed 004, "Evidence bundle" (verbatim but the id) ---
    from dpone.ops.data_contract_evidence import DataContractEvidenceBundleWriter

    artifact = DataContractEvidenceBundleWriter(".dpone/evidence/orders").write(
        run_id=RUN_ID,
        pipeline="orders",
        enforcement=result,
    )
    # --- end of the seed's block ---
    doc = json.loads(Path(artifact.path).read_text())
    assert schema_errors(doc, "dpone.data_contract_evidence.v1") == []
    assert doc["execution_status"] == "succeeded"
    assert doc["data_outcome"] == "passed_with_quarantine"
    assert doc["summary"]["rows_quarantined"] == 1
    assert doc["summary"]["rows_loaded"] == 1
    assert doc["dlq"]["reasons"] == {"schema.type_mismatch": 1}
    assert doc["openlineage_facets"]["dpone"]["dlqRecordIds"] == list(result.dlq_record_ids)
    index = (Path(artifact.path).parent / doc["dlq"]["index_ref"]).resolve()
    assert index == (in_tmp / ".dpone/dlq/runs" / RUN_ID / "index.json").resolve()
    text = Path(artifact.path).read_text()
    assert "12.30" not in text
    assert "zz-not-money" not in text
    assert "target_rows" not in text
    gate = dpone_subprocess(
        ["ops", "release-gate", str(artifact.path), "--max-quarantine-ratio", "1"],
        cwd=in_tmp,
        env={},
    )
    assert gate.returncode == 0, gate.stdout + gate.stderr


class MemoryResolver:
    """Finds the rows the test enforced by their ``dpone://runs/.../rows/<n>`` ref."""

    identity = "memory:orders-extract"

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows

    def resolve(self, record: DlqRecord) -> Mapping[str, Any] | None:
        n = int(record.record_ref.rsplit("/", 1)[1])
        return {"amount": "45.60"} if self.rows[n - 1]["amount"] == "zz-not-money" else None


class DuckdbSink:
    """Applies rows to a DuckDB file; each key at most once (a key table in the same
    transaction as the row)."""

    identity = "duckdb:orders"

    def __init__(self, path: Path, fail_after_commit: bool = False) -> None:
        self.path = path
        self.fail_after_commit = fail_after_commit
        self.calls = 0
        with duckdb.connect(str(path)) as con:
            con.execute("CREATE TABLE IF NOT EXISTS orders (amount DECIMAL(18, 2))")
            con.execute("CREATE TABLE IF NOT EXISTS replay_keys (k VARCHAR PRIMARY KEY)")

    def apply(self, row: Mapping[str, Any], idempotency_key: str) -> None:
        self.calls += 1
        with duckdb.connect(str(self.path)) as con:
            con.execute("BEGIN")
            if not con.execute(
                "SELECT 1 FROM replay_keys WHERE k = ?", [idempotency_key]
            ).fetchall():
                con.execute(
                    "INSERT INTO orders VALUES (CAST(? AS DECIMAL(18, 2)))", [row["amount"]]
                )
                con.execute("INSERT INTO replay_keys VALUES (?)", [idempotency_key])
            con.execute("COMMIT")
        if self.fail_after_commit:
            raise RuntimeError("the sink's connection dropped after its commit")

    def amounts(self) -> list[str]:
        with duckdb.connect(str(self.path)) as con:
            return [str(r[0]) for r in con.execute("SELECT amount FROM orders").fetchall()]


def _replay(store: Any, resolver: Any, sink: Any) -> Any:
    # --- seed 004, "Replay algorithm" (verbatim but the id) ---
    from dpone.ops.dlq import DlqReplayService

    replay = DlqReplayService(store)
    plan = replay.plan(
        run_id=RUN_ID,
        resolver_identity=resolver.identity,
        target_identity=sink.identity,
    )
    result = replay.execute(plan, resolver=resolver, sink=sink)
    # --- end of the seed's block ---
    return plan, result


def test_replay_block_applies_once_then_nothing(in_tmp: Path) -> None:
    _, dlq = _python_api()
    store = dlq.store
    resolver = MemoryResolver([{"amount": "12.30"}, {"amount": "zz-not-money"}])
    sink = DuckdbSink(in_tmp / "orders.duckdb")
    plan, result = _replay(store, resolver, sink)
    assert plan.to_json()["schema"] == "dpone.dlq-replay-plan.v1"
    assert schema_errors(plan.to_json(), "dpone.dlq-replay-plan.v1") == []
    assert result.counts()["applied"] == 1
    assert schema_errors(result.to_json(), "dpone.dlq-replay-result.v1") == []
    assert sink.amounts() == ["45.60"]
    (ack_file,) = (in_tmp / ".dpone/dlq/acks" / RUN_ID).glob("*.jsonl")
    for line in ack_file.read_text().splitlines():
        assert schema_errors(json.loads(line), "dpone.dlq-replay-ack.v1") == []
    (ack,) = store.read_acks(RUN_ID).values()
    assert ack.idempotency_key == plan.items[0].idempotency_key
    _, again = _replay(store, resolver, sink)
    assert again.counts() == {**again.counts(), "applied": 0, "already_acknowledged": 1}
    assert sink.calls == 1
    assert sink.amounts() == ["45.60"]
    verify = dpone_subprocess(["ops", "dlq", "verify", "--dir", ".dpone/dlq"], cwd=in_tmp, env={})
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_a_changed_identity_plan_or_key_is_refused_before_any_row(in_tmp: Path) -> None:
    from dpone.ops.dlq import DlqReplayService
    from dpone.ops.replay import ReplayPlanMismatch

    _, dlq = _python_api()
    resolver = MemoryResolver([{"amount": "12.30"}, {"amount": "zz-not-money"}])
    sink = DuckdbSink(in_tmp / "orders.duckdb")
    replay = DlqReplayService(dlq.store)
    plan = replay.plan(
        run_id=RUN_ID, resolver_identity=resolver.identity, target_identity="duckdb:other"
    )
    with pytest.raises(ReplayPlanMismatch):
        replay.execute(plan, resolver=resolver, sink=sink)
    plan = replay.plan(
        run_id=RUN_ID, resolver_identity=resolver.identity, target_identity=sink.identity
    )
    item = plan.items[0]._replace(idempotency_key="replay-forged")
    with pytest.raises(ReplayPlanMismatch, match="idempotency key"):
        replay.execute(dataclasses.replace(plan, items=(item,)), resolver=resolver, sink=sink)
    assert sink.calls == 0
    assert sink.amounts() == []
    assert dlq.store.read_acks(RUN_ID) == {}


def test_an_ack_is_written_only_after_the_sink_returned(in_tmp: Path) -> None:
    _, dlq = _python_api()
    resolver = MemoryResolver([{"amount": "12.30"}, {"amount": "zz-not-money"}])
    failing = DuckdbSink(in_tmp / "orders.duckdb", fail_after_commit=True)
    with pytest.raises(RuntimeError):
        _replay(dlq.store, resolver, failing)
    assert dlq.store.read_acks(RUN_ID) == {}  # the sink never returned
    sink = DuckdbSink(in_tmp / "orders.duckdb")
    _, result = _replay(dlq.store, resolver, sink)
    assert result.counts()["applied"] == 1
    assert sink.amounts() == ["45.60"]  # the same key: applied once across both executions
    assert len(dlq.store.read_acks(RUN_ID)) == 1


def test_quarantine_without_a_dlq_is_a_typed_error() -> None:
    from dpone.readiness.schema_contracts import SchemaContract
    from dpone.type_system import ContractEnforcementService, QuarantineRequired

    contract = SchemaContract.from_config({"enforcement": "quarantine", "columns": {}})
    with pytest.raises(QuarantineRequired) as err:
        ContractEnforcementService().enforce(rows=[{"a": "1"}], contract=contract)
    assert err.value.code == "DPONE_DLQ_REQUIRED"


def test_strict_holds_the_state_and_loads_nothing() -> None:
    from dpone.readiness.schema_contracts import SchemaContract
    from dpone.type_system import ContractEnforcementService

    contract = SchemaContract.from_config(
        {"columns": {"amount": {"type": "decimal", "precision": 18, "scale": 2}}}
    )
    bad = ContractEnforcementService().enforce(
        rows=[{"amount": "1.00"}, {"amount": "x"}], contract=contract
    )
    assert (bad.state_commit_allowed, bad.data_outcome, bad.target_rows) == (
        False,
        "failed_quality_gate",
        [],
    )
    good = ContractEnforcementService().enforce(
        rows=[{"amount": "1.00"}, {"amount": 2}], contract=contract
    )
    assert (good.state_commit_allowed, good.data_outcome) == (True, "passed")
    assert good.target_rows == [{"amount": "1.00"}, {"amount": 2}]


def test_a_missing_key_is_null_and_a_required_column_rejects_it(in_tmp: Path) -> None:
    from dpone.contracts.dlq import DlqPolicy
    from dpone.ops.dlq import DlqService
    from dpone.ops.dlq_store import DlqFileStore
    from dpone.readiness.schema_contracts import SchemaContract
    from dpone.type_system import ContractEnforcementService

    contract = SchemaContract.from_config(
        {"enforcement": "quarantine", "columns": {"id": {"type": "integer", "nullable": False}}}
    )
    policy = DlqPolicy.from_config({"pii_policy": "masked"})
    dlq = DlqService(DlqFileStore(policy.directory), policy=policy)
    result = ContractEnforcementService(quarantine=dlq).enforce(
        rows=[{"id": 1}, {"other": "x"}], contract=contract, run_id=RUN_ID, load_id=LOAD_ID
    )
    assert result.target_rows == [{"id": 1}]
    (record,) = dlq.records(RUN_ID)
    assert record.reason.code.value == "schema.required_null"
    assert record.payload.policy == "masked"
    assert record.payload.value == {"other": "[REDACTED]"}  # the row's shape as given


def test_config_errors_are_the_compilers() -> None:
    from dpone.contracts.dlq import DlqPolicy
    from dpone.readiness.schema_contracts import SchemaContract

    with pytest.raises(ConfigError) as err:
        SchemaContract.from_config({"columns": {"a": {"type": "decimal", "precision": 99}}})
    assert [d.code for d in err.value.errors] == ["DPONE_MANIFEST_RANGE"]
    assert err.value.errors[0].pointer == "/sink/options/schema_contract/columns/a/precision"
    with pytest.raises(ConfigError) as err:
        DlqPolicy.from_config({"retention_days": 0, "max_record_bytes": 1})
    assert {d.code for d in err.value.errors} == {"DPONE_MANIFEST_DLQ_LIMIT"}
    assert DlqPolicy.from_config({}).directory == ".dpone/dlq"
    seed_options = SchemaContract.from_config(
        {
            "schema_contract": {"enforcement": "quarantine", "columns": {}},
            "dlq": {"retention_days": 30, "pii_policy": "reference_only"},
            "type_inference": {"conflict_policy": "quarantine"},
        }
    )
    assert seed_options.spec.type_inference.conflict_policy == "quarantine"


def _service_at(root: Path, enforcement: str, columns: dict[str, Any]) -> tuple[Any, Any, Any]:
    from dpone.contracts.dlq import DlqPolicy
    from dpone.ops.dlq import DlqService
    from dpone.ops.dlq_store import DlqFileStore
    from dpone.readiness.schema_contracts import SchemaContract
    from dpone.type_system import ContractEnforcementService

    policy = DlqPolicy.from_config({"directory": str(root / "dlq")})
    dlq = DlqService(DlqFileStore(policy.directory), policy=policy)
    contract = SchemaContract.from_config({"enforcement": enforcement, "columns": columns})
    return ContractEnforcementService(quarantine=dlq), contract, dlq


def test_coerce_repairs_losslessly_dead_letters_the_rest_and_holds_the_state(
    tmp_path: Path,
) -> None:
    service, contract, dlq = _service_at(tmp_path, "coerce", {"n": {"type": "integer"}})
    result = service.enforce(
        rows=[{"n": " 7 "}, {"n": "3.5"}], contract=contract, run_id=RUN_ID, load_id=LOAD_ID
    )
    assert result.target_rows == [{"n": " 7 "}]
    assert result.target_batch.column("n").to_pylist() == [7]
    assert result.state_commit_allowed is False  # the next run re-reads the rejected row
    assert result.data_outcome == "passed_with_quarantine"
    assert [r.reason.code.value for r in dlq.records(RUN_ID)] == ["schema.type_mismatch"]


def test_strict_writes_no_dead_letter(tmp_path: Path) -> None:
    service, contract, dlq = _service_at(tmp_path, "strict", {"n": {"type": "integer"}})
    result = service.enforce(
        rows=[{"n": "1"}, {"n": "x"}], contract=contract, run_id=RUN_ID, load_id=LOAD_ID
    )
    assert result.failure_code == "DPONE_CONTRACT_VIOLATION"
    assert result.failure_record_refs == (f"dpone://runs/{RUN_ID}/loads/{LOAD_ID}/rows/2",)
    with pytest.raises(ContractViolation) as err:
        result.raise_for_failure()
    assert err.value.record_refs == result.failure_record_refs
    assert result.dlq_record_ids == ()
    assert dlq.store.run_ids() == []


def test_warn_loads_null_for_a_bad_value_and_advances(tmp_path: Path) -> None:
    service, contract, _ = _service_at(tmp_path, "warn", {"n": {"type": "integer"}})
    result = service.enforce(rows=[{"n": "1"}, {"n": "x"}], contract=contract)
    assert result.target_batch.column("n").to_pylist() == [1, None]
    assert result.state_commit_allowed is True
    assert result.data_outcome == "passed_with_warnings"


def test_python_typed_and_mixed_values(tmp_path: Path) -> None:
    from decimal import Decimal

    service, contract, _ = _service_at(
        tmp_path,
        "quarantine",
        {"amount": {"type": "decimal", "precision": 18, "scale": 2}, "ok": {"type": "boolean"}},
    )
    rows = [
        {"amount": Decimal("1.50"), "ok": True},
        {"amount": "2.25", "ok": "false"},
        {"amount": 3, "ok": None},
    ]
    result = service.enforce(rows=rows, contract=contract)
    assert result.target_rows == rows
    assert result.target_batch.column("amount").to_pylist() == [
        Decimal("1.50"),
        Decimal("2.25"),
        Decimal("3.00"),
    ]
    assert result.target_batch.column("ok").to_pylist() == [True, False, None]


def test_a_strict_failure_has_failed_evidence(tmp_path: Path) -> None:
    from dpone.ops.data_contract_evidence import DataContractEvidenceBundleWriter

    service, contract, _ = _service_at(tmp_path, "strict", {"n": {"type": "integer"}})
    result = service.enforce(rows=[{"n": "1"}, {"n": "x"}], contract=contract, run_id=RUN_ID)
    artifact = DataContractEvidenceBundleWriter(tmp_path / "evidence").write(
        run_id=RUN_ID, pipeline="orders", enforcement=result
    )
    doc = json.loads(artifact.path.read_text())
    assert schema_errors(doc, "dpone.data_contract_evidence.v1") == []
    assert (doc["execution_status"], doc["data_outcome"]) == ("failed", "failed_quality_gate")
    assert doc["failure_code"] == "DPONE_CONTRACT_VIOLATION"
    assert doc["failure_record_refs"] == [f"dpone://runs/{RUN_ID}/loads/{result.load_id}/rows/2"]
    assert doc["dlq"]["index_ref"] is None
    assert doc["state"]["advanced"] is False


def test_coerce_without_a_dlq_counts_dropped_rows() -> None:
    from dpone.readiness.schema_contracts import SchemaContract
    from dpone.type_system import ContractEnforcementService

    contract = SchemaContract.from_config(
        {"enforcement": "coerce", "columns": {"n": {"type": "integer"}}}
    )
    result = ContractEnforcementService().enforce(
        rows=[{"n": "1"}, {"n": "3.5"}], contract=contract
    )
    assert result.target_rows == [{"n": "1"}]
    assert result.rows_dropped == 1
    assert result.state_commit_allowed is False
    assert result.data_outcome == "passed_with_quarantine"
