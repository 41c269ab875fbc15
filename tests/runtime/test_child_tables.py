"""Child tables (``source.normalize: {nested: child_tables}``, SPEC §13) from a JSONL file into a
DuckDB file on disk: three levels of tables with dlt's links, a bad child value dead-letters
its root row (and none of its children load), re-runs by append, merge and replace, the
contract's evolution on child tables, and every table committed together."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dpone.cli.main import cli
from tests.support.nested import (
    BAD_QTY,
    LINES,
    LINKS,
    ONCE,
    TABLES,
    dlq_records,
    file_sha,
    pg_table,
    root_id,
    run,
    shaped,
    table,
    write_lines,
    write_manifest,
)


def test_three_levels_load_into_linked_tables(tmp_path: Path) -> None:
    data = write_lines(tmp_path, LINES)
    doc = run(write_manifest(tmp_path))
    assert (doc["rows"]["read"], doc["rows"]["loaded"], doc["rows"]["quarantined"]) == (4, 3, 1)
    sha = file_sha(data)
    ann, dee = root_id(sha, 1), root_id(sha, 4)

    columns, customers = table(tmp_path, "customers")
    assert columns == ["id", "name", "_dpone_id"]
    assert customers == sorted([(1, "ann", ann), (2, "bob", root_id(sha, 2)), (4, "dee", dee)])

    columns, orders = table(tmp_path, "customers__orders")
    assert columns == ["sku", "qty", *LINKS]
    assert [(r[0], r[1], r[3], r[4], r[5]) for r in orders] == sorted(
        [("A-1", 2, ann, 0, ann), ("A-2", 1, ann, 1, ann), ("D-1", 5, dee, 0, dee)], key=repr
    )
    order_ids = {r[0]: r[2] for r in orders}
    assert len(set(order_ids.values())) == 3

    columns, items = table(tmp_path, "customers__orders__items")
    assert columns == ["code", "n", *LINKS]
    assert [(r[0], r[1], r[3], r[4], r[5]) for r in items] == sorted(
        [
            ("x", 1, order_ids["A-1"], 0, ann),
            ("y", 2, order_ids["A-1"], 1, ann),
            ("z", 3, order_ids["D-1"], 0, dee),
        ],
        key=repr,
    )
    assert shaped(tmp_path) == ONCE


def test_a_bad_child_value_dead_letters_its_root_once(tmp_path: Path) -> None:
    data = write_lines(tmp_path, LINES)
    doc = run(write_manifest(tmp_path))
    records = dlq_records(tmp_path, doc["run_id"])
    assert len(records) == 1
    (record,) = records
    assert record["record_ref"] == f"dpone://file/data.jsonl?sha256={file_sha(data)}&row=3"
    assert (record["reason"]["code"], record["reason"]["column"]) == (
        "schema.type_mismatch",
        "orders.qty",
    )
    assert record["diagnostics"]["expected_type"] == "integer"
    # None of the root's rows loaded in any table; the value is in no artifact.
    assert all(r[3] != root_id(file_sha(data), 3) for r in table(tmp_path, "customers__orders")[1])
    assert 3 not in [r[0] for r in table(tmp_path, "customers")[1]]
    for path in (tmp_path / ".dpone").rglob("*"):
        if path.is_file():
            assert BAD_QTY not in path.read_text(errors="replace"), path


def test_a_child_field_that_is_not_a_list_of_objects_dead_letters_its_root(
    tmp_path: Path,
) -> None:
    write_lines(tmp_path, [*LINES[:2], {"id": 5, "name": "eve", "orders": "none"}])
    doc = run(write_manifest(tmp_path))
    (record,) = dlq_records(tmp_path, doc["run_id"])
    assert (record["reason"]["code"], record["reason"]["column"]) == (
        "schema.type_mismatch",
        "orders",
    )
    assert [r[0] for r in table(tmp_path, "customers")[1]] == [1, 2]


def test_preserve_keeps_the_whole_root_row_in_the_dlq(tmp_path: Path) -> None:
    write_lines(tmp_path, LINES)
    doc = run(_with(tmp_path, {"dlq": {"pii_policy": "preserve"}}))
    (record,) = dlq_records(tmp_path, doc["run_id"])
    value = record["payload"]["value"]
    assert (value["id"], value["name"]) == ("3", "cid")
    assert json.loads(value["orders"]) == [{"sku": "C-1", "qty": BAD_QTY}]


def _with(root: Path, options: dict[str, Any]) -> Path:
    path = write_manifest(root)
    manifest = json.loads(path.read_text())
    manifest["sink"]["options"].update(options)
    path.write_text(json.dumps(manifest))
    return path


def test_append_twice_doubles_every_table(tmp_path: Path) -> None:
    write_lines(tmp_path, LINES)
    manifest = write_manifest(tmp_path)
    run(manifest)
    run(manifest)
    assert shaped(tmp_path) == {name: sorted(rows * 2) for name, rows in ONCE.items()}


def test_merge_twice_leaves_the_same_rows(tmp_path: Path) -> None:
    write_lines(tmp_path, LINES)
    manifest = write_manifest(tmp_path, mode="merge")
    run(manifest)
    first = {name: table(tmp_path, name) for name in TABLES}
    run(manifest)
    assert {name: table(tmp_path, name) for name in TABLES} == first
    assert shaped(tmp_path) == ONCE


def test_merge_replaces_a_reloaded_roots_children(tmp_path: Path) -> None:
    write_lines(tmp_path, LINES)
    manifest = write_manifest(tmp_path, mode="merge")
    run(manifest)
    changed = [
        {"id": 1, "name": "ann2", "orders": [{"sku": "A-9", "qty": 9}]},
        {"id": 2, "name": "bob", "orders": [{"sku": "B-1", "qty": 1, "items": [{"code": "q"}]}]},
        {"id": 1, "name": "ann3", "orders": [{"sku": "A-7", "qty": 7}]},  # the last wins
    ]
    write_lines(tmp_path, changed)
    run(manifest)
    assert shaped(tmp_path) == {
        "customers": [(1, "ann3"), (2, "bob"), (4, "dee")],
        "customers__orders": [(1, 0, "A-7", 7), (2, 0, "B-1", 1), (4, 0, "D-1", 5)],
        "customers__orders__items": [(2, "B-1", 0, "q", None), (4, "D-1", 0, "z", 3)],
    }


def test_replace_replaces_the_child_tables_too(tmp_path: Path) -> None:
    write_lines(tmp_path, LINES)
    manifest = write_manifest(tmp_path, mode="replace")
    run(manifest)
    run(manifest)
    assert shaped(tmp_path) == ONCE
    write_lines(tmp_path, [{"id": 7, "name": "gus", "orders": [{"sku": "G-1", "qty": 1}]}])
    run(manifest)
    assert shaped(tmp_path) == {
        "customers": [(7, "gus")],
        "customers__orders": [(7, 0, "G-1", 1)],
        "customers__orders__items": [],
    }


def test_below_max_nesting_a_list_stays_json(tmp_path: Path) -> None:
    write_lines(tmp_path, LINES)
    run(write_manifest(tmp_path, max_nesting=1))
    assert table(tmp_path, "customers__orders__items") == ([], [])
    columns, orders = table(tmp_path, "customers__orders")
    assert columns == ["sku", "qty", "items", *LINKS]
    items = {r[0]: r[2] for r in orders}
    assert json.loads(items["A-1"]) == [{"code": "x", "n": 1}, {"code": "y", "n": 2}]
    assert items["A-2"] is None


def test_strict_fails_before_any_table_commits(tmp_path: Path) -> None:
    write_lines(tmp_path, LINES)
    doc = run(write_manifest(tmp_path, enforcement="strict"), code=1)
    assert doc["error"]["code"] == "DPONE_CONTRACT_VIOLATION"
    assert BAD_QTY not in json.dumps(doc)
    assert all(table(tmp_path, name) == ([], []) for name in TABLES)


def test_frozen_tables_refuse_a_new_child_table(tmp_path: Path) -> None:
    write_lines(tmp_path, [{"id": 1, "name": "ann", "orders": []}])
    run(write_manifest(tmp_path))
    assert table(tmp_path, "customers")[1] != []
    write_lines(tmp_path, LINES[:1])
    frozen = write_manifest(tmp_path, evolution={"tables": "freeze"})
    doc = run(frozen, code=1)
    assert doc["error"]["code"] == "DPONE_SCHEMA_FROZEN"
    assert table(tmp_path, "customers__orders") == ([], [])
    assert [r[0] for r in table(tmp_path, "customers")[1]] == [1]


@pytest.mark.parametrize("mode", ["append", "merge"])
def test_every_table_of_a_load_commits_with_its_marker(tmp_path: Path, mode: str) -> None:
    import duckdb

    write_lines(tmp_path, LINES)
    doc = run(write_manifest(tmp_path, mode=mode))
    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as con:
        markers = con.sql('SELECT load_id, row_count FROM shop."_dpone_loads"').fetchall()
    assert markers == [(doc["load_id"], 3)]


def test_postgres_loads_the_same_tables(tmp_path: Path, pg_url: str, pg_schema: str) -> None:
    data = write_lines(tmp_path, LINES)
    sink = {"type": "postgres", "connection": pg_url, "dataset": pg_schema}

    def read(name: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        return pg_table(pg_url, pg_schema, name)

    doc = run(write_manifest(tmp_path, sink=sink))
    assert (doc["rows"]["loaded"], doc["rows"]["quarantined"]) == (3, 1)
    (record,) = dlq_records(tmp_path, doc["run_id"])
    assert record["reason"]["column"] == "orders.qty"
    assert shaped(tmp_path, read) == ONCE
    assert read("customers")[0] == ["id", "name", "_dpone_id"]
    assert read("customers__orders")[0] == ["sku", "qty", *LINKS]
    assert sorted(r[2] for r in read("customers")[1]) == sorted(
        root_id(file_sha(data), row) for row in (1, 2, 4)
    )
    run(write_manifest(tmp_path, sink=sink))
    assert shaped(tmp_path, read) == {name: sorted(rows * 2) for name, rows in ONCE.items()}


@pytest.mark.parametrize("mode", ["merge", "replace"])
def test_postgres_merge_and_replace_child_tables(
    tmp_path: Path, pg_url: str, pg_schema: str, mode: str
) -> None:
    write_lines(tmp_path, LINES)
    sink = {"type": "postgres", "connection": pg_url, "dataset": pg_schema}
    manifest = write_manifest(tmp_path, sink=sink, mode=mode)

    def read(name: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        return pg_table(pg_url, pg_schema, name)

    run(manifest)
    run(manifest)
    assert shaped(tmp_path, read) == ONCE
    write_lines(tmp_path, [{"id": 1, "name": "ann2", "orders": [{"sku": "A-9", "qty": 9}]}])
    run(manifest)
    if mode == "merge":
        assert shaped(tmp_path, read) == {
            "customers": [(1, "ann2"), (2, "bob"), (4, "dee")],
            "customers__orders": [(1, 0, "A-9", 9), (4, 0, "D-1", 5)],
            "customers__orders__items": [(4, "D-1", 0, "z", 3)],
        }
    else:
        assert shaped(tmp_path, read) == {
            "customers": [(1, "ann2")],
            "customers__orders": [(1, 0, "A-9", 9)],
            "customers__orders__items": [],
        }


def test_replay_refuses_a_pipeline_with_child_tables(tmp_path: Path) -> None:
    write_lines(tmp_path, LINES)
    manifest = write_manifest(tmp_path)
    doc = run(manifest)
    args = ["ops", "quarantine-replay", "--run-id", doc["run_id"], "--dir"]
    args += [str(tmp_path / ".dpone/dlq"), "--manifest", str(manifest), "--execute"]
    result = CliRunner().invoke(cli, [*args, "--format", "json"], env={})
    assert result.exit_code == 2, result.stdout
    error = json.loads(result.stdout)
    assert error["code"] == "DPONE_DLQ_REPLAY_UNSUPPORTED"
    assert "child tables" in error["message"]
    assert shaped(tmp_path) == ONCE


@pytest.mark.parametrize("mode", ["append", "merge"])
def test_every_table_is_the_same_whatever_the_chunk_size(tmp_path: Path, mode: str) -> None:
    """The ids come from each root row's record_ref and a merge's last row wins across
    chunks: the tables (links included) do not depend on where chunks begin."""
    lines = [*LINES, {**LINES[0], "name": "ann-again"}]  # a key twice, in different chunks
    loaded = []
    for size in (None, 1, 2, 3):
        root = tmp_path / f"chunks-{size}"
        root.mkdir()
        write_lines(root, lines)
        manifest = write_manifest(root, mode=mode, chunk_size=size)
        run(manifest)
        run(manifest)
        loaded.append({name: table(root, name) for name in TABLES})
    assert loaded[0]["customers"][1]
    assert all(tables == loaded[0] for tables in loaded[1:])
