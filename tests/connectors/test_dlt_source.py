"""``type: dlt``: a user's own dlt resources and sources, imported at run time, streamed into
chunks; the committed cursor handed to the resource's dlt incremental; errors without values.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from click.testing import CliRunner

from dpone.cli.main import cli
from dpone.connectors import make_source
from dpone.connectors.errors import SourceConfigError, SourceError
from dpone.contracts.spec import ColumnSpec
from tests.connectors.specs import dlt_backed_spec

MODULE = """
import json
import os
from datetime import datetime, timezone

import dlt
import pyarrow as pa


@dlt.resource(name="orders")
def orders(n=5):
    for i in range(1, n + 1):
        yield {"id": i, "name": f"n{i}"}


@dlt.resource
def arrow_rows(n=7):
    yield pa.table({"id": pa.array(range(1, n + 1), pa.int64())})


@dlt.resource
def customers():
    yield [{"id": 1, "name": "c1"}, {"id": 2, "name": "c2"}]


@dlt.source
def shop():
    return [orders(), customers()]


@dlt.resource
def broken():
    yield {"id": 1}
    raise RuntimeError("secret-value")


@dlt.resource
def events(data, seen, updated_at=dlt.sources.incremental("updated_at")):
    # What dlt handed over as the incremental's start, for the test to read back.
    with open(seen, "a") as fh:
        fh.write(json.dumps(str(updated_at.start_value)) + "\\n")
    with open(data) as fh:
        for line in fh:
            row = json.loads(line)
            row["updated_at"] = datetime.fromisoformat(row["updated_at"])
            yield row


def plain():
    return [1, 2]
