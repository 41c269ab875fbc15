"""Staging on a thread of its own keeps the chunks' order, raises their errors on the main
thread, and loads exactly what staging inline loads (``runtime/stage_behind.py``)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
import yaml

import dpone
from dpone.connectors.errors import SinkSchemaError, SinkUnavailable
from dpone.connectors.sinks.duckdb_load import DuckDbLoad
from dpone.dlq.store import DlqStore
from dpone.runtime import stage_behind
from dpone.runtime.dlq_pipe import DlqPipe
from dpone.runtime.stage_behind import StageBehind, stage_depth


class FakeStaging:
    """Records each chunk's first id and the thread that staged it; fails at ``fail_at``."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.fail_at = fail_at
        self.staged: list[tuple[int, str]] = []

    def write(self, batch: pa.RecordBatch, nested: object = None) -> None:
        first = batch.column(0)[0].as_py()
        if first == self.fail_at:
            raise SinkSchemaError(f"chunk {first} does not fit the load")
        self.staged.append((first, threading.current_thread().name))


def _batch(i: int) -> pa.RecordBatch:
    return pa.record_batch({"id": pa.array([i, i], pa.int64())})


def _stager(staging: FakeStaging, *, behind: bool, depth: int = 1) -> StageBehind:
    return StageBehind(staging, behind=behind, depth=depth)  # type: ignore[arg-type]


def test_behind_stages_every_chunk_in_order_on_one_thread() -> None:
    staging = FakeStaging()
    stager = _stager(staging, behind=True)
    for i in range(20):
        stager.write(_batch(i))
    stager.close()
    assert [i for i, _ in staging.staged] == list(range(20))
    assert {name for _, name in staging.staged} == {"dpone-stage_0"}
    assert stager.thread_seconds > 0
    assert not [t for t in threading.enumerate() if t.name.startswith("dpone-stage")]


def test_inline_stages_on_the_callers_thread() -> None:
    staging = FakeStaging()
    stager = _stager(staging, behind=False)
    stager.write(_batch(1))
    stager.close()
    assert staging.staged == [(1, threading.current_thread().name)]
    assert stager.thread_seconds == 0


def test_a_chunks_error_is_raised_at_the_next_hand_off_and_nothing_after_it_is_staged() -> None:
    staging = FakeStaging(fail_at=3)
    stager = _stager(staging, behind=True)
    for i in range(4):
        stager.write(_batch(i))  # chunk 3 fails on the staging thread
    with pytest.raises(SinkSchemaError, match="chunk 3"):
        stager.write(_batch(4))
    stager.stop()
    assert [i for i, _ in staging.staged] == [0, 1, 2]


def test_the_last_chunks_error_is_raised_by_close() -> None:
    staging = FakeStaging(fail_at=2)
    stager = _stager(staging, behind=True)
    stager.write(_batch(1))
    stager.write(_batch(2))
    with pytest.raises(SinkSchemaError, match="chunk 2"):
        stager.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("dpone-stage")]


class GatedStaging(FakeStaging):
    """Stages a chunk only once ``gate`` is open."""

    def __init__(self, fail_at: int | None = None) -> None:
        super().__init__(fail_at)
        self.gate = threading.Event()

    def write(self, batch: pa.RecordBatch, nested: object = None) -> None:
        assert self.gate.wait(timeout=60)
        super().write(batch, nested)


def test_small_chunks_queue_up_to_the_depth_in_order() -> None:
    """With depth 4, four chunks are handed over while the first is still being staged; the
    fifth hand-off waits for the oldest; every chunk is staged once, in order."""
    staging = GatedStaging()
    stager = _stager(staging, behind=True, depth=4)
    for i in range(4):
        stager.write(_batch(i))  # none waits: the staging thread is held at the gate
    fifth = threading.Thread(target=stager.write, args=(_batch(4),))
    fifth.start()
    fifth.join(timeout=0.5)
    assert fifth.is_alive()  # waiting for chunk 0's staging
    assert staging.staged == []
    staging.gate.set()
    fifth.join(timeout=60)
    assert not fifth.is_alive()
    for i in range(5, 20):
        stager.write(_batch(i))
    stager.close()
    assert [i for i, _ in staging.staged] == list(range(20))
    assert {name for _, name in staging.staged} == {"dpone-stage_0"}


