"""Column names through the CLI, as users met them: R's empty first header, a header-only file,
names that differ only in letter case, an undeclared column under freeze, a file without its
header row. Each runs ``python -m dpone`` as a process against a real DuckDB file, a real
PostgreSQL schema or Parquet files, and reads the outcome back independently of dpone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.dataset as pads
import pytest

from tests.support.postgres import pg_query
from tests.support.processes import CliRun, dpone_subprocess

R_CSV = '"","x","y"\n"1",10,"a"\n"2",20,"b"\n'


class Project:
    """A folder with ``manifest.yaml`` and ``d.csv``; runs dpone in it as a process."""

    def __init__(self, root: Path, sink: str, pg_url: str = "", pg_schema: str = "") -> None:
        self.root = root
        self.sink = sink
        self.pg_url = pg_url
        self.pg_schema = pg_schema

    def write(self, csv: str, contract: str = "{enforcement: quarantine}", **extra: str) -> None:
        (self.root / "d.csv").write_text(csv)
        sinks = {
            "duckdb": "{type: duckdb, database: w.duckdb, dataset: ds, table: t",
            "postgres": f'{{type: postgres, connection: "${{PG}}", dataset: {self.pg_schema}, '
            "table: t",
            "filesystem": "{type: filesystem, path: lake, dataset: ds, table: t",
        }
        source = extra.get("source", "{type: file, format: csv, path: d.csv}")
        (self.root / "manifest.yaml").write_text(
            f"name: names_t\nsource: {source}\n"
            f"sink: {sinks[self.sink]}, options: {{schema_contract: {contract}}}}}\n"
        )

    def dpone(self, *args: str) -> CliRun:
        proc = dpone_subprocess(
            [*args, "manifest.yaml", "--format", "json"],
            cwd=self.root,
            env={"PG": self.pg_url},
            timeout=120,
        )
        return CliRun(proc.returncode, proc.stdout, proc.stderr)

    def run(self) -> CliRun:
        return self.dpone("run")

    def table(self) -> tuple[list[str], list[tuple[Any, ...]]] | None:
        """The target's column names and its rows (sorted), or None when it does not exist."""
        if self.sink == "duckdb":
            if not (self.root / "w.duckdb").exists():
                return None
            with duckdb.connect(str(self.root / "w.duckdb"), read_only=True) as db:
                found = db.execute(
                    "SELECT count(*) FROM information_schema.tables WHERE table_name = 't'"
                ).fetchall()
                if not found[0][0]:
                    return None
                cur = db.execute("SELECT * FROM ds.t ORDER BY ALL")
                return [d[0] for d in cur.description], cur.fetchall()
        if self.sink == "postgres":
            exists = pg_query(self.pg_url, f"SELECT to_regclass('\"{self.pg_schema}\".t')")
            if exists[0][0] is None:
                return None
            names = pg_query(
                self.pg_url,
                "SELECT column_name FROM information_schema.columns WHERE table_schema = "
                f"'{self.pg_schema}' AND table_name = 't' ORDER BY ordinal_position",
            )
            rows = pg_query(self.pg_url, f'SELECT * FROM "{self.pg_schema}".t')
            return [n[0] for n in names], sorted(rows)
        folder = self.root / "lake" / "ds" / "t"
        if not any(folder.glob("*.parquet")):
            return None
        table = pads.dataset(folder, format="parquet").to_table()
        rows = sorted(zip(*(c.to_pylist() for c in table.columns), strict=True))
        return table.schema.names, rows


def error_of(result: CliRun) -> dict[str, Any]:
    doc = result.doc
    error: dict[str, Any] = doc["error"] if "error" in doc and "code" not in doc else doc
    return error


@pytest.fixture(params=["duckdb", "postgres", "filesystem"])
def any_sink(request: pytest.FixtureRequest, tmp_path: Path) -> Project:
    if request.param == "postgres":
        return Project(
            tmp_path,
            "postgres",
            request.getfixturevalue("pg_url"),
            request.getfixturevalue("pg_schema"),
        )
    return Project(tmp_path, request.param)


