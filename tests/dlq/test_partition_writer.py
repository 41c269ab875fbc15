"""A scale-out partition's DLQ writer (dpone/dlq/partition.py) and the driver's index built from
what the partitions report (RunWriter.adopt_described), on a real store on disk."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dpone.contracts.dlq import DlqPolicy
from dpone.contracts.reasons import ReasonCode
from dpone.dlq.errors import DlqError
from dpone.dlq.ledger import EntryColumns
from dpone.dlq.partition import (
    PartitionSegments,
    finish,
    partition_ids,
    partition_segment_name,
    partition_writer,
)
from dpone.dlq.refs import file_refs
from dpone.dlq.rejects import RejectedRow, rejected_rows
from dpone.dlq.store import DlqStore
from dpone.ids import is_ulid, ulid_time_ms
from dpone.testing import FrozenClock

STARTED = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
RUN, LOAD = "01JQ0000000000000000000RUN", "01JQ0000000000000000000LOD"


def _store(tmp_path: Path, **policy: Any) -> DlqStore:
    root = tmp_path / "dlq"
    return DlqStore(
        root, DlqPolicy(directory=str(root), **policy), clock=FrozenClock("2026-03-01T12:05:00Z")
    )


def _rows(path: str, first: int, count: int) -> list[RejectedRow]:
    return rejected_rows(
        file_refs(path, "ab" * 32, range(first, first + count)),
        ReasonCode.TYPE_MISMATCH,
        columns="amount",
        source_offsets=list(range(first, first + count)),
        source_partitions=path,
    )


def _partition(
    store: DlqStore, partition: int, chunks: list[list[RejectedRow]]
) -> PartitionSegments:
    writer = partition_writer(store, RUN, partition, STARTED)
    for chunk in chunks:
        writer.write_chunk(chunk)
    return finish(writer)


def test_partition_ids_are_ulids_of_the_run_start_ordered_by_partition_chunk_row() -> None:
    a = partition_ids(STARTED, 0, 0, 0, 3)
    assert a == partition_ids(STARTED, 0, 0, 0, 3)
    later = partition_ids(STARTED, 0, 1, 0, 1) + partition_ids(STARTED, 1, 0, 0, 1)
    assert all(is_ulid(i) for i in a + later)
    assert {ulid_time_ms(i) for i in a} == {int(STARTED.timestamp() * 1000)}
    assert a + later == sorted(a + later)
    assert partition_ids(STARTED, 0, 0, 1, 2) == a[1:]
    with pytest.raises(DlqError):
        partition_ids(STARTED, 2**20, 0, 0, 1)


def test_partitions_write_into_the_drivers_run_and_the_driver_indexes_what_they_report(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    driver = store.open_run(RUN, LOAD, pipeline="orders")
    p0 = _partition(store, 0, [_rows("a.csv", 1, 3), [], _rows("a.csv", 90, 2)])
    p1 = _partition(store, 1, [_rows("b.csv", 5, 4)])
    # A retried task writes the very same bytes under the very same names: a no-op.
    assert _partition(store, 1, [_rows("b.csv", 5, 4)]) == p1
    assert [d.name for d in p0.descriptors()] == [
        partition_segment_name(0, 0),
        partition_segment_name(0, 2),
    ]
    for found in (p0, p1):
        entries = (found.record_ids, found.sha256s, found.codes, found.columns)
        driver.adopt_described(found.descriptors(), entries)
    result = driver.close()
    assert result.record_count == 9
    index = store.read_index(RUN)
    assert index.status == "closed"
    assert len(index.segments) == 3
    # Every record reads back through the index, its segment's bytes checked.
    for record_id in p0.record_ids + p1.record_ids:
        record = store.read_record(RUN, record_id)
        assert record.created_at == "2026-03-01T12:00:00.000000Z"  # the run start, not now


def _adopting(tmp_path: Path) -> tuple[DlqStore, PartitionSegments]:
    store = _store(tmp_path)
    store.open_run(RUN, LOAD, pipeline="orders")
    return store, _partition(store, 0, [_rows("a.csv", 1, 3), _rows("a.csv", 50, 2)])


def _entries(found: PartitionSegments) -> EntryColumns:
    return (found.record_ids, found.sha256s, found.codes, found.columns)


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param(lambda f: replace(f, record_ids=f.record_ids[:-1]), id="an-entry-missing"),
        pytest.param(lambda f: replace(f, codes=("schema.bogus",) * 5), id="an-unknown-code"),
        pytest.param(
            lambda f: replace(f, record_ids=tuple(reversed(f.record_ids))), id="ids-out-of-place"
        ),
        pytest.param(
            lambda f: replace(f, segments=f.segments[:1]), id="entries-of-no-listed-segment"
        ),
    ],
)
def test_the_driver_refuses_reports_that_do_not_hold_together(tmp_path: Path, broken) -> None:  # type: ignore[no-untyped-def]
    store, found = _adopting(tmp_path)
    driver = store.open_run("01JQ00000000000000000OTHER", LOAD, pipeline="orders")
    bad = broken(found)
    with pytest.raises(DlqError):
        driver.adopt_described(bad.descriptors(), _entries(bad))


def test_the_driver_refuses_a_record_id_reported_twice(tmp_path: Path) -> None:
    store, found = _adopting(tmp_path)
    driver = store.open_run("01JQ00000000000000000OTHER", LOAD, pipeline="orders")
    driver.adopt_described(found.descriptors(), _entries(found))
    renamed = [replace(d, name="p00000-c000009.jsonl") for d in found.descriptors()]
    with pytest.raises(DlqError) as caught:
        driver.adopt_described(renamed, _entries(found))
    assert caught.value.code == "DPONE_DLQ_RECORD_CONFLICT"
