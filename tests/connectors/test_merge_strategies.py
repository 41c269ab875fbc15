"""The merge strategies of SPEC §13 and the load id column, against a DuckDB file on disk and
the real PostgreSQL server: two loads, a change, a delete, a re-run that changes nothing; the
filesystem sink's refusal; the dlt sink through dlt's own merge into its DuckDB destination."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from dpone.connectors import LoadSpec
from dpone.connectors.base import Sink
from dpone.connectors.errors import SinkConfigError

from .sinkkit import PIPELINE, StepClock, Target

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("day", pa.int64()),
        pa.field("name", pa.string()),
        pa.field("gone", pa.bool_()),
    ]
)
Row = tuple[int, int, str | None, bool | None]


def at(day: int) -> datetime:
    return datetime(2026, 3, day, tzinfo=UTC)


@pytest.fixture(params=["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)])
def sql(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    """The two SQL sinks, each with an independent reader of its table."""
    if request.param == "duckdb":
        config = {"type": "duckdb", "database": "warehouse.duckdb", "dataset": "analytics"}
        return Target("duckdb", tmp_path, {**config, "table": "orders"})
    schema = request.getfixturevalue("pg_schema")
    url = request.getfixturevalue("pg_url")
    return Target(
        "postgres", tmp_path, {"type": "postgres", "dataset": schema, "table": "orders"}, url
    )


def load(sink: Sink, load_id: str, rows: list[Row], **strategy: Any) -> None:
    spec = LoadSpec(
        pipeline=PIPELINE,
        run_id=f"run-{load_id}",
        load_id=load_id,
        schema=SCHEMA,
        mode=strategy.pop("mode", "merge"),
        **strategy,
    )
    staged = sink.begin(spec)
    arrays = [pa.array([r[i] for r in rows], f.type) for i, f in enumerate(SCHEMA)]
    staged.write(pa.record_batch(arrays, schema=SCHEMA))
    staged.commit()


def current(target: Target) -> list[tuple[Any, ...]]:
    """(id, day, name) of the target's rows, sorted."""
    return sorted((r["id"], r["day"], r["name"]) for r in target.rows() or [])


def history(target: Target) -> list[tuple[Any, ...]]:
    """(id, name, valid_from, valid_to) of every version, sorted."""
    table = target.read()
    assert table is not None
    return sorted(
        (
            r["id"],
            r["name"],
            r["_dpone_valid_from"].astimezone(UTC),
            None if r["_dpone_valid_to"] is None else r["_dpone_valid_to"].astimezone(UTC),
        )
        for r in table.to_pylist()
    )


UPSERT = {"unique_key": ("id",), "deleted_column": "gone"}


def test_upsert_changes_deletes_and_a_rerun_changes_nothing(sql: Target, clock: StepClock) -> None:
    sink = sql.sink(clock=clock)
    load(sink, "l1", [(1, 1, "a", False), (2, 1, "b", None), (3, 1, "c", False)], **UPSERT)
    assert current(sql) == [(1, 1, "a"), (2, 1, "b"), (3, 1, "c")]
    second: list[Row] = [
        (2, 2, "B", False),
        (3, 2, "c", True),
        (4, 2, "d", False),
        (2, 2, "BB", None),
    ]
    load(sink, "l2", second, **UPSERT)
    # the last row of key 2 wins; key 3 is deleted and its row not loaded; key 1 untouched
    assert current(sql) == [(1, 1, "a"), (2, 2, "BB"), (4, 2, "d")]
    load(sink, "l3", second, **UPSERT)
    assert current(sql) == [(1, 1, "a"), (2, 2, "BB"), (4, 2, "d")]


DELETE_INSERT = {"merge_strategy": "delete-insert", "merge_key": ("day",), "deleted_column": "gone"}


