"""The lifecycle's failure paths, fast: an in-memory source and sink (``dpone.testing``) around
the real DLQ store, state store, journal and evidence on disk.

Each failure before the sink commit must leave nothing committed (no marker, no row), the
state as it was, the run's DLQ run ``aborted`` with every record it wrote, the evidence
``failed`` and the journal ``failed``; the report says ``failed`` with the error's exit code.
A failure after the commit (the state write) leaves the load committed and the next run
finishes it.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import dpone.faults
from dpone.connectors.errors import SinkUnavailable, SourceUnavailable
from dpone.dlq.refs import RunRowRef, parse_ref
from dpone.dlq.store import DlqStore
from dpone.manifest.compiler import compile_text
from dpone.manifest.plan import Plan
from dpone.published import schema_errors
from dpone.runtime.commit import commit_state
from dpone.runtime.identity import RunIdentity
from dpone.runtime.journal import RunJournal
from dpone.runtime.lifecycle import RunOptions, run_pipeline
from dpone.runtime.report import RunReport
from dpone.state.store import StateStore
from dpone.testing import FrozenClock, MemorySink, MemorySource, run_plan

NAME = "mem_orders"


def _manifest(tmp_path: Path, *, assertions: str = "", dlq: str = "") -> Plan:
    text = f"""
kind: dpone.manifest.v1
name: {NAME}
runtime: {{work_dir: .dpone, chunk_size: 2}}
source: {{type: python, callable: "rows:produce"}}
sink:
  type: duckdb
  dataset: analytics
  table: orders
  strategy: {{mode: merge, unique_key: [id]}}
  options:
    schema_contract:
      enforcement: quarantine
      columns:
        id: {{type: integer, nullable: false}}
        amount: {{type: decimal, precision: 10, scale: 2, nullable: false}}
    dlq: {{pii_policy: reference_only{dlq}}}
    runtime_evidence: {{output_dir: .dpone/evidence}}
{assertions}
state: {{type: file}}
"""
    return compile_text(text, path=tmp_path / "manifest.yaml")


def _rows(n: int, *, bad: tuple[int, ...] = ()) -> list[dict[str, str]]:
    """Rows 1..n as text (as a CSV gives them); a bad row's amount has three decimals."""
    return [{"id": str(i), "amount": "1.005" if i in bad else f"{i}.50"} for i in range(1, n + 1)]


def _state_bytes(tmp_path: Path) -> bytes | None:
    path = tmp_path / ".dpone" / "state" / f"{NAME}.json"
    return path.read_bytes() if path.exists() else None


def _evidence(tmp_path: Path, report: RunReport) -> dict[str, Any]:
    assert report.evidence is not None
    doc: dict[str, Any] = json.loads((tmp_path / report.evidence).read_bytes())
    assert schema_errors(doc, "dpone.data_contract_evidence.v1") == []
    return doc


def _journal_phase(plan: Plan) -> str | None:
    entry = RunJournal(plan.runtime.work_dir / "runs", NAME).read()
    return None if entry is None else entry.phase


def _assert_rolled_back(
    tmp_path: Path, plan: Plan, report: RunReport, sink: MemorySink, *, code: str, exit_code: int
) -> dict[str, Any]:
    """Everything a failure before the sink commit must leave; the run's evidence."""
    doc = report.to_json()
    assert schema_errors(doc, "dpone.run.v1") == []
    assert (report.status, report.exit_code) == ("failed", exit_code)
    assert report.error is not None
    assert report.error.code == code
    assert report.sink.committed is False
    assert report.rows.loaded == 0
    assert report.state.advanced is False
    # nothing committed: no marker, no row, and what was staged is gone
    assert sink.committed_load(report.load_id) is None
    assert sink.loads == []
    assert sink.table is None
    assert sink.staged == {}
    assert _journal_phase(plan) == "failed"
    evidence = _evidence(tmp_path, report)
    assert evidence["execution_status"] == "failed"
    assert evidence["failure_code"] == code
    assert evidence["summary"]["rows_loaded"] == 0
    assert evidence["state"]["advanced"] is False
    return evidence


def _assert_dlq_aborted(plan: Plan, report: RunReport, records: int) -> None:
    index = DlqStore(Path(plan.sink.dlq.directory)).read_index(report.run_id)
    assert index.status == "aborted"
    assert index.record_count == records
    assert report.dlq.run_id == report.run_id
    assert report.dlq.records == report.rows.quarantined == records


