"""Every limit at its bound and one past it, on real files."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import orjson
import pytest

from dpone.contracts.dlq import LIMITS
from dpone.dlq.errors import DlqLimitExceeded, DlqPolicyInvalid
from dpone.dlq.index import entry
from dpone.dlq.ledger import INDEX_OVERHEAD as _INDEX_OVERHEAD
from dpone.dlq.ledger import SEGMENT_ENTRY_BYTES as _SEGMENT_ENTRY_BYTES
from tests.support.dlqfiles import lines_of, record_ids_on_disk, segment_files
from tests.support.dlqrows import StoreFactory, rows, run_writer


@pytest.mark.parametrize("name", sorted(LIMITS))
def test_policy_bounds(make_store: StoreFactory, name: str) -> None:
    _, low, high = LIMITS[name]
    extra: dict[str, Any] = {}
    if name == "max_record_bytes":
        extra["max_diagnostic_bytes"] = 1024  # may not exceed the record limit
    for value in (low, high):
        make_store(**{name: value}, **extra)
    for value in (low - 1, high + 1):
        with pytest.raises(DlqPolicyInvalid):
            make_store(**{name: value}, **extra)


def test_diagnostics_may_not_exceed_the_record_limit(make_store: StoreFactory) -> None:
    make_store(max_record_bytes=4096, max_diagnostic_bytes=4096)
    with pytest.raises(DlqPolicyInvalid):
        make_store(max_record_bytes=4096, max_diagnostic_bytes=4097)


def test_max_records_per_run(make_store: StoreFactory, root: Path) -> None:
    store = make_store(max_records_per_run=5)
    with store.open_run("at-bound", "load-1") as writer:
        assert len(writer.write_chunk(rows(5))) == 5
    writer = store.open_run("past-bound", "load-1")
    writer.write_chunk(rows(4))
    with pytest.raises(DlqLimitExceeded) as caught:
        writer.write_chunk(rows(2, start=5))  # 6 > 5: nothing of the chunk is written
    assert (caught.value.limit, caught.value.value, caught.value.bound) == (
        "max_records_per_run",
        6,
        5,
    )
    assert len(record_ids_on_disk(root, "past-bound")) == 4
    assert len(segment_files(root, "past-bound")) == 1  # nothing of the refused chunk
    assert writer.write_chunk(rows(1, start=5))  # exactly at the bound again
    result = writer.abort()  # the lifecycle fails the run before the state commits
    assert result.status == "aborted"
    assert result.record_count == 5


def test_max_records_per_run_counts_what_is_on_disk(make_store: StoreFactory, root: Path) -> None:
    run_writer(root, run_id="run-1", chunks=[3], mode="abandon")
    writer = make_store(max_records_per_run=5).open_run("run-1", "load-1")
    assert writer.record_count == 3
    writer.write_chunk(rows(2, start=4))
    with pytest.raises(DlqLimitExceeded):
        writer.write_chunk(rows(1, start=6))
    assert len(record_ids_on_disk(root, "run-1")) == 5


def test_max_record_bytes(make_store: StoreFactory, root: Path) -> None:
    big = [{"note": "x" * 5000}]  # equal-length run ids: equal-size records
    with make_store(pii_policy="preserve").open_run("run-a", "load-1") as writer:
        writer.write_chunk(rows(1, values=big))
    [probe] = segment_files(root, "run-a")
    [line] = lines_of(probe)
    size = len(line) + 1  # a record's bytes: its line and the newline
    assert size > 4096
    store = make_store(pii_policy="preserve", max_record_bytes=size, max_diagnostic_bytes=1024)
    with store.open_run("run-b", "load-1") as writer:
        writer.write_chunk(rows(1, values=big))
    store = make_store(pii_policy="preserve", max_record_bytes=size - 1, max_diagnostic_bytes=1024)
    writer = store.open_run("run-c", "load-1")
    with pytest.raises(DlqLimitExceeded) as caught:
        writer.write_chunk(rows(1, values=big))
    assert caught.value.limit == "max_record_bytes"
    assert writer.record_count == 0
    writer.abort()


def test_max_diagnostic_bytes(make_store: StoreFactory) -> None:
    column = "c" * 1000
    with make_store().open_run("probe", "load-1") as writer:
        [record_id] = writer.write_chunk(rows(1, column=column))
    doc = make_store().read_record("probe", record_id).to_json()
    size = len(orjson.dumps(doc["diagnostics"]))
    assert size > 1024
    with make_store(max_diagnostic_bytes=size).open_run("at-bound", "load-1") as writer:
        writer.write_chunk(rows(1, column=column))
    writer = make_store(max_diagnostic_bytes=size - 1).open_run("past-bound", "load-1")
    with pytest.raises(DlqLimitExceeded) as caught:
        writer.write_chunk(rows(1, column=column))
    assert caught.value.limit == "max_diagnostic_bytes"
    writer.abort()


def test_max_index_bytes(make_store: StoreFactory, root: Path) -> None:
    # The writer refuses a chunk when the index could exceed the limit: the entries so far,
    # the chunk's entries, and a fixed allowance for the index header.
    column = "c" * 1000
    entry_size = (
        len(orjson.dumps(entry("0" * 26, "sha256:" + "0" * 64, "schema.type_mismatch", column))) + 1
    )
    # Each chunk is one segment here, and the index lists each segment too.
    count = math.ceil((1_048_576 - _INDEX_OVERHEAD) / entry_size) + 1  # bound - 1 stays legal
    bound = _INDEX_OVERHEAD + count * entry_size + 2 * _SEGMENT_ENTRY_BYTES
    writer = make_store(max_index_bytes=bound).open_run("at-bound", "load-1")
    writer.write_chunk(rows(count - 1, column=column))
    writer.write_chunk(rows(1, start=count, column=column))
    with pytest.raises(DlqLimitExceeded) as caught:
        writer.write_chunk(rows(1, start=count + 1, column=column))
    assert caught.value.limit == "max_index_bytes"
    assert writer.close().record_count == count
    assert (root / "runs" / "at-bound" / "index.json").stat().st_size <= bound

    writer = make_store(max_index_bytes=bound - 1).open_run("past-bound", "load-1")
    writer.write_chunk(rows(count - 1, column=column))
    with pytest.raises(DlqLimitExceeded):
        writer.write_chunk(rows(1, start=count, column=column))
    writer.abort()