def test_delete_insert_replaces_every_row_of_a_merge_key(sql: Target, clock: StepClock) -> None:
    sink = sql.sink(clock=clock)
    load(sink, "l1", [(1, 1, "a", False), (2, 1, "b", False), (3, 2, "c", False)], **DELETE_INSERT)
    assert current(sql) == [(1, 1, "a"), (2, 1, "b"), (3, 2, "c")]
    # day 1 again: key 2 is no longer in it, key 1 changes, key 5 is new; a deleted row of
    # day 1 is not loaded; day 2 is not in the load and stays
    second: list[Row] = [(1, 1, "A", False), (5, 1, "e", None), (6, 1, "f", True)]
    load(sink, "l2", second, **DELETE_INSERT)
    assert current(sql) == [(1, 1, "A"), (3, 2, "c"), (5, 1, "e")]
    load(sink, "l3", second, **DELETE_INSERT)
    assert current(sql) == [(1, 1, "A"), (3, 2, "c"), (5, 1, "e")]
    # with a unique_key too, the last row of each key is the one loaded
    load(sink, "l4", [(7, 3, "g", False), (7, 3, "G", False)], unique_key=("id",), **DELETE_INSERT)
    assert current(sql)[-1] == (7, 3, "G")
    assert len(current(sql)) == 4


SCD2 = {"merge_strategy": "scd2", "unique_key": ("id",), "deleted_column": "gone"}


def test_scd2_keeps_history(sql: Target, clock: StepClock) -> None:
    sink = sql.sink(clock=clock)
    first: list[Row] = [(1, 1, "a", False), (2, 1, "b", False), (3, 1, "c", False)]
    load(sink, "l1", first, valid_at=at(1), **SCD2)
    assert history(sql) == [(1, "a", at(1), None), (2, "b", at(1), None), (3, "c", at(1), None)]
    # key 1 identical, key 2 changed (its last row wins), key 3 deleted, key 4 new
    second: list[Row] = [
        (1, 1, "a", False),
        (2, 1, "x", False),
        (2, 1, "B", False),
        (3, 1, "c", True),
        (4, 1, "d", False),
    ]
    load(sink, "l2", second, valid_at=at(2), **SCD2)
    after = [
        (1, "a", at(1), None),
        (2, "B", at(2), None),
        (2, "b", at(1), at(2)),
        (3, "c", at(1), at(2)),
        (4, "d", at(2), None),
    ]
    assert history(sql) == after
    # the same rows again, later: nothing opens, nothing closes
    load(sink, "l3", second, valid_at=at(3), **SCD2)
    assert history(sql) == after
    # a key absent from the load stays open; a deleted key that comes back opens again
    load(sink, "l4", [(3, 1, "c", False)], valid_at=at(4), **SCD2)
    assert history(sql) == [*after[:4], (3, "c", at(4), None), after[4]]
    schema = sink.existing_schema()
    assert schema is not None
    assert schema.names == SCHEMA.names  # dpone's columns are its own


def test_scd2_without_a_boundary_uses_the_sinks_clock(sql: Target, clock: StepClock) -> None:
    sink = sql.sink(clock=clock)
    load(sink, "l1", [(1, 1, "a", False)], **SCD2)
    [(_, _, opened, closed)] = history(sql)
    assert datetime(2026, 1, 1, tzinfo=UTC) < opened < datetime(2026, 1, 2, tzinfo=UTC)
    assert closed is None


@pytest.mark.parametrize("mode", ["append", "merge"])
def test_load_columns_carry_the_load_id(target: Target, clock: StepClock, mode: str) -> None:
    sink = target.sink(clock=clock)
    keys = {"unique_key": ("id",)} if mode == "merge" else {}
    load(
        sink,
        "l1",
        [(1, 1, "a", False), (2, 1, "b", False)],
        mode=mode,
        load_columns=("load_id",),
        **keys,
    )
    load(
        sink,
        "l2",
        [(2, 2, "b", False), (3, 2, "c", False)],
        mode=mode,
        load_columns=("load_id",),
        **keys,
    )
    table = target.read()
    assert table is not None
    pairs = sorted((r["id"], r["_dpone_load_id"]) for r in table.to_pylist())
    if mode == "merge":
        assert pairs == [(1, "l1"), (2, "l2"), (3, "l2")]
    else:
        assert pairs == [(1, "l1"), (2, "l1"), (2, "l2"), (3, "l2")]
    schema = sink.existing_schema()
    assert schema is not None
    assert "_dpone_load_id" not in schema.names


