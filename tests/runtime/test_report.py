"""The run report's typed sections serialise to ``dpone.run.v1`` exactly (keys, order, values),
and run failures are classified by their type, never by their code's text."""

from __future__ import annotations

import json

import pytest

from dpone.assertions.engine import AssertionFailed, PredicateError
from dpone.cli.run_text import render_text
from dpone.connectors.errors import SinkError, SourceDecodeError
from dpone.contracts.errors import ContractViolation, DuplicateColumn, SchemaFrozen
from dpone.contracts.names import Renamed
from dpone.contracts.reasons import ReasonCode
from dpone.dlq.errors import DlqDiskFull
from dpone.errors import DponeError, ErrorDetail, Interrupted
from dpone.evidence.model import SchemaChange
from dpone.published import schema_errors
from dpone.runtime.outcome import is_quality_failure
from dpone.runtime.report import (
    DlqSection,
    Recovery,
    RowCounts,
    RunReport,
    SinkSection,
    StageSeconds,
    StateSection,
    Timings,
)


def _report(**changes: object) -> RunReport:
    fields: dict[str, object] = {
        "run_id": "run-1",
        "load_id": "01JBXYZ0000000000000000000",
        "pipeline": "orders",
        "status": "succeeded",
        "data_outcome": "passed_with_quarantine",
        "exit_code": 0,
        "timings": Timings(
            "2026-01-01T00:00:00Z",
            "2026-01-01T00:00:02Z",
            2.00049,
            StageSeconds(
                read=0.5, enforce=0.25, dlq=0.125, dlq_writer=0.1, sink_write=1.0, sink_writer=0.75
            ),
        ),
        "rows": RowCounts(read=10, loaded=7, quarantined=2, warned=1, skipped=1, chunks=3),
        "dlq": DlqSection(".dpone/dlq", "run-1", 2),
        "sink": SinkSection("duckdb", "analytics.orders", "01JBXYZ0000000000000000000", True),
        "state": StateSection(True, "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z", 4),
        "evidence": ".dpone/evidence/orders/run-1/data_contract_evidence.json",
        "schema_changes": (
            SchemaChange("table_created", "analytics.orders"),
            SchemaChange("column_added", "analytics.orders", "note", "string"),
        ),
        "recovered": (
            Recovery(
                "run-0", "rolled_back", "it died", ("run-0",), ("01JBXYZ0000000000000000001",)
            ),
        ),
        "error": None,
        "renamed_columns": (Renamed(1, "", "column_1", "empty"),),
    }
    fields.update(changes)
    return RunReport(**fields)  # type: ignore[arg-type]


def test_a_succeeded_report_is_the_documented_json() -> None:
    doc = _report().to_json()

    assert doc == {
        "schema": "dpone.run.v1",
        "run_id": "run-1",
        "load_id": "01JBXYZ0000000000000000000",
        "pipeline": "orders",
        "status": "succeeded",
        "data_outcome": "passed_with_quarantine",
        "exit_code": 0,
        "started_at": "2026-01-01T00:00:00Z",
        "finished_at": "2026-01-01T00:00:02Z",
        "duration_s": 2.0,
        "rows_per_s": 5.0,
        "timings": {
            "read": 0.5,
            "enforce": 0.25,
            "dlq": 0.125,
            "dlq_writer": 0.1,
            "sink_write": 1.0,
            "sink_writer": 0.75,
            "commit": 0.0,
            "total": 2.00049,
        },
        "rows": {
            "read": 10,
            "loaded": 7,
            "quarantined": 2,
            "warned": 1,
            "skipped": 1,
            "late_skipped": 0,
            "chunks": 3,
        },
        "dlq": {"directory": ".dpone/dlq", "run_id": "run-1", "records": 2},
        "evidence": ".dpone/evidence/orders/run-1/data_contract_evidence.json",
        "sink": {
            "type": "duckdb",
            "table": "analytics.orders",
            "load_id": "01JBXYZ0000000000000000000",
            "committed": True,
        },
        "state": {
            "advanced": True,
            "from": "2026-01-01T00:00:00Z",
            "to": "2026-01-02T00:00:00Z",
            "revision": 4,
        },
        "schema_changes": [
            {"change": "table_created", "table": "analytics.orders", "column": None, "type": None},
            {
                "change": "column_added",
                "table": "analytics.orders",
                "column": "note",
                "type": "string",
            },
        ],
        "recovered": [
            {
                "run_id": "run-0",
                "action": "rolled_back",
                "reason": "it died",
                "dlq_runs_aborted": ["run-0"],
                "staging_dropped": ["01JBXYZ0000000000000000001"],
            }
        ],
        "renamed_columns": [{"position": 1, "source": "", "name": "column_1"}],
        "error": None,
        "hints": [],
    }
    # The order of the keys is the document's too (what `--format json` prints).
    assert list(doc) == [
        "schema",
        "run_id",
        "load_id",
        "pipeline",
        "status",
        "data_outcome",
        "exit_code",
        "started_at",
        "finished_at",
        "duration_s",
        "rows_per_s",
        "timings",
        "rows",
        "dlq",
        "evidence",
        "sink",
        "state",
        "schema_changes",
        "renamed_columns",
        "recovered",
        "error",
        "hints",
    ]
    assert schema_errors(doc, "dpone.run.v1") == []
    assert json.loads(json.dumps(doc)) == doc
    assert '  column     1 "" → column_1' in render_text(doc).splitlines()