def test_a_clean_run_commits_through_the_memory_sink(tmp_path: Path) -> None:
    plan = _manifest(tmp_path)
    sink = MemorySink()

    report = run_plan(plan, source=MemorySource(_rows(5, bad=(3,))), sink=sink)

    assert (report.status, report.exit_code) == ("succeeded", 0)
    assert report.data_outcome == "passed_with_quarantine"
    assert (report.rows.read, report.rows.loaded, report.rows.quarantined) == (5, 4, 1)
    assert report.rows.chunks == 3
    assert sink.committed_load(report.load_id) is not None
    assert sink.table is not None
    assert sink.table.column("id").to_pylist() == [1, 2, 4, 5]
    assert [str(a) for a in sink.table.column("amount").to_pylist()] == [
        "1.50",
        "2.50",
        "4.50",
        "5.50",
    ]
    assert report.state.advanced is True
    assert report.state.revision == 1
    assert _journal_phase(plan) == "finished"
    index = DlqStore(Path(plan.sink.dlq.directory)).read_index(report.run_id)
    assert index.status == "closed"
    # A memory source cannot be read again: its rows are referred to by run, load and row.
    records = list(DlqStore(Path(plan.sink.dlq.directory)).iter_records(report.run_id))
    assert [parse_ref(r.record_ref) for r in records] == [
        RunRowRef(report.run_id, report.load_id, 3)
    ]


def test_the_source_failing_mid_stream_commits_nothing(tmp_path: Path) -> None:
    plan = _manifest(tmp_path)
    sink = MemorySink()
    error = SourceUnavailable("the connection to the source dropped")
    source = MemorySource(_rows(6, bad=(2,)), fail_at=3, error=error)

    report = run_plan(plan, source=source, sink=sink)

    assert source.chunks_read == 2
    _assert_rolled_back(tmp_path, plan, report, sink, code="DPONE_SOURCE_UNAVAILABLE", exit_code=1)
    assert report.rows.read == 4
    assert sink.aborted == [report.load_id]  # two chunks were staged, then dropped
    assert _state_bytes(tmp_path) is None
    _assert_dlq_aborted(plan, report, records=1)


def test_a_dlq_write_failing_commits_nothing(tmp_path: Path) -> None:
    # At most one record per DLQ run: the second chunk's bad row cannot be written.
    plan = _manifest(tmp_path, dlq=", max_records_per_run: 1")
    sink = MemorySink()

    report = run_plan(plan, source=MemorySource(_rows(6, bad=(1, 4))), sink=sink)

    _assert_rolled_back(tmp_path, plan, report, sink, code="DPONE_DLQ_LIMIT_EXCEEDED", exit_code=1)
    assert _state_bytes(tmp_path) is None
    # The record of the first chunk was durable; the aborted index lists it, and only it.
    _assert_dlq_aborted(plan, report, records=1)


def test_a_failing_row_assertion_commits_nothing(tmp_path: Path) -> None:
    plan = _manifest(tmp_path, assertions="quality: {assertions: {unique_columns: [id]}}")
    sink = MemorySink()
    rows = [*_rows(4, bad=(1,)), {"id": "3", "amount": "9.00"}]  # id 3 twice, chunk 3

    report = run_plan(plan, source=MemorySource(rows), sink=sink)

    evidence = _assert_rolled_back(
        tmp_path, plan, report, sink, code="DPONE_ASSERTION_FAILED", exit_code=1
    )
    assert report.data_outcome == "failed_quality_gate"
    assert evidence["data_outcome"] == "failed_quality_gate"
    assert [a["verdict"] for a in evidence["assertions"]] == ["failed"]
    _assert_dlq_aborted(plan, report, records=1)


def test_a_failing_batch_assertion_drops_every_staged_chunk(tmp_path: Path) -> None:
    plan = _manifest(tmp_path, assertions="quality: {assertions: {min_rows_per_load: 100}}")
    sink = MemorySink()

    report = run_plan(plan, source=MemorySource(_rows(5)), sink=sink)

    _assert_rolled_back(tmp_path, plan, report, sink, code="DPONE_ASSERTION_FAILED", exit_code=1)
    assert report.rows.read == 5
    assert sink.aborted == [report.load_id]
    assert report.dlq.run_id is None  # nothing was quarantined: no DLQ run at all
    assert DlqStore(Path(plan.sink.dlq.directory)).run_ids() == []


def test_the_sink_commit_failing_commits_nothing_and_the_next_run_loads_once(
    tmp_path: Path,
) -> None:
    plan = _manifest(tmp_path)
    sink = MemorySink(fail_at="commit")

    report = run_plan(plan, source=MemorySource(_rows(5, bad=(5,))), sink=sink)

    _assert_rolled_back(tmp_path, plan, report, sink, code="DPONE_SINK_UNAVAILABLE", exit_code=1)
    assert _state_bytes(tmp_path) is None
    # The DLQ run had closed before the commit; the failure turns it aborted.
    _assert_dlq_aborted(plan, report, records=1)

    sink.fail_at = None
    again = run_plan(plan, source=MemorySource(_rows(5, bad=(5,))), sink=sink)

    assert (again.status, again.exit_code) == ("succeeded", 0)
    assert [load.marker.load_id for load in sink.loads] == [again.load_id]
    assert sink.table is not None
    assert sink.table.column("id").to_pylist() == [1, 2, 3, 4]
    assert again.state.revision == 1