@pytest.mark.parametrize(
    "strategy",
    [
        {"merge_strategy": "scd2", "unique_key": ("id",)},
        {"merge_strategy": "delete-insert", "merge_key": ("day",)},
        {"unique_key": ("id",), "deleted_column": "gone"},
    ],
)
def test_the_filesystem_sink_refuses_what_it_cannot_apply(
    tmp_path: Path, strategy: dict[str, Any]
) -> None:
    config = {"type": "filesystem", "path": "lake", "dataset": "analytics", "table": "orders"}
    sink = Target("filesystem", tmp_path, config).sink()
    with pytest.raises(SinkConfigError, match="upsert"):
        load(sink, "l1", [(1, 1, "a", False)], **strategy)


@pytest.mark.parametrize(
    ("strategy", "message"),
    [
        ({"merge_strategy": "delete-insert"}, "merge_key"),
        ({"merge_strategy": "scd2"}, "unique_key"),
        ({"unique_key": ("id",), "deleted_column": "name"}, "boolean"),
        ({"mode": "append", "merge_key": ("day",)}, "mode merge"),
    ],
)
def test_a_load_spec_refuses_merge_settings_that_do_not_fit(
    strategy: dict[str, Any], message: str
) -> None:
    with pytest.raises(SinkConfigError, match=message):
        LoadSpec(PIPELINE, "r", "l", SCHEMA, mode=strategy.pop("mode", "merge"), **strategy)


def test_the_dlt_sink_applies_dlts_own_scd2_and_delete_insert(tmp_path: Path) -> None:
    import duckdb

    from dpone.connectors.sinks.dlt import DltSink

    warehouse = tmp_path / "warehouse.duckdb"

    def sink(table: str) -> DltSink:
        return DltSink(
            destination="duckdb",
            dataset="analytics",
            table=table,
            pipeline=f"p_{table}",
            work_dir=tmp_path / "work",
            credentials=str(warehouse),
        )

    scd2 = {"merge_strategy": "scd2", "unique_key": ("id",), "load_columns": ("load_id",)}
    history_sink = sink("history")
    load(history_sink, "l1", [(1, 1, "a", False), (2, 1, "b", False)], valid_at=at(1), **scd2)
    second: list[Row] = [(1, 1, "A", False), (3, 1, "c", False)]
    load(history_sink, "l2", second, valid_at=at(2), **scd2)
    load(history_sink, "l3", second, valid_at=at(3), **scd2)
    replaced = sink("replaced")
    load(
        replaced,
        "l1",
        [(1, 1, "a", False), (2, 1, "b", False), (3, 2, "c", False)],
        **DELETE_INSERT,
    )
    load(replaced, "l2", [(1, 1, "A", False), (6, 1, "f", True)], **DELETE_INSERT)
    con = duckdb.connect(str(warehouse))
    try:
        versions = con.execute(
            "SELECT id, name, _dpone_valid_from, _dpone_valid_to, _dpone_load_id, "
            "_dpone_row_hash IS NOT NULL FROM analytics.history ORDER BY id, _dpone_valid_from"
        ).fetchall()
        rows = con.execute("SELECT id, day, name FROM analytics.replaced ORDER BY id").fetchall()
    finally:
        con.close()
    assert [
        (i, n, f.astimezone(UTC), t and t.astimezone(UTC), lid, h)
        for i, n, f, t, lid, h in versions
    ] == [
        (1, "a", at(1), at(2), "l1", True),
        (1, "A", at(2), None, "l2", True),
        (2, "b", at(1), None, "l1", True),  # absent from the load: stays open
        (3, "c", at(2), None, "l2", True),
    ]
    assert rows == [(1, 1, "A"), (3, 2, "c")]
