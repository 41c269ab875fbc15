"""Database errors of the SQL sinks, provoked for real and seen through ``dpone run``: each
names the database's error class or SQLSTATE, the operation and the quoted names, carries a
concrete fix, and never a row value."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.postgres import PG_URL, pg_query, pg_url  # noqa: F401 (fixture)

from .sqlproject import SqlProject, hold_duckdb_file

#: A value that only the failing run carries (the key and amount columns are typed).
SECRET_AMOUNT = "777.77"


def _failed(project: SqlProject, exit_code: int = 1) -> dict[str, Any]:
    run = project.run()
    assert run.exit_code == exit_code, run.stdout
    assert SECRET_AMOUNT not in run.stdout
    assert SECRET_AMOUNT not in run.stderr
    doc = run.doc
    error: dict[str, Any] = doc.get("error", doc)  # a run report, or the error before one
    assert error["fixes"]
    assert all(error["fixes"])
    return error


@pytest.fixture
def pg_project(pg_url: str, tmp_path: Path) -> Iterator[SqlProject]:  # noqa: F811
    dataset = f"Err {uuid.uuid4().hex[:8]}"
    project = SqlProject(tmp_path, "postgres", dataset, "Order Lines", "Id", "unit price")
    yield project
    project.drop_dataset()


@pytest.fixture
def duck_project(tmp_path: Path) -> SqlProject:
    return SqlProject(
        tmp_path, "duckdb", "sales", "Order Lines", "Id", "unit price", database="sales.duckdb"
    )


def _first_run(project: SqlProject) -> None:
    project.write_manifest()
    project.write_csv([project.key, project.value], [["1", "1.00"]])
    assert project.run().exit_code == 0


def _repeat_key(project: SqlProject) -> None:
    project.write_csv([project.key, project.value], [["1", SECRET_AMOUNT]])


@pytest.mark.postgres
def test_postgres_unique_violation_names_the_state_operation_and_table(
    pg_project: SqlProject,
) -> None:
    p = pg_project
    _first_run(p)
    pg_query(PG_URL, f'CREATE UNIQUE INDEX ON {_q(p.dataset, p.table)} ("Id")')
    _repeat_key(p)
    error = _failed(p)
    assert error["code"] == "DPONE_SINK_CONSTRAINT_VIOLATION"
    message = error["message"]
    assert "SQLSTATE 23505 unique violation" in message
    assert f"inserting the staged rows into {_q(p.dataset, p.table)}" in message
    assert "merge" in error["fixes"][0]


@pytest.mark.postgres
def test_postgres_role_without_privileges_is_permission_denied(
    pg_project: SqlProject,
) -> None:
    role = f"dpone_noperm_{uuid.uuid4().hex[:8]}"
    pg_query(PG_URL, f'CREATE ROLE "{role}" LOGIN')
    try:
        p = pg_project
        p.url = PG_URL.replace("postgres@", f"{role}@")
        p.write_manifest()
        p.write_csv([p.key, p.value], [["1", SECRET_AMOUNT]])
        error = _failed(p)
    finally:
        pg_query(PG_URL, f'DROP ROLE IF EXISTS "{role}"')
    assert error["code"] == "DPONE_SINK_PERMISSION_DENIED"
    assert "SQLSTATE 42501 insufficient privilege" in error["message"]
    assert f"creating the schema {_q(p.dataset)}" in error["message"]
    assert "GRANT" in error["fixes"][0]


@pytest.mark.postgres
def test_postgres_value_out_of_the_columns_range_is_a_data_exception(
    pg_project: SqlProject,
) -> None:
    p = pg_project
    _first_run(p)
    # Narrowed outside dpone: the load's decimal(10,2) no longer fits.
    pg_query(
        PG_URL, f'ALTER TABLE {_q(p.dataset, p.table)} ALTER COLUMN "unit price" TYPE numeric(3,1)'
    )
    p.write_csv([p.key, p.value], [["2", SECRET_AMOUNT]])
    error = _failed(p)
    assert error["code"] == "DPONE_SINK_SCHEMA_MISMATCH"
    assert "SQLSTATE 22003 data exception" in error["message"]
    assert f"inserting the staged rows into {_q(p.dataset, p.table)}" in error["message"]


def test_duckdb_value_out_of_the_columns_range_is_a_conversion_error(
    duck_project: SqlProject,
) -> None:
    p = duck_project
    _first_run(p)
    target = _q("sales", p.dataset, p.table)
    p.execute(f'ALTER TABLE {target} ALTER COLUMN "unit price" TYPE DECIMAL(3,1)')
    p.write_csv([p.key, p.value], [["2", SECRET_AMOUNT]])
    error = _failed(p)
    assert error["code"] == "DPONE_SINK_SCHEMA_MISMATCH"
    assert "(ConversionException)" in error["message"]
    assert f"inserting the staged rows into {target}" in error["message"]


def test_duckdb_unique_violation_names_the_class_operation_and_table(
    duck_project: SqlProject,
) -> None:
    p = duck_project
    _first_run(p)
    p.execute(f'CREATE UNIQUE INDEX one_id ON {_q("sales", p.dataset, p.table)} ("Id")')
    _repeat_key(p)
    error = _failed(p)
    assert error["code"] == "DPONE_SINK_CONSTRAINT_VIOLATION"
    message = error["message"]
    assert "(ConstraintException)" in message
    assert f"inserting the staged rows into {_q('sales', p.dataset, p.table)}" in message
    assert "merge" in error["fixes"][0]


def test_duckdb_file_held_by_another_process_is_locked(duck_project: SqlProject) -> None:
    p = duck_project
    _first_run(p)
    with hold_duckdb_file(p.root / "project" / p.database):
        p.write_csv([p.key, p.value], [["2", SECRET_AMOUNT]])
        error = _failed(p)
    assert error["code"] == "DPONE_SINK_LOCKED"
    assert "(IOException)" in error["message"]
    assert "another process holds the database file" in error["message"]
    assert "one writing process" in error["fixes"][0]


def _q(*parts: str) -> str:
    return ".".join('"' + part.replace('"', '""') + '"' for part in parts)
