"""``required_columns`` per row for sources with keys (SPEC §4: key presence, not non-null).

A JSONL line or a Python dict without a key fails that row under the assertion's policy; a
key carrying null passes. Real CLI runs against DuckDB files and PostgreSQL schemas.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.project import Project, loaded, make_project, ts

SINKS = ["duckdb", "postgres"]
JSONL_SOURCE = {"type": "file", "format": "jsonl", "path": "data/*.jsonl"}
PYTHON_SOURCE = {"type": "python", "callable": "rows:produce"}


@pytest.fixture(params=SINKS)
def project(request: pytest.FixtureRequest, tmp_path: Path) -> Project:
    return make_project(request, tmp_path, request.param)


def row(i: int, **changes: Any) -> dict[str, Any]:
    """A JSON object every mode accepts (``loaded(i)`` once in the sink)."""
    doc: dict[str, Any] = {
        "id": i,
        "name": f"n{i}",
        "amount": "10.00",
        "updated_at": ts(i),
        "active": bool(i % 2),
    }
    doc.update(changes)
    return doc


def nameless(i: int) -> tuple[Any, ...]:
    """``loaded(i)`` with a NULL name."""
    return (i, None, *loaded(i)[2:])


def without(doc: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k != key}


def write_jsonl(project: Project, rows: list[dict[str, Any]]) -> None:
    path = project.root / "data" / "a.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def required(policy: str) -> dict[str, Any]:
    return {"required_columns": {"value": ["id", "name"], "on_failure": policy}}


def verdict(project: Project, report: dict[str, Any]) -> tuple[str, int]:
    (found,) = project.evidence(report["run_id"])["assertions"]
    return found["verdict"], found["failed_rows"]


def test_a_jsonl_line_without_the_key_fails_the_run(project: Project) -> None:
    write_jsonl(project, [row(1), row(2), without(row(3), "name"), row(4)])
    project.write_manifest(enforcement="strict", source=JSONL_SOURCE, assertions=required("fail"))

    report = project.run()

    assert report["exit_code"] == 1
    assert report["error"]["code"] == "DPONE_ASSERTION_FAILED"
    assert report["data_outcome"] == "failed_quality_gate"
    assert project.rows() is None
    assert project.state_bytes() is None


def test_a_jsonl_line_without_the_key_is_quarantined(project: Project) -> None:
    write_jsonl(project, [row(1), row(2), without(row(3), "name"), row(4)])
    project.write_manifest(
        enforcement="quarantine", source=JSONL_SOURCE, assertions=required("quarantine")
    )

    report = project.run()

    assert report["exit_code"] == 0
    assert report["data_outcome"] == "passed_with_quarantine"
    assert report["rows"]["loaded"] == 3
    assert report["rows"]["quarantined"] == 1
    assert project.rows() == [loaded(1), loaded(2), loaded(4)]
    (record,) = project.dlq_records(report["run_id"])
    assert record["reason"]["code"] == "quality.rule_failed"
    assert record["diagnostics"]["rule_id"] == "required_columns"
    assert record["record_ref"].startswith("dpone://file/data/a.jsonl?")
    assert record["record_ref"].endswith("&row=3")
    assert verdict(project, report) == ("quarantined", 1)
    project.check_artifacts()


def test_a_jsonl_line_without_the_key_is_warned_and_loads(project: Project) -> None:
    write_jsonl(project, [row(1), without(row(2), "name"), row(3)])
    project.write_manifest(enforcement="strict", source=JSONL_SOURCE, assertions=required("warn"))

    report = project.run()

    assert report["exit_code"] == 0
    assert report["data_outcome"] == "passed_with_warnings"
    assert report["rows"]["loaded"] == 3
    assert report["rows"]["warned"] == 1
    assert project.rows() == [loaded(1), nameless(2), loaded(3)]
    assert verdict(project, report) == ("warned", 1)


def test_a_jsonl_key_carrying_null_passes(project: Project) -> None:
    write_jsonl(project, [row(1), row(2, name=None), row(3)])
    project.write_manifest(enforcement="strict", source=JSONL_SOURCE, assertions=required("fail"))

    report = project.run()

    assert report["exit_code"] == 0
    assert report["data_outcome"] == "passed"
    assert project.rows() == [loaded(1), nameless(2), loaded(3)]
    assert verdict(project, report) == ("passed", 0)


def test_a_missing_key_fails_only_its_own_row_across_chunks(project: Project) -> None:
    # Chunks of two lines: the key is absent from one line of the second chunk only.
    write_jsonl(project, [row(1), row(2), row(3), without(row(4), "name"), row(5)])
    project.write_manifest(
        enforcement="quarantine",
        source=JSONL_SOURCE,
        assertions=required("quarantine"),
        chunk_size=2,
    )

    report = project.run()

    assert report["rows"]["quarantined"] == 1
    assert project.rows() == [loaded(i) for i in (1, 2, 3, 5)]
    (record,) = project.dlq_records(report["run_id"])
    assert record["record_ref"].endswith("&row=4")


def test_a_python_row_without_the_key_fails_that_row(project: Project) -> None:
    rows = [row(1), without(row(2), "name"), row(3, name=None)]
    (project.root / "rows.py").write_text(
        f"ROWS = {rows!r}\n\ndef produce():\n    yield from ROWS\n", encoding="utf-8"
    )
    project.write_manifest(
        enforcement="quarantine", source=PYTHON_SOURCE, assertions=required("quarantine")
    )

    report = project.run()

    assert report["exit_code"] == 0
    assert report["rows"]["loaded"] == 2
    assert project.rows() == [loaded(1), nameless(3)]
    (record,) = project.dlq_records(report["run_id"])
    assert record["reason"]["code"] == "quality.rule_failed"
    assert record["record_ref"].endswith("/rows/2")


def test_a_python_key_only_in_later_rows_is_loaded(project: Project) -> None:
    # Arrow's from_pylist keeps the first dict's keys only; every key of every row loads.
    rows = [without(row(1), "name"), row(2)]
    (project.root / "rows.py").write_text(
        f"ROWS = {rows!r}\n\ndef produce():\n    yield from ROWS\n", encoding="utf-8"
    )
    project.write_manifest(enforcement="strict", source=PYTHON_SOURCE)

    report = project.run()

    assert report["exit_code"] == 0
    assert project.rows() == [nameless(1), loaded(2)]


def test_a_csv_column_missing_from_the_file_still_fails(project: Project) -> None:
    path = project.root / "data" / "a.csv"
    path.parent.mkdir(parents=True)
    path.write_text(f"id,amount,updated_at,active\n1,10.00,{ts(1)},true\n", encoding="utf-8")
    project.write_manifest(enforcement="strict", assertions=required("fail"))

    report = project.run()

    assert report["exit_code"] == 1
    assert report["error"]["code"] == "DPONE_ASSERTION_FAILED"
