"""Child tables (``source.normalize: {nested: child_tables}``, SPEC §13) from the sources that are
not files: a REST API on a local HTTP server, a python callable and a dlt resource next to the
manifest, into a DuckDB file and into the PostgreSQL server. The same three linked tables as
from a JSONL file; a bad child value dead-letters its root row (one DLQ record, the
run/load/row ref); the root ids are digests of those refs (per run: these sources cannot be
read again); child values are judged as written, not as Arrow would unify them."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from tests.support.nested import (
    BAD_QTY,
    LINES,
    LINKS,
    ONCE,
    dlq_records,
    pg_table,
    run,
    run_root_id,
    shaped,
    table,
    write_manifest,
)


def artifacts(root: Path) -> str:
    files = [p for p in (root / ".dpone").rglob("*") if p.is_file()]
    return "\n".join(p.read_text(errors="replace") for p in files)


class CustomersApi:
    """``GET /customers``: the customers two to a page (``page=1, 2, ...``)."""

    def __init__(self, server: HTTPServer, customers: list[dict[str, Any]]) -> None:
        self.customers = customers
        server.expect_request("/customers").respond_with_handler(self.handle)
        self.base_url = server.url_for("/")

    def handle(self, request: Request) -> Response:
        start = (int(request.args.get("page", "1")) - 1) * 2
        body = {"items": self.customers[start : start + 2]}
        return Response(json.dumps(body), status=200, mimetype="application/json")

    def source(self) -> dict[str, Any]:
        paginator = {"type": "page_number", "base_page": 1, "total_path": None}
        return {
            "type": "rest_api",
            "client": {"base_url": self.base_url, "paginator": paginator},
            "resource": {
                "name": "customers",
                "endpoint": {"path": "customers", "data_selector": "items"},
            },
            "http": {"request_max_attempts": 1, "request_backoff_factor": 0},
        }


def pg_sink(pg_url: str, pg_schema: str) -> dict[str, Any]:
    return {"type": "postgres", "connection": pg_url, "dataset": pg_schema}


def test_a_rest_api_loads_linked_child_tables(tmp_path: Path, httpserver: HTTPServer) -> None:
    api = CustomersApi(httpserver, LINES)
    doc = run(write_manifest(tmp_path, source=api.source()))
    assert (doc["rows"]["read"], doc["rows"]["loaded"], doc["rows"]["quarantined"]) == (4, 3, 1)
    assert shaped(tmp_path) == ONCE
    ids = [run_root_id(doc["run_id"], doc["load_id"], row) for row in (1, 2, 4)]
    assert [r[2] for r in table(tmp_path, "customers")[1]] == ids
    assert table(tmp_path, "customers__orders")[0] == ["sku", "qty", *LINKS]
    (record,) = dlq_records(tmp_path, doc["run_id"])
    assert record["record_ref"] == f"dpone://runs/{doc['run_id']}/loads/{doc['load_id']}/rows/3"
    assert (record["reason"]["code"], record["reason"]["column"]) == (
        "schema.type_mismatch",
        "orders.qty",
    )
    assert BAD_QTY not in artifacts(tmp_path)


def test_a_rest_api_merges_its_child_tables_run_after_run(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    api = CustomersApi(httpserver, LINES)
    manifest = write_manifest(tmp_path, source=api.source(), mode="merge")
    run(manifest)
    run(manifest)  # new ids for the same rows: the old rows' children go with them
    assert shaped(tmp_path) == ONCE
    api.customers = [{"id": 1, "name": "ann2", "orders": [{"sku": "A-9", "qty": 9}]}]
    run(manifest)
    assert shaped(tmp_path) == {
        "customers": [(1, "ann2"), (2, "bob"), (4, "dee")],
        "customers__orders": [(1, 0, "A-9", 9), (4, 0, "D-1", 5)],
        "customers__orders__items": [(4, "D-1", 0, "z", 3)],
    }


@pytest.mark.parametrize("mode", ["append", "merge"])
def test_a_rest_api_loads_child_tables_into_postgres(
    tmp_path: Path, httpserver: HTTPServer, pg_url: str, pg_schema: str, mode: str
) -> None:
    api = CustomersApi(httpserver, LINES)
    manifest = write_manifest(
        tmp_path, source=api.source(), sink=pg_sink(pg_url, pg_schema), mode=mode
    )

    def read(name: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        return pg_table(pg_url, pg_schema, name)

    doc = run(manifest)
    assert (doc["rows"]["loaded"], doc["rows"]["quarantined"]) == (3, 1)
    assert shaped(tmp_path, read) == ONCE
    assert read("customers__orders__items")[0] == ["code", "n", *LINKS]
    run(manifest)
    twice = ONCE if mode == "merge" else {name: sorted(r * 2) for name, r in ONCE.items()}
    assert shaped(tmp_path, read) == twice


ROWS_PY = """\
import json

import dlt


def rows(path):
    with open(path) as f:
        for line in f:
            yield json.loads(line)


@dlt.resource(name="customers")
def customers(path):
    yield from rows(path)
