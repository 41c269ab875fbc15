"""``dpone.testing``'s in-memory source and sink keep the promises of the real ones
(``connectors/base.py``), so a unit test of a manifest through them means what it says."""

from __future__ import annotations

import doctest
import textwrap
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

import dpone.testing
from dpone.connectors.base import KeyedSink, LoadSpec, Sink, Source
from dpone.connectors.errors import SinkSchemaError, SinkUnavailable, SourceUnavailable
from dpone.testing import MemorySink, MemorySource

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def _spec(load_id: str, mode: str = "append", keys: tuple[str, ...] = ()) -> LoadSpec:
    unique = ("id",) if mode == "merge" else ()
    return LoadSpec("pipe", "run-1", load_id, SCHEMA, mode, unique, keys=keys)  # type: ignore[arg-type]


def _load(sink: MemorySink, load_id: str, rows: list[tuple[int, str]], **spec: object) -> str:
    load = sink.begin(_spec(load_id, **spec))  # type: ignore[arg-type]
    load.write(pa.record_batch({"id": [r[0] for r in rows], "name": [r[1] for r in rows]}))
    load.commit()
    return load_id


def _table(sink: MemorySink) -> list[tuple[int, str]]:
    assert sink.table is not None
    return [(r["id"], r["name"]) for r in sink.table.to_pylist()]


