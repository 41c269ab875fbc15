"""One harness over the three real sinks: build one, read its target back independently."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import psycopg2
import pyarrow as pa
import pyarrow.parquet as pq

from dpone.connectors import LoadSpec
from dpone.connectors.base import LoadMarker, Sink
from dpone.connectors.sinks.filesystem import FilesystemSink
from dpone.connectors.sinks.fsmarkers import LOADS, read_marker

from .specs import build_sink

PIPELINE = "orders_daily"
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("amount", pa.decimal128(18, 2)),
    ]
)


class StepClock:
    """A deterministic clock: each call is one second after the previous one."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def batch(
    rows: list[tuple[int, str | None, str | None]], schema: pa.Schema = SCHEMA
) -> pa.RecordBatch:
    from decimal import Decimal

    return pa.record_batch(
        [
            pa.array([r[0] for r in rows], pa.int64()),
            pa.array([r[1] for r in rows], pa.string()),
            pa.array([None if r[2] is None else Decimal(r[2]) for r in rows], pa.decimal128(18, 2)),
        ],
        schema=schema,
    )


def spec(
    load_id: str, mode: str = "append", *, schema: pa.Schema = SCHEMA, cursor: str | None = None
) -> LoadSpec:
    return LoadSpec(
        pipeline=PIPELINE,
        run_id=f"run-{load_id}",
        load_id=load_id,
        schema=schema,
        mode=mode,  # type: ignore[arg-type]
        unique_key=("id",) if mode == "merge" else (),
        cursor_to=cursor,
    )


@dataclass
class Target:
    """A sink kind plus an independent reader of its target table."""

    kind: str
    base: Path
    config: dict[str, Any]
    url: str | None = None

    def sink(self, **kwargs: Any) -> Sink:
        config = self.config if self.url is None else {**self.config, "connection": self.url}
        return build_sink(config, self.base, name=PIPELINE, **kwargs)

    @property
    def dataset(self) -> str:
        return str(self.config["dataset"])

    def rows(self) -> list[dict[str, Any]] | None:
        """The target's rows sorted by id, or None when the table does not exist."""
        table = self.read()
        if table is None:
            return None
        return sorted(table.to_pylist(), key=lambda r: (r["id"], str(r)))

    def read(self) -> pa.Table | None:
        if self.kind == "duckdb":
            path = self.base / self.config["database"]
            if not path.exists():
                return None
            con = duckdb.connect(str(path))
            try:
                found = con.execute(
                    "SELECT count(*) FROM information_schema.tables "
                    "WHERE table_schema = ? AND table_name = 'orders'",
                    [self.dataset],
                ).fetchall()
                if not found[0][0]:
                    return None
                return con.sql(f'SELECT * FROM "{self.dataset}".orders').to_arrow_table()
            finally:
                con.close()
        if self.kind == "postgres":
            assert self.url is not None
            conn = psycopg2.connect(self.url)
            try:
                cur = conn.cursor()
                cur.execute("SELECT to_regclass(%s)", (f'"{self.dataset}".orders',))
                if cur.fetchone()[0] is None:
                    return None
                cur.execute(f'SELECT * FROM "{self.dataset}".orders')
                names = [d[0] for d in cur.description]
                return pa.Table.from_pylist(
                    [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
                )
            finally:
                conn.close()
        sink = self.sink()
        assert isinstance(sink, FilesystemSink)
        files = sink.committed_files()
        if not files:
            return None if not self.markers() else pa.table({"id": pa.array([], pa.int64())})
        return pa.concat_tables([pq.read_table(f) for f in files], promote_options="default")

    def markers(self, pipeline: str = PIPELINE) -> list[LoadMarker]:
        """The committed load markers of ``pipeline`` into the orders table, in commit order,
        read from the target itself (the marker table, or the marker files)."""
        columns = "load_id, pipeline, run_id, row_count, cursor_to, committed_at, target, load_mode"
        where = "WHERE pipeline = {p} AND target = {p} ORDER BY load_seq"
        target = f"{self.dataset}.orders"
        rows: list[tuple[Any, ...]]
        if self.kind == "duckdb":
            path = self.base / self.config["database"]
            if not path.exists():
                return []
            con = duckdb.connect(str(path))
            try:
                found = con.execute(
                    "SELECT count(*) FROM information_schema.tables "
                    "WHERE table_schema = ? AND table_name = '_dpone_loads'",
                    [self.dataset],
                ).fetchall()
                if not found[0][0]:
                    return []
                rows = con.execute(
                    f'SELECT {columns} FROM "{self.dataset}"._dpone_loads {where.format(p="?")}',
                    [pipeline, target],
                ).fetchall()
            finally:
                con.close()
        elif self.kind == "postgres":
            assert self.url is not None
            conn = psycopg2.connect(self.url)
            try:
                cur = conn.cursor()
                cur.execute("SELECT to_regclass(%s)", (f'"{self.dataset}"._dpone_loads',))
                if cur.fetchone()[0] is None:
                    return []
                cur.execute(
                    f'SELECT {columns} FROM "{self.dataset}"._dpone_loads {where.format(p="%s")}',
                    (pipeline, target),
                )
                rows = cur.fetchall()
            finally:
                conn.close()
        else:
            root = self.base / self.config["path"]
            docs = [read_marker(path, root) for path in (root / LOADS).glob("*.json")]
            docs.sort(key=lambda d: (int(d["seq"]), d["load_id"]))
            return [
                LoadMarker.from_json(d)
                for d in docs
                if d["pipeline"] == pipeline and d["target"] == target
            ]
        names = ("load_id", "pipeline", "run_id", "rows", "cursor_to", "committed_at", "target")
        return [
            LoadMarker.from_json({**dict(zip(names, r, strict=False)), "mode": r[7]}) for r in rows
        ]

    def last_marker(self, pipeline: str = PIPELINE) -> LoadMarker | None:
        """The most recently committed marker of ``pipeline`` into the orders table."""
        found = self.markers(pipeline)
        return found[-1] if found else None

    def leftovers(self) -> list[str]:
        """Staging that is still around (tables or folders)."""
        if self.kind == "duckdb":
            path = self.base / self.config["database"]
            if not path.exists():
                return []
            con = duckdb.connect(str(path))
            try:
                return [
                    r[0]
                    for r in con.execute(
                        "SELECT table_name FROM information_schema.tables "
                        "WHERE table_name LIKE '\\_dpone\\_stage\\_%' ESCAPE '\\'"
                    ).fetchall()
                ]
            finally:
                con.close()
        if self.kind == "postgres":
            assert self.url is not None
            conn = psycopg2.connect(self.url)
            try:
                cur = conn.cursor()
                cur.execute(
                    "SELECT relname FROM pg_class WHERE relname LIKE '\\_dpone\\_stage\\_%%'"
                    " AND relpersistence <> 't'"
                )
                return [r[0] for r in cur.fetchall()]
            finally:
                conn.close()
        staging = self.base / self.config["path"] / "_dpone_staging"
        return sorted(p.name for p in staging.iterdir()) if staging.is_dir() else []

    def final_files(self) -> list[str]:
        """Filesystem only: the table folder's files (valid once recovery ran)."""
        folder = self.base / self.config["path"] / self.dataset / "orders"
        return sorted(p.name for p in folder.glob("*.parquet"))