"""


def user_module(root: Path, lines: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """A module next to the manifest (a name of its own: modules stay imported) whose ``rows``
    yields ``lines`` as dicts and whose ``customers`` is the same as a dlt resource, and the
    args both take."""
    name = f"rows_{uuid.uuid4().hex}"
    (root / f"{name}.py").write_text(ROWS_PY)
    (root / "rows.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return name, {"path": str(root / "rows.jsonl")}


def python_source(root: Path, lines: list[dict[str, Any]]) -> dict[str, Any]:
    name, args = user_module(root, lines)
    return {"type": "python", "callable": f"{name}:rows", "args": args}


def dlt_source(root: Path, lines: list[dict[str, Any]]) -> dict[str, Any]:
    name, args = user_module(root, lines)
    return {"type": "dlt", "ref": f"{name}:customers", "args": args}


@pytest.mark.parametrize("kind", ["python", "dlt"])
def test_a_python_or_dlt_source_loads_linked_child_tables(tmp_path: Path, kind: str) -> None:
    make = python_source if kind == "python" else dlt_source
    doc = run(write_manifest(tmp_path, source=make(tmp_path, LINES)))
    assert (doc["rows"]["read"], doc["rows"]["loaded"], doc["rows"]["quarantined"]) == (4, 3, 1)
    assert shaped(tmp_path) == ONCE
    ids = [run_root_id(doc["run_id"], doc["load_id"], row) for row in (1, 2, 4)]
    assert [r[2] for r in table(tmp_path, "customers")[1]] == ids
    (record,) = dlq_records(tmp_path, doc["run_id"])
    assert record["record_ref"] == f"dpone://runs/{doc['run_id']}/loads/{doc['load_id']}/rows/3"
    assert record["reason"]["column"] == "orders.qty"
    assert BAD_QTY not in artifacts(tmp_path)


@pytest.mark.parametrize("kind", ["python", "dlt"])
def test_python_child_values_keep_their_written_form(tmp_path: Path, kind: str) -> None:
    """An integer next to a fraction in one list stays an integer (Arrow would make both
    floats, and ``2.0`` is no integer); a fraction of an integer column is still rejected."""
    lines = [
        {"id": 1, "name": "ann", "orders": [{"sku": "A-1", "qty": 2, "price": 1.5}]},
        {"id": 2, "name": "bob", "orders": [{"sku": "B-1", "qty": 3, "price": 2}]},
        {"id": 3, "name": "cid", "orders": [{"sku": "C-1", "qty": 1.5, "price": 3}]},
        {"id": 4, "name": "dee", "orders": [{"sku": "D-1", "qty": 4, "price": 0.25}]},
    ]
    make = python_source if kind == "python" else dlt_source
    doc = run(write_manifest(tmp_path, source=make(tmp_path, lines)))
    assert (doc["rows"]["loaded"], doc["rows"]["quarantined"]) == (3, 1)
    (record,) = dlq_records(tmp_path, doc["run_id"])
    assert (record["reason"]["code"], record["reason"]["column"]) == (
        "schema.type_mismatch",
        "orders.qty",
    )
    columns, orders = table(tmp_path, "customers__orders")
    assert columns[:3] == ["sku", "qty", "price"]
    assert [(r[0], r[1], r[2]) for r in orders] == [
        ("A-1", 2, 1.5),
        ("B-1", 3, 2.0),
        ("D-1", 4, 0.25),
    ]
    assert [r[0] for r in table(tmp_path, "customers")[1]] == [1, 2, 4]


@pytest.mark.parametrize("kind", ["python", "dlt"])
def test_a_python_or_dlt_source_loads_child_tables_into_postgres(
    tmp_path: Path, pg_url: str, pg_schema: str, kind: str
) -> None:
    source = (python_source if kind == "python" else dlt_source)(tmp_path, LINES)
    manifest = write_manifest(tmp_path, source=source, sink=pg_sink(pg_url, pg_schema))

    def read(name: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        return pg_table(pg_url, pg_schema, name)

    doc = run(manifest)
    assert (doc["rows"]["loaded"], doc["rows"]["quarantined"]) == (3, 1)
    assert shaped(tmp_path, read) == ONCE
    assert read("customers")[0] == ["id", "name", "_dpone_id"]


ARROW_PY = """\
import pyarrow as pa


def rows():
    yield pa.table(
        {
            "id": [1, 2],
            "name": ["ann", "bob"],
            "orders": [[{"sku": "A-1", "qty": 2}, {"sku": "A-2", "qty": 1}], []],
        }
    )
"""


def test_a_python_source_loads_arrow_lists_of_structs_as_child_tables(tmp_path: Path) -> None:
    name = f"arrow_{uuid.uuid4().hex}"
    (tmp_path / f"{name}.py").write_text(ARROW_PY)
    source = {"type": "python", "callable": f"{name}:rows"}
    doc = run(write_manifest(tmp_path, source=source))
    assert (doc["rows"]["loaded"], doc["rows"]["quarantined"]) == (2, 0)
    _, orders = table(tmp_path, "customers__orders")
    assert sorted((r[0], r[1], r[4]) for r in orders) == [("A-1", 2, 0), ("A-2", 1, 1)]