def test_the_sink_failing_to_stage_commits_nothing(tmp_path: Path) -> None:
    plan = _manifest(tmp_path)
    sink = MemorySink(fail_at="stage", error=SinkUnavailable("the staging table is gone"))

    report = run_plan(plan, source=MemorySource(_rows(4, bad=(1,))), sink=sink)

    _assert_rolled_back(tmp_path, plan, report, sink, code="DPONE_SINK_UNAVAILABLE", exit_code=1)
    _assert_dlq_aborted(plan, report, records=1)


def test_the_state_write_failing_after_the_commit_is_finished_by_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = _manifest(tmp_path)
    sink = MemorySink()
    states = StateStore(tmp_path / ".dpone" / "state")

    def competing_writer(point: str) -> None:
        # Another writer moves the state while the run publishes its evidence: the run's
        # own state write (expected revision 0) must be refused.
        if point == "after_evidence":
            commit_state(
                plan,
                states,
                identity=RunIdentity(
                    plan.name, "intruder", "intruder-load", "2026-01-01T00:00:00Z"
                ),
                expected_revision=0,
                cursor_to=None,
                unplaced=None,
                clock=FrozenClock(),
            )

    monkeypatch.setattr(dpone.faults, "_hook", competing_writer)
    with pytest.raises(Exception, match="DPONE_STATE_CONFLICT") as caught:
        run_plan(plan, source=MemorySource(_rows(3)), sink=sink)
    monkeypatch.setattr(dpone.faults, "_hook", None)

    assert getattr(caught.value, "code", None) == "DPONE_STATE_CONFLICT"
    # The sink committed before the state write: the load is there, once.
    assert len(sink.loads) == 1
    committed = sink.loads[0].marker
    assert sink.table is not None
    assert sink.table.num_rows == 3
    state = states.read(NAME)
    assert (state.revision, state.last_load_id) == (1, "intruder-load")
    assert _journal_phase(plan) == "running"  # what the next run finishes

    report = run_plan(plan, source=MemorySource(_rows(3)), sink=sink)

    assert report.status == "succeeded"
    assert [(r.run_id, r.action) for r in report.recovered] == [(committed.run_id, "finished")]
    # The dead run's load advanced the state (revision 2), then this run's (revision 3).
    assert report.state.revision == 3
    assert states.read(NAME).last_load_id == report.load_id


def _handled() -> Iterator[None]:
    """SIGINT handled from Python during the test (the run's watch replaces only such
    handlers), restored afterwards."""
    saved = signal.getsignal(signal.SIGINT)

    def fallback(signum: int, frame: FrameType | None) -> None:
        raise AssertionError("the run's watch did not take the signal")

    signal.signal(signal.SIGINT, fallback)
    yield
    signal.signal(signal.SIGINT, saved)


handled = pytest.fixture(_handled)


@pytest.mark.usefixtures("handled")
def test_an_interrupt_stops_at_the_next_chunk_and_commits_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = _manifest(tmp_path)
    sink = MemorySink()
    source = MemorySource(_rows(8, bad=(1,)))

    def ctrl_c(point: str) -> None:
        if point == "after_chunk_staged" and source.chunks_read == 2:
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(dpone.faults, "_hook", ctrl_c)
    report = run_pipeline(plan, RunOptions(source=source, sink=sink, watch_signals=True))

    _assert_rolled_back(tmp_path, plan, report, sink, code="DPONE_INTERRUPTED", exit_code=130)
    assert report.rows.read == 4  # stopped after the second chunk, the rest never read
    assert _state_bytes(tmp_path) is None
    _assert_dlq_aborted(plan, report, records=1)
    handler = signal.getsignal(signal.SIGINT)
    assert callable(handler)
    assert handler.__name__ == "fallback"  # the watch let go


def test_a_keyboard_interrupt_inside_the_source_commits_nothing(tmp_path: Path) -> None:
    plan = _manifest(tmp_path)
    sink = MemorySink()
    source = MemorySource(_rows(6, bad=(2,)), fail_at=2, error=KeyboardInterrupt())

    report = run_plan(plan, source=source, sink=sink)

    _assert_rolled_back(tmp_path, plan, report, sink, code="DPONE_INTERRUPTED", exit_code=130)
    _assert_dlq_aborted(plan, report, records=1)
