"""Child-table projects (``source.normalize: {nested: child_tables}``): a JSONL file of customers
whose orders hold items, a manifest, and the three tables read back with a fresh DuckDB
connection, the ids checked against the record refs the rows came from."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
from click.testing import CliRunner

from dpone.cli.main import cli
from tests.support.postgres import pg_query

TABLES = ("customers", "customers__orders", "customers__orders__items")
LINKS = ("_dpone_id", "_dpone_parent_id", "_dpone_list_idx", "_dpone_root_id")
BAD_QTY = "lots-of-secret-canary"

#: the tables of LINES loaded once: (key columns..., values...) per row, links left out
ONCE: dict[str, list[tuple[Any, ...]]] = {
    "customers": [(1, "ann"), (2, "bob"), (4, "dee")],
    "customers__orders": [(1, 0, "A-1", 2), (1, 1, "A-2", 1), (4, 0, "D-1", 5)],
    "customers__orders__items": [
        (1, "A-1", 0, "x", 1),
        (1, "A-1", 1, "y", 2),
        (4, "D-1", 0, "z", 3),
    ],
}

#: three levels: customers -> orders -> items; line 3's order has a quantity that is no integer
LINES: list[dict[str, Any]] = [
    {
        "id": 1,
        "name": "ann",
        "orders": [
            {"sku": "A-1", "qty": 2, "items": [{"code": "x", "n": 1}, {"code": "y", "n": 2}]},
            {"sku": "A-2", "qty": 1},
        ],
    },
    {"id": 2, "name": "bob", "orders": []},
    {"id": 3, "name": "cid", "orders": [{"sku": "C-1", "qty": BAD_QTY}]},
    {
        "id": 4,
        "name": "dee",
        "orders": [{"sku": "D-1", "qty": 5, "items": [{"code": "z", "n": 3}]}],
    },
]

COLUMNS: dict[str, dict[str, Any]] = {
    "id": {"type": "integer", "nullable": False},
    "name": {"type": "string"},
    "orders.sku": {"type": "string", "nullable": False},
    "orders.qty": {"type": "integer"},
    "orders.items.code": {"type": "string"},
    "orders.items.n": {"type": "integer"},
}


def write_lines(root: Path, lines: list[dict[str, Any]], name: str = "data.jsonl") -> Path:
    path = root / name
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def write_manifest(
    root: Path,
    *,
    sink: dict[str, Any] | None = None,
    mode: str = "append",
    enforcement: str = "quarantine",
    max_nesting: int = 2,
    evolution: dict[str, str] | None = None,
    extra_sink: dict[str, Any] | None = None,
    source: dict[str, Any] | None = None,
    chunk_size: int | None = None,
) -> Path:
    """The project's manifest; ``source``: another source block than the JSONL file (its
    ``normalize`` is added)."""
    strategy: dict[str, Any] = {"mode": mode}
    if mode == "merge":
        strategy["unique_key"] = ["id"]
    contract: dict[str, Any] = {"enforcement": enforcement, "columns": COLUMNS}
    if evolution:
        contract["evolution"] = evolution
    manifest = {
        "name": "nested",
        "source": {
            **(source or {"type": "file", "format": "jsonl", "path": "data.jsonl"}),
            "normalize": {"nested": "child_tables", "max_nesting": max_nesting},
        },
        "sink": {
            **(sink or {"type": "duckdb", "database": "w.duckdb", "dataset": "shop"}),
            "table": "customers",
            "strategy": strategy,
            "options": {"schema_contract": contract},
            **(extra_sink or {}),
        },
    }
    if chunk_size is not None:
        manifest["runtime"] = {"chunk_size": chunk_size}
    path = root / "manifest.yaml"
    path.write_text(json.dumps(manifest))
    return path


def table(root: Path, name: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The columns and the rows (sorted) of ``shop.<name>``; ([], []) when it is absent."""
    if not (root / "w.duckdb").exists():
        return [], []
    with duckdb.connect(str(root / "w.duckdb"), read_only=True) as con:
        found = con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'shop' "
            "AND table_name = ?",
            [name],
        ).fetchall()[0][0]
        if not found:
            return [], []
        rel = con.sql(f"SELECT * FROM shop.{name}")
        return list(rel.columns), sorted(rel.fetchall(), key=repr)


def root_id(file_sha: str, row: int, name: str = "data.jsonl") -> str:
    """The ``_dpone_id`` of the root row at ``row`` of the file: a digest of its record ref."""
    return ref_id(f"dpone://file/{name}?sha256={file_sha}&row={row}")


def run_root_id(run_id: str, load_id: str, row: int) -> str:
    """The ``_dpone_id`` of a root row from a source that cannot be re-read (an API, Python):
    a digest of its run/load/row record ref."""
    return ref_id(f"dpone://runs/{run_id}/loads/{load_id}/rows/{row}")


def ref_id(ref: str) -> str:
    return hashlib.sha256(ref.encode()).hexdigest()[:20]


def file_sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pg_table(url: str, schema: str, name: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """:func:`table` of ``"<schema>".<name>`` on the PostgreSQL server."""
    columns = [
        str(r[0])
        for r in pg_query(
            url,
            "SELECT column_name FROM information_schema.columns WHERE table_schema = "
            f"'{schema}' AND table_name = '{name}' ORDER BY ordinal_position",
        )
    ]
    if not columns:
        return [], []
    return columns, sorted(pg_query(url, f'SELECT * FROM "{schema}"."{name}"'), key=repr)


Reader = Callable[[str], tuple[list[str], list[tuple[Any, ...]]]]


def shaped(root: Path, read: Reader | None = None) -> dict[str, list[tuple[Any, ...]]]:
    """Every table as comparable rows: the root (id, name), the children by their values and
    their parent's values (ids resolved), so two loads of the same rows compare equal.
    ``read``: a table's columns and rows (default: the DuckDB file under ``root``)."""
    read = read or (lambda name: table(root, name))
    _, customers = read("customers")
    _, orders = read("customers__orders")
    _, items = read("customers__orders__items")
    by_id = {row[2]: row[0] for row in customers}  # _dpone_id -> customer id
    order_of = {row[2]: (by_id[row[3]], row[0]) for row in orders}  # -> (customer, sku)
    return {
        "customers": sorted((r[0], r[1]) for r in customers),
        "customers__orders": sorted((by_id[r[3]], r[4], r[0], r[1]) for r in orders),
        "customers__orders__items": sorted((*order_of[r[3]], r[4], r[0], r[1]) for r in items),
    }


def run(manifest: Path, code: int = 0) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["run", str(manifest), "--format", "json"], env={})
    doc: dict[str, Any] = json.loads(result.stdout)
    assert result.exit_code == code, doc
    return doc


def dlq_records(root: Path, run_id: str) -> list[dict[str, Any]]:
    segments = sorted((root / ".dpone/dlq/runs" / run_id).glob("segments/*.jsonl"))
    return [json.loads(line) for s in segments for line in s.read_text().splitlines()]