@pytest.fixture(params=["duckdb", "postgres"])
def sql_sink(request: pytest.FixtureRequest, tmp_path: Path) -> Project:
    if request.param == "postgres":
        return Project(
            tmp_path,
            "postgres",
            request.getfixturevalue("pg_url"),
            request.getfixturevalue("pg_schema"),
        )
    return Project(tmp_path, "duckdb")


# --- R's empty first header ------------------------------------------------------------------


def test_an_r_file_loads_as_column_1_on_every_run(any_sink: Project) -> None:
    any_sink.write(R_CSV)
    for run in (1, 2, 3):
        result = any_sink.run()
        assert result.exit_code == 0, result.stdout + result.stderr
        assert result.doc["renamed_columns"] == [{"position": 1, "source": "", "name": "column_1"}]
        table = any_sink.table()
        assert table is not None
        names, rows = table
        assert names == ["column_1", "x", "y"]
        assert rows == sorted([(1, 10, "a"), (2, 20, "b")] * run)
    text = any_sink.dpone("run").stdout
    assert "renamed_columns" in text


def test_an_r_file_takes_the_contracts_name_for_its_empty_header(sql_sink: Project) -> None:
    sql_sink.write(
        R_CSV, '{enforcement: quarantine, columns: {row_name: {source: "", type: integer}}}'
    )
    plan = sql_sink.dpone("plan")
    assert plan.exit_code == 0
    assert (
        plan.doc["manifest"]["sink"]["options"]["schema_contract"]["columns"]["row_name"]["source"]
        == ""
    )
    for run in (1, 2):
        result = sql_sink.run()
        assert result.exit_code == 0, result.stdout + result.stderr
        assert result.doc["renamed_columns"] == [{"position": 1, "source": "", "name": "row_name"}]
        assert sql_sink.table() == (
            ["row_name", "x", "y"],
            sorted([(1, 10, "a"), (2, 20, "b")] * run),
        )


def test_plan_text_shows_the_rename_and_the_rule(tmp_path: Path) -> None:
    project = Project(tmp_path, "duckdb")
    project.write(R_CSV, '{columns: {row_name: {source: "", type: string}}}')
    proc = dpone_subprocess(["plan", "manifest.yaml"], cwd=tmp_path, env={})
    assert proc.returncode == 0, proc.stderr
    assert '- row_name: string  ← source column ""' in proc.stdout
    assert '"" → column_<position>' in proc.stdout


# --- header-only files -----------------------------------------------------------------------


def test_a_header_only_file_makes_an_empty_table_of_text_columns(any_sink: Project) -> None:
    any_sink.write("a,b,c\n")
    for _ in (1, 2):
        result = any_sink.run()
        assert result.exit_code == 0, result.stdout + result.stderr
        assert result.doc["rows"]["read"] == 0
        assert result.doc["rows"]["loaded"] == 0
    if any_sink.sink == "filesystem":
        return  # an empty load commits no Parquet file; its marker is the proof
    assert any_sink.table() == (["a", "b", "c"], [])


def test_a_header_only_file_takes_the_declared_types(tmp_path: Path) -> None:
    project = Project(tmp_path, "duckdb")
    project.write("id,note\n", "{columns: {id: {type: integer}}}")
    result = project.run()
    assert result.exit_code == 0, result.stdout + result.stderr
    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as db:
        types = db.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_name = 't' ORDER BY ordinal_position"
        ).fetchall()
    assert types == [("id", "BIGINT"), ("note", "VARCHAR")]
    # The next file brings rows into the same table.
    (tmp_path / "d.csv").write_text("id,note\n1,x\n")
    assert project.run().exit_code == 0
    assert project.table() == (["id", "note"], [(1, "x")])


