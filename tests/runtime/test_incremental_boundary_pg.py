"""The boundary on a database source (SPEC §6): a PostgreSQL table read with the pushdown
``cursor >= committed - lag`` (and ``< end_value``), into DuckDB and into PostgreSQL, through
the CLI. The boundary rows come back from the server and are de-duplicated by the run."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.postgres import pg_query
from tests.support.project import PG_ENV, Project, make_project

DAY1, DAY2, DAY3 = "2026-01-01 00:00:00+00", "2026-01-02 00:00:00+00", "2026-01-03 00:00:00+00"
LATE = "2026-01-01 12:00:00+00"


def insert(url: str, schema: str, rows: list[tuple[int, str]]) -> None:
    values = ", ".join(f"({i}, 'n{i}', 10.00, '{at}', true)" for i, at in rows)
    pg_query(url, f'INSERT INTO "{schema}".src VALUES {values}')


def pg_source_project(
    project: Project, url: str, schema: str, incremental: dict[str, Any]
) -> Project:
    """``project`` reading ``"<schema>".src`` of PostgreSQL instead of its CSV files."""
    pg_query(
        url,
        f'CREATE SCHEMA IF NOT EXISTS "{schema}"; CREATE TABLE "{schema}".src (id bigint, '
        "name text, amount numeric(10,2), updated_at timestamptz, active boolean)",
    )
    path = project.write_manifest(enforcement="strict", incremental=True)
    doc = json.loads(path.read_text())
    doc["source"] = {
        "type": "postgres",
        "connection": "${" + PG_ENV + "}",
        "table": f"{schema}.src",
        "incremental": {"cursor_column": "updated_at", **incremental},
    }
    path.write_text(json.dumps(doc))
    project.env[PG_ENV] = url
    return project


@pytest.mark.postgres
@pytest.mark.parametrize("sink", ["duckdb", "postgres"])
def test_the_boundary_of_a_postgres_source_loads_once(
    request: pytest.FixtureRequest, tmp_path: Any, pg_url: str, pg_schema: str, sink: str
) -> None:
    project = make_project(request, tmp_path, sink)
    source_schema = f"{pg_schema}_src" if sink == "postgres" else pg_schema
    request.addfinalizer(
        lambda: pg_query(pg_url, f'DROP SCHEMA IF EXISTS "{source_schema}" CASCADE')
    )
    pg_source_project(project, pg_url, source_schema, {})
    insert(pg_url, source_schema, [(1, DAY1), (2, DAY2)])
    first = project.run()
    assert first["exit_code"] == 0, first["error"]

    # A new row exactly at the committed cursor, and a late one (older than the window: the
    # server never returns it, the pushdown's lower bound is the committed cursor).
    insert(pg_url, source_schema, [(3, DAY2), (4, LATE)])
    second = project.run()

    assert second["exit_code"] == 0, second["error"]
    assert (second["rows"]["read"], second["rows"]["loaded"], second["rows"]["skipped"]) == (
        2,
        1,
        1,
    )
    assert [r[0] for r in project.rows() or []] == [1, 2, 3]

    # A rerun loads nothing twice.
    third = project.run()
    assert (third["rows"]["loaded"], third["rows"]["skipped"]) == (0, 2)
    assert [r[0] for r in project.rows() or []] == [1, 2, 3]


@pytest.mark.postgres
def test_a_postgres_source_with_lag_and_end_value(
    request: pytest.FixtureRequest, tmp_path: Any, pg_url: str, pg_schema: str
) -> None:
    project = make_project(request, tmp_path, "duckdb")
    pg_source_project(project, pg_url, pg_schema, {"lag": 86400, "end_value": DAY3})
    insert(pg_url, pg_schema, [(1, DAY1), (2, DAY2), (5, DAY3)])
    first = project.run()
    assert (first["rows"]["read"], first["rows"]["loaded"]) == (2, 2)  # end_value: exclusive
    assert project.state()["cursor"]["value"] == "2026-01-02T00:00:00.000000Z"

    insert(pg_url, pg_schema, [(4, LATE)])
    second = project.run()

    # The pushdown reads from the cursor minus a day: rows 1 and 2 come back (boundary rows,
    # de-duplicated) with the late row 4, which loads; row 5 stays beyond end_value.
    assert (second["rows"]["read"], second["rows"]["loaded"], second["rows"]["skipped"]) == (
        3,
        1,
        2,
    )
    assert [r[0] for r in project.rows() or []] == [1, 2, 4]
    assert project.state()["cursor"]["value"] == "2026-01-02T00:00:00.000000Z"
