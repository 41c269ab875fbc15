"""A replay plan reads each record's plan fields where canonical JSON puts them; the plan is
the one the fully verified records give, whatever the rows held, and a segment in any other
form is read record by record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dpone.contracts.dlq import DlqPolicy
from dpone.contracts.reasons import ReasonCode
from dpone.dlq.errors import DlqChecksumMismatch
from dpone.dlq.refs import file_refs, run_row_refs
from dpone.dlq.rejects import rejected_rows
from dpone.dlq.store import DlqStore
from dpone.ops.replay import ReplayItem, plan, read_run
from dpone.ops.replay.reading import _plan_columns
from dpone.testing import FrozenClock
from tests.support.dlqfiles import reseal_index, segment_files
from tests.support.replay_pipeline import T0

#: Column names that are also member names of a record: a preserved row holds them.
TRAPS = ("code", "record_id", "record_ref", "replay", "sha256", "reason", "run_id", "schema")


@pytest.fixture
def store(tmp_path: Path) -> DlqStore:
    root = tmp_path / "dlq"
    return DlqStore(
        root, DlqPolicy(directory=str(root), pii_policy="preserve"), clock=FrozenClock(T0)
    )


def _values(n: int) -> list[dict[str, Any]]:
    trap = {name: f'"{name}":"x","}}' for name in TRAPS}
    return [
        {**trap, "amount": f"{i}.001", "nested": {"code": "schema.required_null"}} for i in range(n)
    ]


def _run(store: DlqStore, run_id: str = "run-1") -> list[str]:
    with store.open_run(run_id, "load-1", pipeline="orders") as writer:
        ids = writer.write_chunk(
            rejected_rows(
                file_refs('data/or"d ers é.csv', "ab" * 32, [2, 4, 5]),
                ReasonCode.TYPE_MISMATCH,
                columns="amount",
                rows=_values(3),
            )
        )
        ids += writer.write_chunk(
            rejected_rows(
                run_row_refs(run_id, "load-1", [9, 10]),
                ReasonCode.REQUIRED_NULL,
                rows=_values(2),
            )
        )
        ids += writer.write_chunk(
            rejected_rows(
                file_refs("data/orders.csv", "cd" * 32, [7]),
                ReasonCode.COLUMN_NOT_ALLOWED,
                columns="code",
                rows=_values(1),
            )
        )
    return ids


def _expected(store: DlqStore, run_id: str) -> list[tuple[str, str, str, bool, str]]:
    """The plan fields from the records, each verified in full."""
    return sorted(
        (r.record_id, r.sha256, r.record_ref, r.replay.replayable, r.reason.code.value)
        for r in store.iter_records(run_id)
    )


def _fields(items: tuple[ReplayItem, ...]) -> list[tuple[str, str, str, bool, str]]:
    return [
        (i.record_id, i.record_sha256, i.record_ref, i.replayable, i.reason_code) for i in items
    ]


def test_the_plan_holds_what_the_records_hold(store: DlqStore) -> None:
    ids = _run(store)
    built = plan(store, "run-1", "r", "t")
    for path in segment_files(store.root, "run-1"):
        assert _plan_columns(path.read_bytes(), "run-1") is not None  # the fast way
    assert _fields(built.items) == _expected(store, "run-1")
    assert [i.record_id for i in built.items] == sorted(ids)
    assert {i.reason_code for i in built.items} == {
        "schema.type_mismatch",
        "schema.required_null",
        "schema.column_not_allowed",
    }


def test_an_execution_read_gets_the_pending_records_in_full(store: DlqStore) -> None:
    ids = _run(store)
    run = read_run(store, "run-1")
    assert _fields(run.plan("r", "t", T0).items) == _expected(store, "run-1")
    replayable = {r.record_id for r in store.iter_records("run-1") if r.replay.replayable}
    assert set(run.pending) == replayable
    assert all(run.pending[rid] == store.read_record("run-1", rid) for rid in replayable)
    assert len(ids) == 6


def test_a_segment_in_another_json_form_is_read_record_by_record(
    store: DlqStore, root_of: Any
) -> None:
    _run(store)
    before = plan(store, "run-1", "r", "t")
    first = segment_files(root_of(store), "run-1")[0]
    lines = first.read_bytes().splitlines()
    first.chmod(0o644)
    first.write_bytes(b"".join(json.dumps(json.loads(line)).encode() + b"\n" for line in lines))
    reseal_index(root_of(store), "run-1")
    assert _plan_columns(first.read_bytes(), "run-1") is None  # not in the form dpone writes
    after = plan(store, "run-1", "r", "t")
    assert after.items == before.items
    assert after.plan_id == before.plan_id


def test_a_changed_segment_is_refused_naming_it(store: DlqStore, root_of: Any) -> None:
    _run(store)
    first = segment_files(root_of(store), "run-1")[0]
    first.chmod(0o644)
    first.write_bytes(first.read_bytes().replace(b"row=4", b"row=3"))
    with pytest.raises(DlqChecksumMismatch, match=first.name):
        plan(store, "run-1", "r", "t")


@pytest.fixture
def root_of() -> Any:
    return lambda store: store.root
