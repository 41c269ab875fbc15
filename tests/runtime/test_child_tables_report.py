"""What a run with child tables reports about them: ``schema_changes`` (in the run document and
the evidence) names each child table it creates and each column it adds to one, the run
document's ``sink.child_tables`` and its text give the rows each child table loaded, and a
failed run reports none of them. Read from the CLI's output and the evidence file on disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from dpone.cli.main import cli
from dpone.published import schema_errors
from tests.support.nested import LINES, TABLES, pg_table, table, write_lines, write_manifest


def run(manifest: Path, code: int = 0) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["run", str(manifest), "--format", "json"], env={})
    doc: dict[str, Any] = json.loads(result.stdout)
    assert result.exit_code == code, doc
    assert schema_errors(doc, "dpone.run.v1") == []
    return doc


def changes(doc: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    return [(c["change"], c["table"], c["column"]) for c in doc["schema_changes"]]


def test_schema_changes_name_every_child_table_created(tmp_path: Path) -> None:
    write_lines(tmp_path, LINES)
    doc = run(write_manifest(tmp_path))
    assert changes(doc) == [("table_created", f"shop.{name}", None) for name in TABLES]
    evidence = json.loads((tmp_path / doc["evidence"]).read_text())
    assert schema_errors(evidence, "dpone.data_contract_evidence.v1") == []
    assert [(c["change"], c["table"]) for c in evidence["schema_changes"]] == [
        ("table_created", f"shop.{name}") for name in TABLES
    ]
    assert doc["sink"]["child_tables"] == [
        {"table": "shop.customers__orders", "rows_loaded": 3},
        {"table": "shop.customers__orders__items", "rows_loaded": 3},
    ]


def test_a_new_child_column_and_a_new_child_table_are_schema_changes(tmp_path: Path) -> None:
    write_lines(tmp_path, LINES)
    manifest = write_manifest(tmp_path)
    run(manifest)
    write_lines(tmp_path, LINES)
    assert changes(run(manifest)) == []  # the same tables again: nothing changes
    line = {
        "id": 7,
        "name": "gus",
        "orders": [{"sku": "G-1", "qty": 1, "note": "gift", "tags": [{"t": "red"}]}],
    }
    write_lines(tmp_path, [line])
    doc = run(write_manifest(tmp_path, max_nesting=3))
    found = changes(doc)
    assert ("column_added", "shop.customers__orders", "note") in found
    assert ("table_created", "shop.customers__orders__tags", None) in found
    assert not [c for c in found if c[1] in ("shop.customers", "shop.customers__orders__items")]
    assert table(tmp_path, "customers__orders__tags")[1][0][0] == "red"


def test_the_text_report_lists_the_child_tables_and_their_rows(tmp_path: Path) -> None:
    write_lines(tmp_path, LINES)
    result = CliRunner().invoke(cli, ["run", str(write_manifest(tmp_path))], env={})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "  child      shop.customers__orders  loaded 3" in lines
    assert "  child      shop.customers__orders__items  loaded 3" in lines
    assert "  schema     shop.customers__orders: table created" in lines


def test_a_failed_run_reports_no_child_table(tmp_path: Path) -> None:
    write_lines(tmp_path, LINES)
    doc = run(write_manifest(tmp_path, enforcement="strict"), code=1)
    assert doc["schema_changes"] == []
    assert "child_tables" not in doc["sink"]


def ddl_of(root: Path, doc: dict[str, Any]) -> dict[str, Any]:
    evidence = json.loads((root / doc["evidence"]).read_text())
    assert schema_errors(evidence, "dpone.data_contract_evidence.v1") == []
    ddl: dict[str, Any] = evidence["ddl"]
    return ddl


def test_the_evidence_ddl_describes_each_child_table(tmp_path: Path) -> None:
    write_lines(tmp_path, LINES)
    doc = run(write_manifest(tmp_path))
    ddl = ddl_of(tmp_path, doc)
    assert ddl["table"] == "shop.customers"
    children = {c["table"]: c for c in ddl["child_tables"]}
    assert list(children) == ["shop.customers__orders", "shop.customers__orders__items"]
    orders = children["shop.customers__orders"]
    assert orders["dialect"] == "duckdb"
    assert [(c["name"], c["type"]) for c in orders["columns"]] == [
        ("sku", "VARCHAR"),
        ("qty", "BIGINT"),
        ("_dpone_id", "VARCHAR"),
        ("_dpone_parent_id", "VARCHAR"),
        ("_dpone_list_idx", "BIGINT"),
        ("_dpone_root_id", "VARCHAR"),
    ]
    # The description was rolled back, the commit made the same table.
    assert table(tmp_path, "customers__orders")[0] == [c["name"] for c in orders["columns"]]
    text = (tmp_path / doc["evidence"]).with_suffix(".md").read_text()
    assert "## Child table after the load (duckdb `shop.customers__orders`)" in text
    # a second run widens a child table: its ddl has the new column
    write_lines(tmp_path, [{"id": 9, "name": "ivy", "orders": [{"sku": "I-1", "note": "n"}]}])
    again = ddl_of(tmp_path, run(write_manifest(tmp_path)))
    (orders,) = (c for c in again["child_tables"] if c["table"] == "shop.customers__orders")
    assert [c["name"] for c in orders["columns"]][-1] == "note"


def test_the_postgres_evidence_ddl_describes_each_child_table(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    write_lines(tmp_path, LINES)
    sink = {"type": "postgres", "connection": pg_url, "dataset": pg_schema}
    doc = run(write_manifest(tmp_path, sink=sink))
    ddl = ddl_of(tmp_path, doc)
    children = {c["table"]: c for c in ddl["child_tables"]}
    items = children[f"{pg_schema}.customers__orders__items"]
    assert items["dialect"] == "postgres"
    assert [(c["name"], c["type"], c["nullable"]) for c in items["columns"]][:2] == [
        ("code", "text", True),
        ("n", "bigint", True),
    ]
    assert pg_table(pg_url, pg_schema, "customers__orders__items")[0] == [
        c["name"] for c in items["columns"]
    ]
