"""Infrastructure failures are typed, transient where a retry may help, and never leak
credentials or row values."""

from __future__ import annotations

import dataclasses
import errno
from pathlib import Path

import duckdb
import psycopg2
import pyarrow as pa
import pytest

from dpone.connectors import make_sink
from dpone.connectors.errors import (
    CONNECTOR_CODES,
    SinkConfigError,
    SinkDiskFull,
    SinkLocked,
    SinkReadOnly,
    SinkUnavailable,
)
from dpone.connectors.sinks.duckdb import DuckDbSink
from dpone.errors import DponeError, ManifestError, SecretError, TransientError
from dpone.manifest.specs import DuckdbSinkSpec, FilesystemSinkSpec

from .sinkkit import PIPELINE, batch, spec
from .specs import build_sink, sink_spec
from .sqlproject import hold_duckdb_file


def warehouse(base: Path, dataset: str = "analytics") -> DuckdbSinkSpec:
    config = {"type": "duckdb", "database": "w.duckdb", "dataset": dataset, "table": "orders"}
    found = sink_spec(config, base, name=PIPELINE)
    assert isinstance(found, DuckdbSinkSpec)
    return found


def test_read_only_duckdb_is_a_typed_transient_error(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    sink = DuckDbSink(warehouse(tmp_path))
    staged = sink.begin(spec("l1"))
    staged.write(batch([(1, "a", "1")]))
    staged.commit()

    read_only = DuckDbSink(warehouse(tmp_path), config={"access_mode": "READ_ONLY"})
    assert read_only.existing_schema() is not None  # reads still work
    with pytest.raises(SinkReadOnly) as info:
        read_only.begin(spec("l2"))
    assert info.value.code == "DPONE_SINK_READ_ONLY"
    assert isinstance(info.value, TransientError)
    assert str(path) not in str(info.value)
    assert read_only.committed_load("l1") is not None


def test_duckdb_file_held_by_another_process_is_locked(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    with hold_duckdb_file(path), pytest.raises(SinkLocked) as info:
        DuckDbSink(warehouse(tmp_path)).begin(spec("l1"))
    assert info.value.code == "DPONE_SINK_LOCKED"
    assert isinstance(info.value, TransientError)
    assert info.value.fixes


def test_filesystem_disk_full_is_typed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow.parquet as pq

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    sink = build_sink(
        {"type": "filesystem", "path": "lake", "dataset": "a", "table": "orders"},
        tmp_path,
        name=PIPELINE,
    )
    staged = sink.begin(spec("l1"))
    monkeypatch.setattr(pq, "ParquetWriter", full)  # the module the sink writes through
    with pytest.raises(SinkDiskFull) as info:
        staged.write(batch([(1, "a", "1")]))
    assert info.value.code == "DPONE_SINK_DISK_FULL"
    assert staged.state == "aborted"  # type: ignore[attr-defined]
    assert not (tmp_path / "lake" / "_dpone_staging" / "l1").exists()


@pytest.mark.postgres
def test_postgres_unreachable_never_leaks_the_connection_string(tmp_path: Path) -> None:
    secret = "postgresql://loader:hunter2@127.0.0.1:1/test"
    sink = build_sink(
        {"type": "postgres", "dataset": "a", "table": "orders", "connection": secret},
        tmp_path,
        name=PIPELINE,
    )
    assert "hunter2" not in sink.identity
    assert "hunter2" not in repr(sink)
    for call in (
        sink.existing_schema,
        lambda: sink.begin(spec("l1")),
        lambda: sink.committed_load("l1"),
    ):
        with pytest.raises(SinkUnavailable) as info:
            call()
        assert "hunter2" not in str(info.value)
        assert "127.0.0.1" not in str(info.value)
        assert info.value.__cause__ is None
        assert isinstance(info.value, TransientError)


@pytest.mark.postgres
def test_postgres_read_only_server_is_typed(pg_url: str, pg_schema: str, tmp_path: Path) -> None:
    url = pg_url + "?options=-c%20default_transaction_read_only%3Don"
    sink = build_sink(
        {"type": "postgres", "dataset": pg_schema, "table": "orders", "connection": url},
        tmp_path,
        name=PIPELINE,
    )

    def attempt() -> None:
        staged = sink.begin(spec("l1"))
        staged.write(batch([(1, "a", "1")]))
        staged.commit()

    with pytest.raises(SinkReadOnly) as info:
        attempt()
    assert info.value.code == "DPONE_SINK_READ_ONLY"
    assert "SQLSTATE 25006" in str(info.value)


@pytest.mark.postgres
def test_postgres_connection_dropped_mid_load(pg_url: str, pg_schema: str, tmp_path: Path) -> None:
    sink = build_sink(
        {"type": "postgres", "dataset": pg_schema, "table": "orders", "connection": pg_url},
        tmp_path,
        name=PIPELINE,
    )
    staged = sink.begin(spec("l1"))
    staged.write(batch([(1, "a", "1")]))
    with staged._conn.cursor() as cur:  # type: ignore[attr-defined]
        cur.execute("SELECT pg_backend_pid()")
        (pid,) = cur.fetchone()
    killer = psycopg2.connect(pg_url)
    try:
        killer.cursor().execute("SELECT pg_terminate_backend(%s)", (pid,))
        killer.commit()
    finally:
        killer.close()
    with pytest.raises(SinkUnavailable):
        staged.write(batch([(2, "b", "2")]))
    assert staged.state == "aborted"  # type: ignore[attr-defined]
    assert sink.committed_load("l1") is None
    assert sink.existing_schema() is None


def test_sink_config_errors(tmp_path: Path) -> None:
    # What the compiler refuses never reaches a connector.
    for config in (
        {"type": "bigquery", "table": "t"},
        {"type": "postgres", "table": "t"},
        {"type": "filesystem", "table": "t"},
        {"type": "filesystem", "path": "x", "table": "../up"},
    ):
        with pytest.raises(ManifestError):
            sink_spec(config, tmp_path, name=PIPELINE)
    # A spec built by hand gets the connector's own refusal.
    lake = sink_spec({"type": "filesystem", "path": "x", "table": "t"}, tmp_path, name=PIPELINE)
    assert isinstance(lake, FilesystemSinkSpec)
    with pytest.raises(DponeError):
        make_sink(dataclasses.replace(lake, table="../up"), env={})
    with pytest.raises(SinkConfigError) as unknown:
        make_sink(object(), env={})  # type: ignore[arg-type]
    assert "no sink connector" in str(unknown.value)
    # A secret the environment lacks is a preflight error (exit 2), before any connection.
    pg = {"type": "postgres", "connection": "${PG_URL_UNSET}", "table": "t"}
    with pytest.raises(SecretError) as info:
        build_sink(pg, tmp_path, name=PIPELINE)
    assert info.value.exit_code == 2


def test_default_duckdb_database_and_identities(tmp_path: Path) -> None:
    work = tmp_path / ".dpone"
    sink = build_sink({"type": "duckdb", "table": "orders"}, tmp_path, name=PIPELINE)
    assert isinstance(sink, DuckDbSink)
    assert sink.database == work / f"{PIPELINE}.duckdb"
    assert sink.identity == f"duckdb:.dpone/{PIPELINE}.duckdb:dpone.orders"
    assert str(tmp_path) not in sink.identity
    staged = sink.begin(spec("l1"))
    staged.write(batch([(1, "a", "1")]))
    staged.commit()
    con = duckdb.connect(str(work / f"{PIPELINE}.duckdb"))
    try:
        assert con.execute("SELECT id FROM dpone.orders").fetchall() == [(1,)]
    finally:
        con.close()
    lake = build_sink({"type": "filesystem", "path": "lake", "table": "t"}, tmp_path, name=PIPELINE)
    assert lake.identity == "filesystem:lake:dpone.t"


def test_every_error_class_has_a_listed_unique_code() -> None:
    import dpone.connectors.errors as errors

    classes = [
        obj
        for obj in vars(errors).values()
        if isinstance(obj, type)
        and issubclass(obj, DponeError)
        and obj.__module__ == errors.__name__
    ]
    codes = [cls.code for cls in classes]
    assert len(codes) == len(set(codes))
    assert set(codes) <= set(CONNECTOR_CODES)
    for cls in classes:
        assert cls.code.startswith("DPONE_")


def test_empty_write_is_a_no_op(tmp_path: Path) -> None:
    sink = DuckDbSink(warehouse(tmp_path, "a"))
    staged = sink.begin(spec("l1"))
    staged.write(pa.RecordBatch.from_pylist([], schema=batch([]).schema))
    marker = staged.commit()
    assert marker.rows == 0
    assert sink.existing_schema() is not None  # an empty load still creates the table


def test_every_code_raised_in_connectors_is_documented() -> None:
    import re

    from dpone.errors import MANIFEST_CODES

    root = Path(__file__).resolve().parents[2] / "dpone" / "connectors"
    used = set()
    for path in root.rglob("*.py"):
        used |= set(re.findall(r'"(DPONE_[A-Z_]+[A-Z])"', path.read_text()))
    known = set(CONNECTOR_CODES) | set(MANIFEST_CODES) | {"DPONE_SECRET_UNRESOLVED"}
    assert used - known == set()