# --- names that differ only in letter case ----------------------------------------------------


def test_names_equal_but_for_case_are_refused_with_the_fix(sql_sink: Project) -> None:
    sql_sink.write("id,p95,P95\n1,2,3\n")
    validated = sql_sink.dpone("validate")
    assert validated.exit_code == 0  # the manifest is fine; the file's names are not
    for _ in (1, 2):
        result = sql_sink.run()
        assert result.exit_code == 1, result.stdout
        error = error_of(result)
        assert error["code"] == "DPONE_SOURCE_COLUMN_NAME_COLLISION"
        assert "'p95'" in error["message"]
        assert "'P95'" in error["message"]
        assert any("source:" in fix for fix in error["fixes"])
        assert sql_sink.table() is None  # nothing loaded


def test_a_source_rename_takes_one_of_two_names_equal_but_for_case(sql_sink: Project) -> None:
    sql_sink.write(
        "id,p95,P95\n1,2,3\n",
        "{enforcement: quarantine, columns: {p95_upper: {source: P95, type: integer}}}",
    )
    for run in (1, 2, 3):
        result = sql_sink.run()
        assert result.exit_code == 0, result.stdout + result.stderr
        table = sql_sink.table()
        assert table is not None
        names, rows = table
        assert sorted(names) == ["id", "p95", "p95_upper"]
        by_name = [dict(zip(names, row, strict=True)) for row in rows]
        assert by_name == [{"id": 1, "p95": 2, "p95_upper": 3}] * run


def test_a_name_equal_to_the_tables_but_for_case_is_refused_on_the_next_run(
    sql_sink: Project,
) -> None:
    sql_sink.write("id,amount\n1,2\n")
    assert sql_sink.run().exit_code == 0
    (sql_sink.root / "d.csv").write_text("id,Amount\n2,3\n")
    result = sql_sink.run()
    assert result.exit_code == 1
    error = error_of(result)
    assert error["code"] == "DPONE_SOURCE_COLUMN_NAME_COLLISION"
    assert "'Amount'" in error["message"]
    assert "'amount'" in error["message"]
    # The fix: load it into the table's column by renaming it in the contract.
    sql_sink.write("id,Amount\n2,3\n", "{columns: {amount: {source: Amount, type: integer}}}")
    assert sql_sink.run().exit_code == 0
    assert sql_sink.table() == (["id", "amount"], [(1, 2), (2, 3)])


def test_declared_names_equal_but_for_case_fail_validate(tmp_path: Path) -> None:
    project = Project(tmp_path, "duckdb")
    project.write(
        "id,p95,P95\n1,2,3\n",
        "{columns: {p95: {type: integer}, P95: {type: integer}, a: {type: string, source: x}, "
        "b: {type: string, source: x}}}",
    )
    result = project.dpone("validate")
    assert result.exit_code == 2
    errors = [e for doc in result.doc["manifests"] for e in doc["errors"]]
    assert [e["code"] for e in errors] == ["DPONE_MANIFEST_COLUMN_NAME"] * 2
    assert {e["pointer"] for e in errors} == {
        "/sink/options/schema_contract/columns/P95",
        "/sink/options/schema_contract/columns/b/source",
    }


# --- undeclared names shown as written --------------------------------------------------------


def test_a_frozen_undeclared_column_is_named_as_written(tmp_path: Path) -> None:
    project = Project(tmp_path, "duckdb")
    contract = "{enforcement: quarantine, evolution: {columns: freeze}}"
    project.write("id,note\n1,x\n", contract)
    assert project.run().exit_code == 0
    (tmp_path / "d.csv").write_text("id,note,Größe 2\n2,y,z\n")
    result = project.run()
    assert result.exit_code == 1
    error = error_of(result)
    assert error["code"] == "DPONE_SCHEMA_FROZEN"
    assert "Größe 2" in error["message"]
    evidence = json.loads((tmp_path / result.doc["evidence"]).read_text())
    assert {v["column"] for v in evidence["violations"]} == {"Größe 2"}


