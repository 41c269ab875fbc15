"""Child tables under SIGKILL: a ``dpone run`` loading a JSONL file into a DuckDB table and its
child tables dies just before and just after its sink commit. Before: no table holds a row of
it; after: every table holds all of them. The next run recovers it (rolled back or finished)
and every table is exact: each root row and each child row once, under the right parent. On a
DuckDB file and on the PostgreSQL server."""

from __future__ import annotations

import json
import signal
from functools import partial
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.support.nested import TABLES, pg_table, table, write_lines, write_manifest
from tests.support.nested import shaped as shaped_by
from tests.support.postgres import pg_query
from tests.support.processes import dpone_subprocess

BASE = [
    {"id": 1, "name": "ann", "orders": [{"sku": "A-1", "qty": 2, "items": [{"code": "x"}]}]},
    {"id": 2, "name": "bob", "orders": []},
]
KILLED = [
    {"id": 2, "name": "bob2", "orders": [{"sku": "B-1", "qty": 1}, {"sku": "B-2", "qty": 4}]},
    {"id": 3, "name": "cid", "orders": [{"sku": "C-1", "qty": "bad"}]},
    {"id": 5, "name": "eve", "orders": [{"sku": "E-1", "qty": 3, "items": [{"n": 7}]}]},
]
LAST = [{"id": 6, "name": "fay", "orders": [{"sku": "F-1", "qty": 6}]}]


def run(root: Path, run_id: str, fault: str | None = None) -> dict[str, Any]:
    proc = dpone_subprocess(
        ["run", "manifest.yaml", "--format", "json", "--run-id", run_id],
        cwd=root,
        env={},
        fault=fault,
    )
    if fault is not None:
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        return {}
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def expected(mode: str, loads: list[list[dict[str, Any]]]) -> dict[str, list[tuple[Any, ...]]]:
    """The tables after ``loads`` (their good rows), as ``shaped`` reads them."""
    roots: dict[int, dict[str, Any]] = {}
    rows: list[dict[str, Any]] = []
    for lines in loads:
        for line in lines:
            if any(o.get("qty") == "bad" for o in line["orders"]):
                continue
            if mode == "merge":
                roots[line["id"]] = line
            else:
                rows.append(line)
    kept = list(roots.values()) if mode == "merge" else rows
    out: dict[str, list[tuple[Any, ...]]] = {name: [] for name in TABLES}
    for line in kept:
        out["customers"].append((line["id"], line["name"]))
        for i, order in enumerate(line["orders"]):
            out["customers__orders"].append((line["id"], i, order["sku"], order["qty"]))
            for j, item in enumerate(order.get("items", [])):
                row = (line["id"], order["sku"], j, item.get("code"), item.get("n"))
                out["customers__orders__items"].append(row)
    return {name: sorted(rows_) for name, rows_ in out.items()}


class Target:
    """Where the tables are: the DuckDB file under the project, or a PostgreSQL schema."""

    def __init__(self, root: Path, pg: tuple[str, str] | None) -> None:
        self.root, self.pg = root, pg

    def sink(self) -> dict[str, Any] | None:
        if self.pg is None:
            return None
        return {"type": "postgres", "connection": self.pg[0], "dataset": self.pg[1]}

    def read(self, name: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        if self.pg is None:
            return table(self.root, name)
        return pg_table(*self.pg, name)

    def markers(self) -> list[str]:
        sql = 'SELECT run_id FROM {}."_dpone_loads" ORDER BY load_seq'
        if self.pg is not None:
            rows = pg_query(self.pg[0], sql.format(f'"{self.pg[1]}"'))
        else:
            with duckdb.connect(str(self.root / "w.duckdb"), read_only=True) as con:
                rows = con.sql(sql.format("shop")).fetchall()
        return [str(r[0]) for r in rows]


@pytest.fixture(params=["duckdb", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    if request.param == "duckdb":
        return Target(tmp_path, None)
    return Target(
        tmp_path, (request.getfixturevalue("pg_url"), request.getfixturevalue("pg_schema"))
    )


@pytest.mark.crash
@pytest.mark.parametrize("mode", ["append", "merge"])
@pytest.mark.parametrize("point", ["before_sink_commit", "after_sink_commit"])
def test_a_killed_load_of_child_tables_is_all_or_nothing(
    tmp_path: Path, target: Target, mode: str, point: str
) -> None:
    shaped = partial(shaped_by, read=target.read)
    write_manifest(tmp_path, sink=target.sink(), mode=mode)
    write_lines(tmp_path, BASE)
    run(tmp_path, "base")
    write_lines(tmp_path, KILLED)
    run(tmp_path, "killed", fault=point)
    committed = point == "after_sink_commit"
    assert shaped(tmp_path) == expected(mode, [BASE, KILLED] if committed else [BASE])
    assert target.markers() == (["base", "killed"] if committed else ["base"])

    if not committed:  # the same file again: the rerun loads what the killed run did not
        doc = run(tmp_path, "rerun")
        assert [(r["run_id"], r["action"]) for r in doc["recovered"]] == [("killed", "rolled_back")]
        assert shaped(tmp_path) == expected(mode, [BASE, KILLED])
        assert target.markers() == ["base", "rerun"]
    write_lines(tmp_path, LAST)
    doc = run(tmp_path, "last")
    if committed:
        assert [(r["run_id"], r["action"]) for r in doc["recovered"]] == [("killed", "finished")]
    assert shaped(tmp_path) == expected(mode, [BASE, KILLED, LAST])
    assert target.markers()[-1] == "last"
    # No child row without its parent, in any table.
    ids = {r[2] for r in target.read("customers")[1]}
    orders = target.read("customers__orders")[1]
    assert {r[3] for r in orders} <= ids
    assert {r[3] for r in target.read("customers__orders__items")[1]} <= {r[2] for r in orders}
