"""Every strategy and guarantee, against each real sink (DuckDB file, PostgreSQL, Parquet)."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from decimal import Decimal

import pyarrow as pa
import pytest

from dpone.connectors import LoadMarker, LoadSpec
from dpone.connectors.base import Sink, SinkLoad
from dpone.connectors.errors import SinkConfigError, SinkError, SinkSchemaError

from .sinkkit import PIPELINE, SCHEMA, StepClock, Target, batch, spec


def load(sink: Sink, load_spec: LoadSpec, *batches: pa.RecordBatch) -> LoadMarker:
    staged = sink.begin(load_spec)
    for b in batches:
        staged.write(b)
    return staged.commit()


def row(i: int, name: str | None, amount: str | None) -> dict[str, object]:
    return {"id": i, "name": name, "amount": None if amount is None else Decimal(amount)}


def test_append_twice_and_markers(target: Target, clock: StepClock) -> None:
    sink = target.sink(clock=clock)
    assert sink.existing_schema() is None
    assert target.last_marker() is None
    assert sink.committed_load("l1") is None

    m1 = load(sink, spec("l1", cursor="2026-01-01T00:00:00Z"), batch([(1, "a", "1.50")]))
    m2 = load(
        sink, spec("l2", cursor="2026-01-02"), batch([(2, "b", None)]), batch([(3, None, "3")])
    )

    assert target.rows() == [row(1, "a", "1.50"), row(2, "b", None), row(3, None, "3.00")]
    assert m1 == LoadMarker(
        load_id="l1",
        pipeline=PIPELINE,
        run_id="run-l1",
        rows=1,
        cursor_to="2026-01-01T00:00:00Z",
        committed_at=m1.committed_at,
        target=f"{target.dataset}.orders",
        mode="append",
    )
    assert m2.rows == 2
    assert m1.committed_at.startswith("2026-01-01T00:00:0")  # from the injected clock
    assert m1.committed_at < m2.committed_at
    assert sink.committed_load("l1") == m1
    assert target.last_marker() == m2
    assert target.last_marker("other_pipeline") is None
    schema = sink.existing_schema()
    assert schema is not None
    assert schema.names == ["id", "name", "amount"]
    assert schema.field("amount").type == pa.decimal128(18, 2)
    assert target.leftovers() == []


def test_replace(target: Target) -> None:
    sink = target.sink()
    load(sink, spec("l1"), batch([(1, "a", "1"), (2, "b", "2")]))
    load(sink, spec("l2", "replace"), batch([(7, "z", "7")]))
    assert target.rows() == [row(7, "z", "7.00")]
    load(sink, spec("l3", "replace"))  # an empty replace empties the table
    assert not target.rows()


def test_merge_twice_with_overlapping_keys(target: Target) -> None:
    sink = target.sink()
    load(sink, spec("l1", "merge"), batch([(1, "a", "1"), (2, "b", "2"), (3, "c", "3")]))
    # duplicates inside the load: the last occurrence wins, across batches too
    load(
        sink,
        spec("l2", "merge"),
        batch([(2, "b-old", "0"), (4, "d", "4")]),
        batch([(2, "b-new", "22"), (3, None, None)]),
    )
    assert target.rows() == [
        row(1, "a", "1.00"),
        row(2, "b-new", "22.00"),
        row(3, None, None),
        row(4, "d", "4.00"),
    ]
    load(sink, spec("l3", "merge"), batch([(4, "d2", "44"), (5, "e", "5"), (1, "a2", "11")]))
    assert target.rows() == [
        row(1, "a2", "11.00"),
        row(2, "b-new", "22.00"),
        row(3, None, None),
        row(4, "d2", "44.00"),
        row(5, "e", "5.00"),
    ]
    assert target.last_marker().rows == 3  # type: ignore[union-attr]
    assert target.leftovers() == []


def test_staged_rows_are_invisible_until_commit(target: Target) -> None:
    sink = target.sink()
    first = sink.begin(spec("l1"))
    first.write(batch([(1, "a", "1")]))
    assert target.rows() is None  # the target does not even exist yet
    first.commit()

    staged = sink.begin(spec("l2", "replace"))
    staged.write(batch([(9, "new", "9")]))
    assert target.rows() == [row(1, "a", "1.00")]
    assert sink.committed_load("l2") is None
    staged.commit()
    assert target.rows() == [row(9, "new", "9.00")]


def test_abort_leaves_the_target_exactly_as_before(target: Target) -> None:
    sink = target.sink()
    load(sink, spec("l1"), batch([(1, "a", "1")]))
    before = target.read()

    staged = sink.begin(spec("l2", "merge"))
    staged.write(batch([(1, "changed", "5"), (2, "b", "2")]))
    staged.abort()
    staged.abort()  # idempotent

    assert target.read() == before
    assert sink.committed_load("l2") is None
    assert target.last_marker().load_id == "l1"  # type: ignore[union-attr]
    assert target.leftovers() == []
    with pytest.raises(SinkError) as info:
        staged.write(batch([(3, "c", "3")]))
    assert info.value.code == "DPONE_SINK_LOAD_CLOSED"


def test_context_manager_aborts_unless_committed(target: Target) -> None:
    sink = target.sink()

    def fail_inside() -> None:
        with sink.begin(spec("l1")) as staged:  # type: ignore[attr-defined]
            staged.write(batch([(1, "a", "1")]))
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        fail_inside()
    assert target.rows() is None
    assert target.leftovers() == []


def test_commit_is_idempotent_per_load_id(target: Target) -> None:
    sink = target.sink()
    staged = sink.begin(spec("l1"))
    staged.write(batch([(1, "a", "1")]))
    marker = staged.commit()
    assert staged.commit() == marker

    replay: SinkLoad = target.sink().begin(spec("l1"))
    replay.write(batch([(1, "a", "1"), (2, "dup", "2")]))
    assert replay.commit() == marker  # no-op: the marker already exists
    assert target.rows() == [row(1, "a", "1.00")]
    assert target.leftovers() == []


def test_new_columns_evolve_the_target(target: Target) -> None:
    sink = target.sink()
    load(sink, spec("l1"), batch([(1, "a", "1")]))
    wider = SCHEMA.append(pa.field("note", pa.string()))
    extra = batch([(2, "b", "2")]).append_column("note", pa.array(["hello"]))
    load(sink, spec("l2", schema=wider), extra)
    rows = target.rows()
    assert rows is not None
    assert [(r["id"], r.get("note")) for r in rows] == [(1, None), (2, "hello")]
    schema = sink.existing_schema()
    assert schema is not None
    assert "note" in schema.names


def test_batches_are_conformed_to_the_load_schema(target: Target) -> None:
    sink = target.sink()
    staged = sink.begin(spec("l1"))
    # columns reordered, a missing nullable column, int32 ids: all conformed, nothing lost
    staged.write(pa.record_batch({"name": ["a"], "id": pa.array([1], pa.int32())}))
    with pytest.raises(SinkSchemaError):
        staged.write(pa.record_batch({"id": pa.array([2], pa.int64()), "secret": ["x"]}))
    with pytest.raises(SinkSchemaError) as info:
        staged.write(pa.record_batch({"id": pa.array([None], pa.int64())}))
    assert "'id'" in str(info.value)
    staged.commit()
    assert target.rows() == [row(1, "a", None)]


def test_merge_rejects_null_keys_without_values(target: Target) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])
    staged = target.sink().begin(spec("l1", "merge", schema=schema))
    with pytest.raises(SinkError) as info:
        staged.write(pa.record_batch({"id": pa.array([None], pa.int64()), "name": ["secret"]}))
    assert info.value.code == "DPONE_SINK_MERGE_NULL_KEY"
    assert "secret" not in str(info.value)
    staged.abort()


def test_types_round_trip(target: Target) -> None:
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("small", pa.int16()),
            pa.field("ratio", pa.float64()),
            pa.field("flag", pa.bool_()),
            pa.field("price", pa.decimal128(38, 9)),
            pa.field("day", pa.date32()),
            pa.field("at", pa.time64("us")),
            pa.field("ts_utc", pa.timestamp("us", tz="UTC")),
            pa.field("ts_naive", pa.timestamp("us")),
            pa.field("raw", pa.binary()),
            pa.field("text", pa.string()),
        ]
    )
    values = {
        "id": 1,
        "small": -3,
        "ratio": 0.1,
        "flag": True,
        "price": Decimal("12345678901234567890.123456789"),
        "day": date(2026, 2, 28),
        "at": time(23, 59, 59, 999999),
        "ts_utc": datetime(2026, 3, 1, 12, 30, tzinfo=UTC),
        "ts_naive": datetime(2026, 3, 1, 12, 30),
        "raw": b"\x00\xff",
        "text": 'héllo, "world"\n',
    }
    sink = target.sink()
    load(sink, spec("l1", schema=schema), pa.RecordBatch.from_pylist([values], schema=schema))
    got = target.rows()
    assert got is not None
    (one,) = got
    if target.kind == "postgres":  # psycopg2 gives a datetime with a fixed offset
        one["ts_utc"] = one["ts_utc"].astimezone(UTC)
        one["raw"] = bytes(one["raw"])
    assert one == values
    existing = sink.existing_schema()
    assert existing is not None
    for field in schema:
        assert existing.field(field.name).type == field.type, field.name
    assert existing.field("id").nullable is False


def test_load_spec_validation() -> None:
    with pytest.raises(SinkConfigError) as info:
        spec("l1", "merge", schema=SCHEMA).__class__(
            pipeline=PIPELINE, run_id="r", load_id="l1", schema=SCHEMA, mode="merge"
        )
    assert info.value.code == "DPONE_MANIFEST_MERGE_WITHOUT_KEY"
    for bad in ({"load_id": "../x"}, {"run_id": "a b"}):
        with pytest.raises(SinkConfigError):
            LoadSpec(
                **{"pipeline": PIPELINE, "run_id": "r", "load_id": "l", "schema": SCHEMA, **bad}
            )
    with pytest.raises(SinkConfigError):
        LoadSpec(PIPELINE, "r", "l", SCHEMA, "merge", ("nope",))
    with pytest.raises(SinkConfigError):
        LoadSpec(PIPELINE, "r", "l", SCHEMA.append(pa.field("_dpone_x", pa.int8())))
    with pytest.raises(SinkConfigError):
        LoadSpec(PIPELINE, "r", "l", SCHEMA, "upsert")  # type: ignore[arg-type]


def test_markers_follow_commit_order_under_a_frozen_clock(target: Target) -> None:
    frozen = datetime(2026, 1, 1, tzinfo=UTC)
    sink = target.sink(clock=lambda: frozen)
    load(sink, spec("z-first"), batch([(1, "a", "1")]))
    load(sink, spec("a-second", "replace"), batch([(2, "b", "2")]))
    last = target.last_marker()
    assert last is not None
    assert last.load_id == "a-second"
    assert target.rows() == [row(2, "b", "2.00")]


def test_commit_can_set_the_cursor_known_only_at_the_end(target: Target) -> None:
    sink = target.sink()
    staged = sink.begin(spec("l1", cursor="ignored"))
    staged.write(batch([(1, "a", "1")]))
    marker = staged.commit(cursor_to="2026-05-01T00:00:00.000000Z")
    assert marker.cursor_to == "2026-05-01T00:00:00.000000Z"
    assert sink.committed_load("l1") == marker
    assert target.last_marker() == marker