def test_the_docstring_examples_hold() -> None:
    result = doctest.testmod(dpone.testing, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 8
    assert result.failed == 0


def test_the_fakes_keep_the_protocols() -> None:
    assert isinstance(MemorySource([]), Source)
    assert isinstance(MemorySink(), Sink)
    assert isinstance(MemorySink(), KeyedSink)


# --- source ---------------------------------------------------------------------------------------


def test_dicts_are_typed_together_and_chunked() -> None:
    rows = [{"id": i, "amount": Decimal(f"{i}.25") if i != 2 else None} for i in range(1, 6)]
    chunks = list(MemorySource(rows, name="orders").chunks(2))

    assert [c.num_rows for c in chunks] == [2, 2, 1]
    assert [c.first_row for c in chunks] == [1, 3, 5]
    assert {c.partition for c in chunks} == {"orders"}
    assert all(c.file_sha256 is None and not c.rereadable for c in chunks)
    # The NULL of chunk 1 did not decide the type: every chunk holds the same schema.
    assert {c.batch.schema for c in chunks} == {chunks[2].batch.schema}
    assert chunks[0].batch.column("amount").to_pylist() == [Decimal("1.25"), None]


def test_tables_and_batches_are_read_in_order_and_re_chunked() -> None:
    first = pa.table({"id": [1, 2, 3]})
    second = pa.record_batch({"id": [4, 5]})
    source = MemorySource([first, second])

    chunks = list(source.chunks(4))

    assert [c.batch.column("id").to_pylist() for c in chunks] == [[1, 2, 3, 4], [5]]
    assert source.identity == "memory:memory"
    assert source.chunks_read == 2
    assert [c.num_rows for c in MemorySource(first).chunks(2)] == [2, 1]


def test_it_fails_at_the_chunk_it_was_told_and_not_before() -> None:
    source = MemorySource(pa.table({"id": list(range(10))}), fail_at=3)
    chunks = source.chunks(3)

    assert [next(chunks).num_rows, next(chunks).num_rows] == [3, 3]
    with pytest.raises(SourceUnavailable, match="fail at chunk 3"):
        next(chunks)
    assert source.chunks_read == 2


def test_a_source_shorter_than_fail_at_fails_after_its_last_chunk() -> None:
    chunks = MemorySource([{"id": 1}], fail_at=5, error=KeyboardInterrupt()).chunks(10)

    assert next(chunks).num_rows == 1
    with pytest.raises(KeyboardInterrupt):
        next(chunks)


def test_a_source_refuses_what_it_cannot_read() -> None:
    with pytest.raises(TypeError):
        MemorySource([pa.table({"id": [1]}), "not rows"])
    with pytest.raises(ValueError, match="from 1"):
        MemorySource([], fail_at=0)
    with pytest.raises(ValueError, match="positive"):
        list(MemorySource([]).chunks(0))


# --- sink -----------------------------------------------------------------------------------------


def test_staged_rows_are_invisible_until_the_commit() -> None:
    sink = MemorySink()
    load = sink.begin(_spec("l1"))
    load.write(pa.record_batch({"id": [1], "name": ["a"]}))

    assert sink.table is None
    assert sink.existing_schema() is None
    assert sink.committed_load("l1") is None
    assert list(sink.staged) == ["l1"]

    marker = load.commit(cursor_to="c-1")

    assert (marker.rows, marker.cursor_to, marker.target) == (1, "c-1", "memory.rows")
    assert sink.committed_load("l1") == marker
    assert [load.marker for load in sink.loads] == [marker]
    assert sink.existing_schema() == SCHEMA
    assert sink.staged == {}
    assert load.commit() == marker  # twice: the same marker


def test_append_replace_and_merge_apply_their_strategy() -> None:
    sink = MemorySink()
    _load(sink, "l1", [(1, "a"), (2, "b")])
    _load(sink, "l2", [(3, "c")])
    assert _table(sink) == [(1, "a"), (2, "b"), (3, "c")]

    # merge: the target's rows of a staged key are replaced; the last staged row of a key wins
    _load(sink, "l3", [(2, "B"), (4, "d"), (2, "BB")], mode="merge")
    assert sorted(_table(sink)) == [(1, "a"), (2, "BB"), (3, "c"), (4, "d")]
    assert sink.loads[-1].marker.rows == 3  # the rows handed over, before de-duplication

    _load(sink, "l4", [(9, "z")], mode="replace")
    assert _table(sink) == [(9, "z")]
    assert [load.marker.load_id for load in sink.loads] == ["l1", "l2", "l3", "l4"]


def test_a_load_id_commits_once() -> None:
    sink = MemorySink()
    _load(sink, "l1", [(1, "a")])
    marker = sink.loads[0].marker

    again = sink.begin(_spec("l1"))
    again.write(pa.record_batch({"id": [2], "name": ["b"]}))

    assert again.commit() == marker
    assert _table(sink) == [(1, "a")]


def test_idempotency_keys_commit_with_the_rows_and_only_once() -> None:
    sink = MemorySink()
    _load(sink, "l1", [(1, "a")], keys=("k1", "k2"))

    assert sink.committed_keys(["k1", "k3"]) == {"k1"}
    with sink.session():
        load = sink.begin(_spec("l2", keys=("k2",)))
        load.write(pa.record_batch({"id": [2], "name": ["b"]}))
        with pytest.raises(Exception, match="DPONE_SINK_KEY_ALREADY_COMMITTED"):
            load.commit()
    assert sink.committed_load("l2") is None
    assert _table(sink) == [(1, "a")]
    assert sink.aborted == ["l2"]


def test_existing_keys_say_which_probe_rows_the_table_holds() -> None:
    sink = MemorySink()
    probe = pa.table({"id": [1, 5, 2]})
    assert sink.existing_keys(["id"], probe).to_pylist() == [False, False, False]

    _load(sink, "l1", [(1, "a"), (2, "b"), (2, "b2")])

    assert sink.existing_keys(["id"], probe).to_pylist() == [True, False, True]


def test_abort_and_cleanup_drop_what_was_staged() -> None:
    sink = MemorySink()
    dropped = sink.begin(_spec("l1"))
    dropped.write(pa.record_batch({"id": [1], "name": ["a"]}))
    dropped.abort()
    sink.begin(_spec("l2"))
    kept = sink.begin(_spec("l3"))

    assert sink.cleanup_abandoned("pipe", keep_load_id="l3") == ["l2"]
    assert sink.cleanup_abandoned("other") == []
    assert sink.aborted == ["l1", "l2"]
    assert list(sink.staged) == ["l3"]
    assert sink.table is None
    kept.abort()


@pytest.mark.parametrize("point", ["begin", "stage", "commit"])
def test_it_fails_where_it_was_told_with_nothing_visible(point: str) -> None:
    sink = MemorySink(fail_at=point)  # type: ignore[arg-type]
    _load(MemorySink(), "unrelated", [(7, "x")])

    with pytest.raises(SinkUnavailable, match=f"fail at {point}"):
        _load(sink, "l1", [(1, "a")])

    assert sink.table is None
    assert sink.committed_load("l1") is None
    assert sink.staged == {}
    assert sink.aborted == ([] if point == "begin" else ["l1"])
    sink.fail_at = None
    _load(sink, "l1", [(1, "a")])
    assert _table(sink) == [(1, "a")]


def test_a_given_error_is_raised_as_it_is() -> None:
    sink = MemorySink(fail_at="commit", error=KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        _load(sink, "l1", [(1, "a")])
    assert sink.table is None


def test_rows_that_do_not_fit_the_load_are_refused_as_the_real_sinks_refuse_them() -> None:
    sink = MemorySink()
    load = sink.begin(_spec("l1", mode="merge"))
    with pytest.raises(SinkSchemaError, match="'extra'"):
        load.write(pa.record_batch({"id": [1], "extra": ["x"]}))
    with pytest.raises(Exception, match="NULL"):
        load.write(pa.record_batch({"id": pa.array([None], pa.int64()), "name": ["a"]}))


def test_the_module_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "pipelines" / "orders"
    folder.mkdir(parents=True)
    (folder / "manifest.yaml").write_text(
        """
kind: dpone.manifest.v1
name: orders
runtime: {work_dir: .dpone}
source: {type: file, format: csv, path: data/*.csv}
sink:
  type: duckdb
  dataset: analytics
  table: orders
  options:
    schema_contract:
      enforcement: quarantine
      columns:
        id: {type: integer, nullable: false}
        amount: {type: decimal, precision: 12, scale: 2, nullable: false}
""",
        encoding="utf-8",
    )
    doc = dpone.testing.__doc__ or ""
    example = textwrap.dedent(doc.split("::\n", 1)[1].split("\n\nThe DLQ", 1)[0])
    namespace: dict[str, object] = {}
    monkeypatch.chdir(tmp_path)

    exec(compile(example, "dpone.testing example", "exec"), namespace)
    namespace["test_an_amount_with_three_decimals_is_quarantined"]()  # type: ignore[operator]

    assert (folder / ".dpone" / "dlq").is_dir()  # the DLQ is real: the bad row is on disk
