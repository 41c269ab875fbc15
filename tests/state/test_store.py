"""The state store against real files: atomic, checksummed, changed only in a commit."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from dpone import durable
from dpone.published import schema_errors
from dpone.state.model import Cursor, PipelineState
from dpone.state.store import StateChecksumMismatch, StateConflict, StateError, StateStore


def advance(state: PipelineState, value: str | None, n: int = 1) -> PipelineState:
    cursor = Cursor("updated_at", "timestamp", value) if value else None
    return state.advanced(
        run_id=f"run{n}",
        load_id=f"load{n}",
        cursor=cursor,
        manifest_fingerprint="sha256:" + "0" * 64,
        updated_at="2026-12-02T00:00:00Z",
    )


def test_fresh_pipeline_reads_revision_zero(tmp_path: Path) -> None:
    state = StateStore(tmp_path).read("orders")
    assert state == PipelineState(pipeline="orders")


def test_commit_writes_next_revision_and_is_schema_valid(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state")
    with store.commit("orders", expected_revision=0) as txn:
        txn.set(advance(txn.current, "2026-01-02T00:00:00Z"))
    state = store.read("orders")
    assert state.revision == 1
    assert state.cursor == Cursor("updated_at", "timestamp", "2026-01-02T00:00:00Z")
    doc = orjson.loads(store.path("orders").read_bytes())
    assert schema_errors(doc, "dpone.state.v1") == []
    # No temp files are left beside the state.
    assert [p.name for p in (tmp_path / "state").iterdir()] == ["orders.json"]


def test_a_cursor_of_none_keeps_the_committed_cursor(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    with store.commit("orders", expected_revision=0) as txn:
        txn.set(advance(txn.current, "2026-01-02T00:00:00Z"))
    with store.commit("orders", expected_revision=1) as txn:
        txn.set(advance(txn.current, None, 2))
    state = store.read("orders")
    assert state.revision == 2
    assert state.cursor is not None
    assert state.cursor.value == "2026-01-02T00:00:00Z"


def test_a_commit_removes_the_temp_files_of_a_replace_that_died(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    with store.commit("orders", expected_revision=0) as txn:
        txn.set(advance(txn.current, "2026-01-02T00:00:00Z"))
    dead = [
        tmp_path / durable.temp_name("orders.json"),  # what dpone.durable writes now
        tmp_path / ".orders.json.0123abcd.tmp",  # what dpone 0.1 wrote
    ]
    other = tmp_path / durable.temp_name("customers.json")  # another pipeline's: not ours
    for path in [*dead, other]:
        path.write_bytes(b"{")
    with store.commit("orders", expected_revision=1) as txn:
        txn.set(advance(txn.current, None, 2))
    assert sorted(p.name for p in tmp_path.iterdir()) == [other.name, "orders.json"]


def test_exception_inside_commit_writes_nothing(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    with store.commit("orders", expected_revision=0) as txn:
        txn.set(advance(txn.current, "2026-01-02T00:00:00Z"))
    before = store.path("orders").read_bytes()

    def failing_commit() -> None:
        with store.commit("orders", expected_revision=1) as txn:
            txn.set(advance(txn.current, "2027-01-01T00:00:00Z", 2))
            raise RuntimeError("evidence failed")

    with pytest.raises(RuntimeError):
        failing_commit()
    assert store.path("orders").read_bytes() == before


def test_concurrent_advance_is_a_conflict(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    with store.commit("orders", expected_revision=0) as txn:
        txn.set(advance(txn.current, "2026-01-02T00:00:00Z"))
    with pytest.raises(StateConflict), store.commit("orders", expected_revision=0):
        pass


def test_tampered_state_is_detected(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    with store.commit("orders", expected_revision=0) as txn:
        txn.set(advance(txn.current, "2026-01-02T00:00:00Z"))
    path = store.path("orders")
    path.write_bytes(path.read_bytes().replace(b"2026-01-02", b"2027-01-02"))
    with pytest.raises(StateChecksumMismatch) as info:
        store.read("orders")
    assert info.value.code == "DPONE_STATE_CHECKSUM_MISMATCH"


def test_garbage_state_is_a_typed_error(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    store.path("orders").write_bytes(b"{not json")
    with pytest.raises(StateError) as info:
        store.read("orders")
    assert info.value.code == "DPONE_STATE_INVALID"