def test_a_failed_report_carries_its_error_as_dpone_error_v1() -> None:
    detail = ErrorDetail(
        code="DPONE_SOURCE_DECODE_FAILED",
        message="d/x.csv: line 3: a field is missing",
        stage="read",
        path="d/x.csv",
        line=3,
        fixes=("fix the line",),
    )
    report = _report(
        status="failed",
        data_outcome=None,
        exit_code=1,
        timings=Timings("2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z", 0.0),
        dlq=DlqSection(None),
        sink=SinkSection("duckdb", "analytics.orders", "01JBXYZ0000000000000000000"),
        state=StateSection(False, None, None, 0),
        evidence=None,
        schema_changes=(),
        recovered=(),
        error=detail,
    )

    doc = report.to_json()

    assert doc["error"] == {
        "schema": "dpone.error.v1",
        "code": "DPONE_SOURCE_DECODE_FAILED",
        "stage": "read",
        "severity": "error",
        "message": "d/x.csv: line 3: a field is missing",
        "fixes": ["fix the line"],
        "path": "d/x.csv",
        "line": 3,
    }
    assert doc["rows_per_s"] == 0.0
    assert doc["dlq"] == {"directory": None, "run_id": None, "records": 0}
    assert doc["sink"]["committed"] is False
    assert doc["state"] == {"advanced": False, "from": None, "to": None, "revision": 0}
    assert schema_errors(doc, "dpone.run.v1") == []
    text = render_text(doc)
    assert "FAILED" in text
    assert "DPONE_SOURCE_DECODE_FAILED: d/x.csv: line 3" in text
    assert "fix: fix the line" in text


def test_the_sections_are_frozen() -> None:
    report = _report()
    with pytest.raises(AttributeError):
        report.status = "failed"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        report.rows.read = 0  # type: ignore[misc]
    with pytest.raises(AttributeError):
        report.sink.committed = False  # type: ignore[misc]
    assert report.started_at == "2026-01-01T00:00:00Z"
    assert report.duration_s == 2.00049


_COUNTS = {("amount", ReasonCode.TYPE_MISMATCH): 2}


@pytest.mark.parametrize(
    ("error", "quality"),
    [
        (ContractViolation("strict", 2, _COUNTS), True),
        (SchemaFrozen("columns", ["note"], 3), True),
        (AssertionFailed("assertion 'ids' failed"), True),
        # A predicate that raised is the assertion's verdict, under its own code.
        (AssertionFailed("raised", code="DPONE_ASSERTION_PREDICATE_ERROR"), True),
        # The input's shape, not its values: the machinery's failure.
        (DuplicateColumn("the input has duplicate column names: a"), False),
        (PredicateError("predicate p does not import"), False),
        (SourceDecodeError("d/x.csv: the file is corrupt"), False),
        (SinkError("the load failed"), False),
        (DlqDiskFull("the DLQ's disk is full"), False),
        (Interrupted("the run was interrupted"), False),
        # The type decides, not the text of the code.
        (DponeError("not a contract error", code="DPONE_CONTRACT_VIOLATION"), False),
        (DponeError("not an assertion", code="DPONE_ASSERTION_FAILED"), False),
    ],
)
def test_quality_failures_are_told_apart_by_type(error: DponeError, quality: bool) -> None:
    assert is_quality_failure(error) is quality


def test_no_failure_is_no_quality_failure() -> None:
    assert is_quality_failure(None) is False
