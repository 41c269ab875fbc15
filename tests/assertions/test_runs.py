"""Every built-in assertion against real DuckDB runs: pass, fail, quarantine, warn, precedence."""

from __future__ import annotations

from typing import Any

from tests.support.project import Project, good, loaded

ALL_PASS: dict[str, Any] = {
    "min_rows_per_load": 1,
    "max_rows_per_load": 10,
    "required_columns": ["id", "name"],
    "unique_columns": ["id"],
}


def verdicts(project: Project, report: dict[str, Any]) -> dict[str, tuple[str, int]]:
    evidence = project.evidence(report["run_id"])
    return {a["name"]: (a["verdict"], a["failed_rows"]) for a in evidence["assertions"]}


def test_all_builtins_pass(project: Project) -> None:
    project.write_csv("a.csv", [good(1), good(2), good(3)])
    project.write_manifest(assertions=ALL_PASS)
    report = project.run()
    assert report["status"] == "succeeded"
    assert report["data_outcome"] == "passed"
    assert verdicts(project, report) == {
        "min_rows_per_load": ("passed", 0),
        "max_rows_per_load": ("passed", 0),
        "required_columns": ("passed", 0),
        "unique_columns": ("passed", 0),
    }
    assert project.rows() == [loaded(1), loaded(2), loaded(3)]


def test_row_failure_under_fail_aborts_before_the_sink(project: Project) -> None:
    project.write_csv("a.csv", [good(1), good(2), good(1, name="again")])
    project.write_manifest(assertions={"unique_columns": ["id"]})
    report = project.run()
    assert report["exit_code"] == 1
    assert report["error"]["code"] == "DPONE_ASSERTION_FAILED"
    assert report["data_outcome"] == "failed_quality_gate"
    assert project.rows() is None
    assert project.state_bytes() is None


def test_batch_failure_with_incremental_cursor_loses_no_row(project: Project) -> None:
    project.write_csv("a.csv", [good(1), good(2)])
    project.write_manifest(incremental=True, assertions={"max_rows_per_load": 2})
    first = project.run()
    assert first["status"] == "succeeded"
    state_before = project.state_bytes()

    # A window of three new rows breaks max_rows_per_load: nothing of it loads and the
    # cursor stays where it was.
    project.write_csv("b.csv", [good(3), good(4), good(5)])
    failed = project.run()
    assert failed["exit_code"] == 1
    assert failed["error"]["code"] == "DPONE_ASSERTION_FAILED"
    assert project.state_bytes() == state_before
    assert project.rows() == [loaded(1), loaded(2)]

    # After the limit is raised the next run loads every row of the failed window.
    project.write_manifest(incremental=True, assertions={"max_rows_per_load": 10})
    rerun = project.run()
    assert rerun["rows"]["loaded"] == 3
    assert project.rows() == [loaded(i) for i in range(1, 6)]
    assert project.state()["cursor"]["value"] == "2026-01-05T10:00:00.000000Z"


def test_min_rows_failure_is_a_batch_verdict(project: Project) -> None:
    project.write_csv("a.csv", [good(1)])
    project.write_manifest(assertions={"min_rows_per_load": 2})
    report = project.run()
    assert report["exit_code"] == 1
    assert verdicts(project, report)["min_rows_per_load"] == ("failed", 0)
    assert project.rows() is None


def test_quarantine_sends_duplicates_to_the_dlq_with_the_rule_id(project: Project) -> None:
    project.write_csv("a.csv", [good(1), good(2), good(1, name="dup"), good(3)])
    project.write_manifest(
        assertions={"unique_columns": {"value": ["id"], "on_failure": "quarantine"}}
    )
    report = project.run()
    assert report["data_outcome"] == "passed_with_quarantine"
    assert report["rows"] == {**report["rows"], "loaded": 3, "quarantined": 1}
    (record,) = project.dlq_records(report["run_id"])
    assert record["reason"]["code"] == "quality.rule_failed"
    assert record["diagnostics"]["rule_id"] == "unique_columns"
    assert record["record_ref"] == project.file_ref("a.csv", 3)
    assert project.rows() == [loaded(1), loaded(2), loaded(3)]