def test_small_chunks_of_wide_rows_queue_up_to_the_byte_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whatever the depth, the chunks in flight hold at most ``QUEUE_BYTES`` of rows (one
    chunk always): with room for two 16-byte chunks, the third hand-off waits."""
    monkeypatch.setattr(stage_behind, "QUEUE_BYTES", 40)
    staging = GatedStaging()
    stager = _stager(staging, behind=True, depth=8)
    assert _batch(0).nbytes == 16
    stager.write(_batch(0))
    stager.write(_batch(1))
    third = threading.Thread(target=stager.write, args=(_batch(2),))
    third.start()
    third.join(timeout=0.5)
    assert third.is_alive()  # 48 bytes would be in flight: waits for chunk 0
    staging.gate.set()
    third.join(timeout=60)
    assert not third.is_alive()
    stager.close()
    assert [i for i, _ in staging.staged] == [0, 1, 2]


def test_one_chunk_larger_than_the_byte_bound_is_still_staged_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(stage_behind, "QUEUE_BYTES", 8)
    staging = FakeStaging()
    stager = _stager(staging, behind=True, depth=8)
    for i in range(5):
        stager.write(_batch(i))
    stager.close()
    assert [i for i, _ in staging.staged] == list(range(5))
    assert {name for _, name in staging.staged} == {"dpone-stage_0"}


def test_with_depth_nothing_handed_over_after_a_failed_chunk_is_staged() -> None:
    staging = FakeStaging(fail_at=3)
    stager = _stager(staging, behind=True, depth=4)

    def hand_over_all() -> None:
        for i in range(10):
            stager.write(_batch(i))  # raised at a hand-off after chunk 3's staging failed
        stager.close()

    with pytest.raises(SinkSchemaError, match="chunk 3"):
        hand_over_all()
    stager.stop()
    assert [i for i, _ in staging.staged] == [0, 1, 2]
    assert not [t for t in threading.enumerate() if t.name.startswith("dpone-stage")]


def test_stop_drops_the_chunks_still_waiting() -> None:
    """After a failure elsewhere (the main thread's), only the chunk being staged ends."""
    staging = GatedStaging()
    stager = _stager(staging, behind=True, depth=8)
    for i in range(6):
        stager.write(_batch(i))
    stopping = threading.Thread(target=stager.stop)
    stopping.start()
    staging.gate.set()
    stopping.join(timeout=60)
    assert not stopping.is_alive()
    assert [i for i, _ in staging.staged] in ([], [0])


def test_the_depth_holds_about_a_row_group_of_small_chunks() -> None:
    assert stage_depth(250_000) == stage_depth(131_072) == 1
    assert stage_depth(65_536) == 2
    assert stage_depth(10_000) == 13  # the default chunk size
    assert stage_depth(1) == 32


def _run(tmp: Path, name: str, *, check: bool = True) -> dict[str, Any]:
    (tmp / "data").mkdir(exist_ok=True)
    lines = ["id,amount,note"]
    for i in range(5000):
        lines.append(f"{i},{'x' if i % 97 == 0 else f'{i}.25'},n{i}")
    (tmp / "data" / "x.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    manifest = {
        "kind": "dpone.manifest.v1",
        "name": name,
        "runtime": {"chunk_size": 700, "work_dir": f".dpone-{name}"},
        "source": {"type": "file", "format": "csv", "path": "data/x.csv"},
        "sink": {
            "type": "duckdb",
            "database": f"{name}.duckdb",
            "dataset": "main",
            "table": "t",
            "options": {
                "schema_contract": {
                    "enforcement": "quarantine",
                    "columns": {
                        "id": {"type": "integer", "nullable": False},
                        "amount": {"type": "decimal", "precision": 10, "scale": 2},
                    },
                }
            },
        },
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(manifest), encoding="utf-8")
    report = dpone.run(path, check=check).to_json()
    with duckdb.connect(str(tmp / f"{name}.duckdb"), read_only=True) as con:
        exists = con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 't'")
        if exists.fetchall()[0][0]:
            report["table"] = con.execute("SELECT * FROM main.t ORDER BY id").fetchall()
    return report


def test_a_run_on_two_cores_stages_behind_and_loads_what_one_core_loads(tmp_path: Path) -> None:
    """Pinned to one core the run stages inline; on all of the machine's (two or more, as
    every machine the tests run on has) on the staging thread: the same rows either way."""
    cores = os.sched_getaffinity(0)
    assert len(cores) > 1, "this test needs a machine of two cores or more"
    try:
        os.sched_setaffinity(0, {min(cores)})
        inline = _run(tmp_path, "one")
    finally:
        os.sched_setaffinity(0, cores)
    assert inline["timings"]["sink_writer"] == 0
    assert inline["rows"]["quarantined"] == 52
    assert len(inline["table"]) == 5000 - 52
    behind = _run(tmp_path, "two")
    assert behind["timings"]["sink_writer"] > 0
    assert behind["rows"] == inline["rows"]
    assert behind["table"] == inline["table"]


def test_a_staging_error_on_the_staging_thread_fails_the_run_and_commits_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB failing to stage the third chunk, on the staging thread: the run fails
    with the sink's error (no traceback, the main thread raised it), no row is committed,
    its DLQ run is aborted, no staging thread is left, and the next run loads every row once."""
    assert len(os.sched_getaffinity(0)) > 1, "this test needs a machine of two cores or more"
    real = DuckDbLoad._stage
    calls = 0
    threads: set[str] = set()

    def failing(self: DuckDbLoad, batch: pa.RecordBatch) -> None:
        nonlocal calls
        calls += 1
        threads.add(threading.current_thread().name)
        if calls == 3:
            raise SinkUnavailable("DuckDB sink: staging rows failed: disk I/O error")
        real(self, batch)

    monkeypatch.setattr(DuckDbLoad, "_stage", failing)
    failed = _run(tmp_path, "fail", check=False)
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == "DPONE_SINK_UNAVAILABLE"
    assert "table" not in failed  # nothing committed: the run's table was never created
    assert threads == {"dpone-stage_0"}
    assert not [t for t in threading.enumerate() if t.name.startswith("dpone-stage")]
    store = DlqStore(tmp_path / ".dpone-fail" / "dlq")
    assert store.read_index(failed["run_id"]).status == "aborted"

    monkeypatch.setattr(DuckDbLoad, "_stage", real)
    again = _run(tmp_path, "fail")
    assert again["status"] == "succeeded"
    assert len(again["table"]) == 5000 - 52
    assert [r[0] for r in again["table"]] == sorted({r[0] for r in again["table"]})


def test_the_dlq_run_closes_while_the_last_chunk_is_staged_and_a_late_error_aborts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On two cores the DLQ run closes while the staging thread still inserts the last chunk
    (the insert waits here for the close). That insert failing then fails the run as a failed
    commit does: nothing committed, the closed DLQ run aborted, and the next run loads every
    row once."""
    assert len(os.sched_getaffinity(0)) > 1, "this test needs a machine of two cores or more"
    real_stage, real_close = DuckDbLoad._stage, DlqPipe.close
    chunks = -(-5000 // 700)
    calls = 0
    closed = threading.Event()
    status_then: list[str] = []

    def close(self: DlqPipe) -> Any:
        result = real_close(self)
        closed.set()
        return result

    def last_fails(self: DuckDbLoad, batch: pa.RecordBatch) -> None:
        nonlocal calls
        calls += 1
        if calls < chunks:
            real_stage(self, batch)
            return
        if closed.wait(timeout=20):  # never set if the DLQ close waited for this insert
            store = DlqStore(tmp_path / ".dpone-late" / "dlq")
            status_then.extend(store.read_index(r).status for r in store.run_ids())
        raise SinkUnavailable("DuckDB sink: staging rows failed: disk I/O error")

    monkeypatch.setattr(DlqPipe, "close", close)
    monkeypatch.setattr(DuckDbLoad, "_stage", last_fails)
    failed = _run(tmp_path, "late", check=False)
    assert calls == chunks
    assert status_then == ["closed"]  # while the last chunk was being staged
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == "DPONE_SINK_UNAVAILABLE"
    assert "table" not in failed
    store = DlqStore(tmp_path / ".dpone-late" / "dlq")
    assert store.read_index(failed["run_id"]).status == "aborted"
    assert not [t for t in threading.enumerate() if t.name.startswith("dpone-stage")]

    monkeypatch.setattr(DuckDbLoad, "_stage", real_stage)
    again = _run(tmp_path, "late")
    assert again["status"] == "succeeded"
    assert len(again["table"]) == 5000 - 52
