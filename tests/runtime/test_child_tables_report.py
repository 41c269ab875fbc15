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
from tests.support.nested import LINES, TABLES, table, write_lines, write_manifest


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
