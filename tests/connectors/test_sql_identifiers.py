"""Any name the database accepts works end to end through ``dpone run``: a DuckDB file named
like its dataset, reserved words, mixed case, spaces and non-ASCII names, on DuckDB and
PostgreSQL. Each case creates the table, then appends or merges with an added column, reads
the rows back with quoted names, and still quarantines a bad row into the DLQ."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner

from dpone.cli.main import cli
from dpone.connectors.sql.identifiers import qualify, quote_ident
from tests.support import dlqfiles
from tests.support.postgres import pg_url  # noqa: F401 (fixture)

from .sqlproject import CANARY, SqlProject


@dataclass(frozen=True)
class Names:
    id: str
    dataset: str
    table: str
    key: str
    value: str
    added: str  # a column the second run brings (ADD COLUMN)
    mode: str
    database: str = "warehouse.duckdb"


CASES = [
    Names("file-named-like-dataset", "acc", "t", "id", "amount", "note", "append", "acc.duckdb"),
    Names("reserved-words", "order", "select", "group", "from", "where", "merge"),
    Names("mixed-case", "Sales", "MyTable", "Id", "Amount", "Note", "merge", "Sales.duckdb"),
    Names("spaces", "my data", "my table", "line id", "unit price", "unit note", "append"),
    Names("non-ascii", "données", "café", "nº", "größe", "überschrift", "merge", "café.duckdb"),
]


@pytest.fixture(params=["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)])
def kind(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    if value == "postgres":
        request.getfixturevalue("pg_url")
    return value


@pytest.fixture(params=CASES, ids=[c.id for c in CASES])
def project(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> Iterator[SqlProject]:
    names: Names = request.param
    p = SqlProject(
        tmp_path, kind, names.dataset, names.table, names.key, names.value, names.database
    )
    p.drop_dataset()
    yield p
    p.drop_dataset()


def _case(project: SqlProject) -> Names:
    return next(c for c in CASES if (c.dataset, c.table) == (project.dataset, project.table))


def test_names_work_through_two_runs(project: SqlProject) -> None:
    names = _case(project)
    key, value = names.key, names.value
    unique_key = [key] if names.mode == "merge" else []
    project.write_manifest(mode=names.mode, unique_key=unique_key)

    project.write_csv([key, value], [["1", "1.50"], ["2", "bad" + CANARY], ["3", "2.00"]])
    first = project.run()
    assert first.exit_code == 0, first.stdout
    doc = first.doc
    assert doc["status"] == "succeeded"
    assert doc["rows"]["loaded"] == 2
    assert doc["rows"]["quarantined"] == 1
    assert project.select([key, value]) == [(1, Decimal("1.50")), (3, Decimal("2.00"))]
    records = dlqfiles.records_on_disk(project.dlq_root, doc["run_id"])
    assert len(records) == 1

    project.write_csv(
        [key, value, names.added],
        [["3", "3.00", "x"], ["4", "bad" + CANARY, "y"], ["5", "5.00", "z"]],
    )
    second = project.run()
    assert second.exit_code == 0, second.stdout
    doc = second.doc
    assert doc["rows"]["loaded"] == 2
    assert doc["rows"]["quarantined"] == 1
    assert len(dlqfiles.records_on_disk(project.dlq_root, doc["run_id"])) == 1
    rows = project.select([key, value, names.added])
    if names.mode == "merge":
        assert rows == [
            (1, Decimal("1.50"), None),
            (3, Decimal("3.00"), "x"),
            (5, Decimal("5.00"), "z"),
        ]
    else:
        assert rows == [
            (1, Decimal("1.50"), None),
            (3, Decimal("2.00"), None),
            (3, Decimal("3.00"), "x"),
            (5, Decimal("5.00"), "z"),
        ]


def test_quoting_doubles_quotes_and_keeps_every_part_exact() -> None:
    assert qualify("acc", 'my "odd" table') == '"acc"."my ""odd"" table"'
    assert quote_ident("größe") == '"größe"'


@pytest.mark.parametrize(
    ("sink", "ok"),
    [
        ({"type": "duckdb", "table": "my table"}, True),
        ({"type": "filesystem", "path": "lake", "table": "my table"}, False),
        ({"type": "filesystem", "path": "lake", "dataset": "café", "table": "t"}, False),
        ({"type": "duckdb", "table": "tab\there"}, False),
        ({"type": "duckdb", "table": "_dpone_loads"}, False),
    ],
)
def test_validate_takes_database_names_and_folder_safe_filesystem_names(
    tmp_path: Path, sink: dict[str, str], ok: bool
) -> None:
    doc = {
        "name": "names_check",
        "source": {"type": "file", "format": "csv", "path": "data/*.csv"},
        "sink": sink,
    }
    path = tmp_path / "manifest.yaml"
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    result = CliRunner().invoke(cli, ["validate", str(path), "--format", "json"])
    assert result.exit_code == (0 if ok else 2), result.stdout