def test_warn_loads_every_row_and_counts(project: Project) -> None:
    project.write_csv("a.csv", [good(1), good(1, name="dup"), good(2)])
    project.write_manifest(assertions={"unique_columns": {"value": ["id"], "on_failure": "warn"}})
    report = project.run()
    assert report["status"] == "succeeded"
    assert report["data_outcome"] == "passed_with_warnings"
    assert report["rows"]["loaded"] == 3
    assert verdicts(project, report)["unique_columns"] == ("warned", 1)


def test_precedence_default_pipeline_and_assertion_levels(project: Project) -> None:
    rows = [good(1), good(1, name="dup"), good(2)]
    project.write_csv("a.csv", rows)

    # Default: fail.
    project.write_manifest(assertions={"unique_columns": ["id"]})
    assert project.run()["error"]["code"] == "DPONE_ASSERTION_FAILED"

    # Pipeline level: warn.
    project.write_manifest(assertions={"on_failure": "warn", "unique_columns": ["id"]})
    warned = project.run()
    assert verdicts(project, warned)["unique_columns"] == ("warned", 1)

    # Assertion level beats pipeline level: quarantine.
    project.write_csv("b.csv", [good(7), good(7, name="dup")])
    project.write_manifest(
        assertions={
            "on_failure": "warn",
            "unique_columns": {"value": ["id"], "on_failure": "quarantine"},
        }
    )
    quarantined = project.run()
    assert verdicts(project, quarantined)["unique_columns"][0] == "quarantined"


def test_custom_predicates_row_and_vectorized(project: Project) -> None:
    (project.root / "rules.py").write_text(
        "import pyarrow.compute as pc\n"
        "def positive(row):\n    return row['id'] > 1\n"
        "def even(batch):\n    return pc.equal(pc.bit_wise_and(batch.column('id'), 1), 0)\n"
    )
    project.write_csv("a.csv", [good(1), good(2), good(3), good(4)])
    project.write_manifest(
        assertions={
            "custom": [
                {"predicate": "rules:positive", "on_failure": "quarantine"},
                {"predicate": "rules:even", "vectorized": True, "on_failure": "warn"},
            ]
        }
    )
    report = project.run()
    assert report["rows"]["quarantined"] == 1
    assert project.rows() == [loaded(2), loaded(3), loaded(4)]
    found = verdicts(project, report)
    assert found["custom:rules:positive"] == ("quarantined", 1)
    # Row 1 went to the DLQ under `positive`: `even` sees rows 2..4 only (SPEC §4).
    assert found["custom:rules:even"] == ("warned", 1)


def test_contract_and_rule_rejects_of_a_windowed_chunk_name_their_own_rows(
    project: Project,
) -> None:
    """An incremental window drops rows from the middle of a chunk: a row the contract
    rejects and a row a rule quarantines still name their line of the file."""
    project.write_csv("a.csv", [good(1), good(2)])
    assertions = {"unique_columns": {"value": ["id"], "on_failure": "quarantine"}}
    project.write_manifest(incremental=True, assertions=assertions)
    assert project.run()["rows"]["loaded"] == 2

    rows = [good(3), good(9, day=1), good(4, amount="ten"), good(3, name="dup"), good(5)]
    project.write_csv("b.csv", rows)
    report = project.run()
    assert report["rows"] == {**report["rows"], "loaded": 2, "quarantined": 2}
    contract, rule = project.dlq_records(report["run_id"])
    assert contract["record_ref"] == project.file_ref("b.csv", 3)
    assert contract["reason"]["code"] != "quality.rule_failed"
    assert contract["diagnostics"]["source_offset"] == 3
    assert rule["record_ref"] == project.file_ref("b.csv", 4)
    assert rule["reason"]["code"] == "quality.rule_failed"
    assert rule["diagnostics"]["rule_id"] == "unique_columns"
    assert rule["diagnostics"]["source_offset"] == 4
    assert project.rows() == [loaded(i) for i in range(1, 6) if i != 4]