def test_a_jsonl_key_is_named_as_written_in_the_dlq(tmp_path: Path) -> None:
    project = Project(tmp_path, "duckdb")
    (tmp_path / "d.jsonl").write_text('{"id": 1}\n')
    contract = "{enforcement: quarantine, evolution: {columns: discard_row}}"
    project.write("", contract, source="{type: file, format: jsonl, path: d.jsonl}")
    assert project.run().exit_code == 0
    (tmp_path / "d.jsonl").write_text('{"id": 2, "Unit Price": 3}\n')
    result = project.run()
    assert result.exit_code == 0, result.stdout
    assert result.doc["rows"]["quarantined"] == 1
    (segment,) = (tmp_path / ".dpone" / "dlq" / "runs").glob("*/segments/*.jsonl")
    record = json.loads(segment.read_text().splitlines()[0])
    assert record["reason"]["column"] == "Unit Price"
    assert record["diagnostics"]["column"] == "Unit Price"


# --- a file without its header row ------------------------------------------------------------


@pytest.mark.parametrize(
    "csv",
    [
        "1987654,2020-01-01,a@b.c\n2,2020-01-02,d@e.f\n",
        "ab-12,cd-34,name\nxy-56,zz-78,other\n",
        "2020-01-01T10:00:00Z,zetacolumn\n",
    ],
)
def test_a_header_that_looks_like_data_is_refused_without_printing_it(
    tmp_path: Path, csv: str
) -> None:
    project = Project(tmp_path, "duckdb")
    project.write(csv)
    result = project.run()
    assert result.exit_code == 1
    error = error_of(result)
    assert error["code"] == "DPONE_SOURCE_HEADER_LOOKS_LIKE_DATA"
    assert any("header: false" in fix for fix in error["fixes"])
    names = csv.splitlines()[0].split(",")
    output = result.stdout + result.stderr
    written = b"".join(p.read_bytes() for p in (tmp_path / ".dpone").rglob("*") if p.is_file())
    for name in names:
        if name != "name":
            assert name not in output
            assert name.encode() not in written
    assert project.table() is None


def test_declared_names_are_never_taken_for_data(tmp_path: Path) -> None:
    project = Project(tmp_path, "duckdb")
    project.write("country,2024\nde,5\n", "{columns: {'2024': {type: integer}}}")
    result = project.run()
    assert result.exit_code == 0, result.stdout + result.stderr
    assert project.table() == (["2024", "country"], [(5, "de")])
    # header: false reads the same kind of file as rows.
    project.write(
        "1,2020-01-01\n",
        source="{type: file, format: csv, path: d.csv, options: {csv: {header: false}}}",
    )
    assert project.run().exit_code == 0


def test_a_replay_names_the_re_read_rows_as_the_run_did(tmp_path: Path) -> None:
    project = Project(tmp_path, "duckdb")
    contract = "{enforcement: quarantine, columns: {x: {type: integer}}}"
    project.write('"","x","y"\n"1",10,"a"\n"2",2.0,"b"\n', contract)
    first = project.run()
    assert first.exit_code == 0, first.stdout
    assert first.doc["rows"]["quarantined"] == 1  # 2.0 is not canonical without coercion
    # The fix: safe coercion reads 2.0 as 2; the replay re-reads the row, named column_1.
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(manifest.read_text().replace("quarantine,", "quarantine, coercion: safe,"))
    proc = dpone_subprocess(
        [
            "ops",
            "quarantine-replay",
            "--manifest",
            "manifest.yaml",
            "--run-id",
            first.doc["run_id"],
            "--execute",
            "--format",
            "json",
        ],
        cwd=tmp_path,
        env={},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert project.table() == (["x", "column_1", "y"], [(2, 2, "b"), (10, 1, "a")])