"""


@pytest.fixture
def module(tmp_path: Path) -> str:
    name = f"dltsrc_{uuid.uuid4().hex}"
    (tmp_path / f"{name}.py").write_text(MODULE)
    return name


def read(tmp_path: Path, config: dict[str, Any], chunk_size: int = 3) -> list[pa.RecordBatch]:
    source = make_source(
        dlt_backed_spec({"type": "dlt", **config}, tmp_path), read_all_as_text=True, env={}
    )
    chunks = list(source.chunks(chunk_size))
    assert all(not c.rereadable and c.file_sha256 is None for c in chunks)
    return [c.batch for c in chunks]


def test_a_resource_of_dicts(tmp_path: Path, module: str) -> None:
    batches = read(tmp_path, {"ref": f"{module}:orders", "args": {"n": 7}})
    assert [b.num_rows for b in batches] == [3, 3, 1]
    assert batches[0].schema.field("id").type == pa.int64()
    assert [r["name"] for b in batches for r in b.to_pylist()] == [f"n{i}" for i in range(1, 8)]


def test_a_resource_object_without_args_and_arrow_items(tmp_path: Path, module: str) -> None:
    batches = read(tmp_path, {"ref": f"{module}.arrow_rows"}, chunk_size=4)
    assert [b.num_rows for b in batches] == [4, 3]
    assert [v for b in batches for v in b.column("id").to_pylist()] == list(range(1, 8))


def test_a_source_needs_its_resource_named(tmp_path: Path, module: str) -> None:
    with pytest.raises(SourceConfigError, match="orders, customers; choose one"):
        read(tmp_path, {"ref": f"{module}:shop"})
    with pytest.raises(SourceConfigError, match="no resource 'nope'"):
        read(tmp_path, {"ref": f"{module}:shop", "resource": "nope"})
    batches = read(tmp_path, {"ref": f"{module}:shop", "resource": "customers"})
    assert [r["name"] for b in batches for r in b.to_pylist()] == ["c1", "c2"]


def test_a_wrong_resource_name_and_a_non_dlt_ref(tmp_path: Path, module: str) -> None:
    with pytest.raises(SourceConfigError, match="is the resource 'orders'"):
        read(tmp_path, {"ref": f"{module}:orders", "resource": "customers"})
    with pytest.raises(SourceConfigError, match="not a dlt source or resource"):
        read(tmp_path, {"ref": f"{module}:plain"})
    with pytest.raises(SourceConfigError) as caught:
        read(tmp_path, {"ref": f"{module}:missing"})
    assert caught.value.code == "DPONE_SOURCE_CALLABLE_IMPORT"


def test_an_exception_in_the_resource_names_only_its_class(tmp_path: Path, module: str) -> None:
    with pytest.raises(SourceError) as caught:
        read(tmp_path, {"ref": f"{module}:broken"})
    assert caught.value.code == "DPONE_SOURCE_CALLABLE_FAILED"
    assert "RuntimeError" in caught.value.message
    assert "secret-value" not in json.dumps(caught.value.to_json())


def test_the_committed_cursor_is_typed_for_the_resource(tmp_path: Path, module: str) -> None:
    data, seen = tmp_path / "events.jsonl", tmp_path / "seen.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": i, "updated_at": f"2026-01-0{i}T10:00:00+00:00"}) + "\n"
            for i in range(1, 6)
        )
    )
    config = {
        "type": "dlt",
        "ref": f"{module}:events",
        "args": {"data": str(data), "seen": str(seen)},
        "incremental": {"cursor_column": "updated_at", "initial_value": None},
    }
    cursor = ColumnSpec("updated_at", "timestamp", timezone=True)
    source = make_source(dlt_backed_spec(config, tmp_path, cursor), read_all_as_text=True, env={})

    everything = [r["id"] for c in source.chunks(10) for r in c.batch.to_pylist()]
    newer = [
        r["id"]
        for c in source.chunks(10, after="2026-01-03T10:00:00.000000Z")
        for r in c.batch.to_pylist()
    ]

    assert everything == [1, 2, 3, 4, 5]
    assert newer == [3, 4, 5]  # dlt's own filter, closed at the lower bound (dlt's >=)
    starts = [json.loads(line) for line in seen.read_text().splitlines()]
    assert starts == ["None", "2026-01-03 10:00:00+00:00"]


def test_a_dlt_resource_manifest_runs_incrementally(tmp_path: Path, module: str) -> None:
    data, seen = tmp_path / "events.jsonl", tmp_path / "seen.jsonl"

    def write(days: range) -> None:
        with data.open("a") as fh:
            for i in days:
                fh.write(json.dumps({"id": i, "updated_at": f"2026-01-0{i}T10:00:00+00:00"}))
                fh.write("\n")

    manifest = {
        "name": "events_dlt",
        "source": {
            "type": "dlt",
            "ref": f"{module}:events",
            "args": {"data": str(data), "seen": str(seen)},
            "incremental": {"cursor_column": "updated_at"},
        },
        "sink": {
            "type": "duckdb",
            "table": "events",
            "options": {
                "schema_contract": {
                    "enforcement": "strict",
                    "columns": {
                        "id": {"type": "integer", "nullable": False},
                        "updated_at": {"type": "timestamp", "timezone": True},
                    },
                }
            },
        },
    }
    (tmp_path / "manifest.yaml").write_text(json.dumps(manifest))
    args = ["run", str(tmp_path / "manifest.yaml"), "--format", "json"]

    write(range(1, 4))
    first = json.loads(CliRunner().invoke(cli, args, env={}).stdout)
    write(range(4, 6))
    second = json.loads(CliRunner().invoke(cli, args, env={}).stdout)

    assert (first["status"], second["status"]) == ("succeeded", "succeeded")
    # The boundary row comes back (>=) and is de-duplicated: read, skipped, not loaded twice.
    assert (second["rows"]["read"], second["rows"]["skipped"]) == (3, 1)
    assert second["rows"]["loaded"] == 2
    with duckdb.connect(str(tmp_path / ".dpone" / "events_dlt.duckdb"), read_only=True) as con:
        ids = [r[0] for r in con.sql("SELECT id FROM dpone.events ORDER BY id").fetchall()]
    assert ids == [1, 2, 3, 4, 5]
    starts = [json.loads(line) for line in seen.read_text().splitlines()]
    assert starts == ["None", "2026-01-03 10:00:00+00:00"]
