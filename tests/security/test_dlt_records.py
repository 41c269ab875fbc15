"""The dlt sink's package records are input: a record planted in (or moved into) the work
dir's ``dlt/<pipeline>/dropped/`` makes recovery abandon a load, which deletes the rows of its
dlt load id. Recovery must act only on this sink's table and on loads that neither the
destination's ``_dlt_loads`` nor the record under ``packages/`` show as committed: the attacks
below delete no row, log a typed warning, and a later honest run works."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest

from dpone.canonical import with_checksum
from tests import dltkit
from tests.support.processes import dpone_subprocess
from tests.support.project import DATASET, Project, good, loaded, make_project

VICTIM_LOAD_ID = "1700000000.123456"


def _first_load(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Project, str]:
    project = make_project(request, tmp_path, "dlt_duckdb")
    project.write_csv("a.csv", [good(i) for i in range(1, 8)])
    project.write_manifest(enforcement="strict", incremental=True)
    report = project.run()
    assert report["exit_code"] == 0, report
    assert len(project.rows() or []) == 7
    return project, str(report["load_id"])


def _records(project: Project, folder: str) -> Path:
    return dltkit.sink_root(project.work_dir, project.name) / folder


def _refusals(stderr: str) -> list[dict[str, Any]]:
    events = []
    for line in stderr.splitlines():
        if "sink.dlt_record_refused" in line:
            events.append(json.loads(line))
    return events


def _second_run(project: Project) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    project.write_csv("b.csv", [good(8)])
    result = project.cli()
    assert result.exit_code == 0, result.stdout + result.stderr
    return result.doc, _refusals(result.stderr)


def test_a_committed_loads_record_moved_to_dropped_deletes_no_row(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    project, load_id = _first_load(request, tmp_path)
    record = _records(project, "packages") / f"{load_id}.json"
    dropped = _records(project, "dropped")
    dropped.mkdir(parents=True, exist_ok=True)
    shutil.move(record, dropped / record.name)

    report, refusals = _second_run(project)

    assert project.rows() == [loaded(i) for i in range(1, 9)]
    assert [(e["code"], e["load_id"]) for e in refusals] == [("DPONE_SINK_MARKER_INVALID", load_id)]
    assert "committed" in refusals[0]["reason"]
    assert (dropped / record.name).exists()  # left for the operator, as the fix says
    assert report["recovered"] == []


def test_a_record_copied_to_dropped_while_its_package_record_stays_deletes_no_row(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    project, load_id = _first_load(request, tmp_path)
    record = _records(project, "packages") / f"{load_id}.json"
    dropped = _records(project, "dropped")
    dropped.mkdir(parents=True, exist_ok=True)
    shutil.copy(record, dropped / record.name)

    _, refusals = _second_run(project)

    assert project.rows() == [loaded(i) for i in range(1, 9)]
    assert [e["reason"] for e in refusals] == ["its load is recorded under packages/"]


def test_a_planted_record_naming_another_table_deletes_none_of_its_rows(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Another table of the dataset, loaded by someone else (its rows carry a dlt load id
    this pipeline's ``_dlt_loads`` never saw): a record with ``"table": "victim"`` and that
    load id, checksum recomputed, must not empty it."""
    project, load_id = _first_load(request, tmp_path)
    warehouse = tmp_path / project.sink["credentials"]
    with duckdb.connect(str(warehouse)) as con:
        con.execute(
            f'CREATE TABLE "{DATASET}".victim AS SELECT range AS id, '
            f"'{VICTIM_LOAD_ID}' AS _dlt_load_id FROM range(5)"
        )
    doc = orjson.loads((_records(project, "packages") / f"{load_id}.json").read_bytes())
    doc.pop("sha256")
    planted = {**doc, "load_id": "planted", "dlt_load_id": VICTIM_LOAD_ID, "table": "victim"}
    dropped = _records(project, "dropped")
    dropped.mkdir(parents=True, exist_ok=True)
    (dropped / "planted.json").write_bytes(orjson.dumps(with_checksum(planted)))

    _, refusals = _second_run(project)

    with duckdb.connect(str(warehouse), read_only=True) as con:
        assert con.sql(f'SELECT count(*) FROM "{DATASET}".victim').fetchall() == [(5,)]
    assert project.rows() == [loaded(i) for i in range(1, 9)]
    assert [(e["load_id"], e["reason"]) for e in refusals] == [
        ("planted", "it names another table")
    ]

    # The operator moves the planted file out, as the warning's fix says: runs are quiet again.
    (dropped / "planted.json").unlink()
    project.write_csv("c.csv", [good(9)])
    again = project.cli()
    assert again.exit_code == 0, again.stdout
    assert _refusals(again.stderr) == []
    assert project.rows() == [loaded(i) for i in range(1, 10)]


def test_a_pending_packages_record_naming_another_table_is_refused(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Recovery finishes a recorded package by first deleting what a half-done job of the
    record's table may have left: a record edited to name another table is refused before."""
    project = make_project(request, tmp_path, "dlt_duckdb")
    project.write_csv("a.csv", [good(1), good(2)])
    project.write_manifest(enforcement="strict", incremental=True)
    killed = dpone_subprocess(
        ["run", str(project.manifest_path), "--run-id", "killed", "--format", "json"],
        cwd=project.root,
        env=project.env,
        fault="dlt_before_load",
    )
    assert killed.returncode < 0, killed.stderr
    (record,) = _records(project, "packages").glob("*.json")
    honest = record.read_bytes()
    doc = orjson.loads(honest)
    doc.pop("sha256")
    record.write_bytes(orjson.dumps(with_checksum({**doc, "table": "victim"})))

    refused = project.cli()

    assert refused.exit_code == 1
    assert refused.doc["code"] == "DPONE_SINK_MARKER_INVALID"
    assert "names another table" in refused.doc["message"]
    assert project.rows() is None

    record.write_bytes(honest)  # the backup the fix points to
    again = project.run()
    assert again["exit_code"] == 0
    assert project.rows() == [loaded(1), loaded(2)]
