"""The generic replay service (``dpone.ops.replay``) behind its two Protocols, with fakes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pytest

from dpone.canonical import checksum
from dpone.contracts.reasons import ReasonCode
from dpone.dlq.model import DlqRecord
from dpone.dlq.refs import file_refs, run_row_refs
from dpone.dlq.rejects import rejected_rows
from dpone.dlq.store import DlqStore
from dpone.ops.replay import (
    ReplayError,
    ReplayPlan,
    ReplayPlanMismatch,
    ReplayRunAborted,
    ReplayRunOpen,
    ReplaySourceChanged,
    RowStillRejected,
    body_checksum,
    idempotency_key,
    plan,
)
from dpone.ops.replay.executor import OUTCOMES, Resolution, execute
from dpone.ops.verification import verify_store
from dpone.published import load_schema
from dpone.testing import FrozenClock
from tests.support.replay_pipeline import T0, assert_valid


class FakeResolver:
    identity = "fake-resolver:v1"

    def __init__(
        self,
        rejects: dict[str, ReasonCode] | None = None,
        refuse: Exception | None = None,
    ) -> None:
        self.rejects = rejects or {}
        self.refuse = refuse
        self.resolved: list[str] = []

    def resolve(self, records: Sequence[DlqRecord]) -> Resolution:
        if self.refuse is not None:
            raise self.refuse
        self.resolved = [r.record_id for r in records]
        passing = [r for r in records if r.record_id not in self.rejects]
        return Resolution(
            pa.table({"ref": [r.record_ref for r in passing]}),
            tuple(r.record_id for r in passing),
            {
                rid: RowStillRejected(reason, "amount", rule_id="rule")
                for rid, reason in self.rejects.items()
                if rid in self.resolved
            },
        )


class FakeSink:
    """Commits keys with rows atomically, like the real sinks; counts its loads."""

    identity = "fake-sink:orders"

    def __init__(self, fail_on_call: int | None = None, batch_rows: int = 100) -> None:
        self.applied: dict[str, str] = {}
        self.loads: list[list[str]] = []
        self.fail_on_call = fail_on_call
        self.batch_rows = batch_rows

    @property
    def calls(self) -> int:
        return len(self.loads)

    def committed(self, keys: Sequence[str]) -> set[str]:
        return set(keys) & set(self.applied)

    def apply(self, keys: Sequence[str], rows: pa.Table) -> None:
        self.loads.append(list(keys))
        if self.calls == self.fail_on_call:
            raise ConnectionError("the sink went away")
        assert rows.num_rows == len(keys)
        assert not set(keys) & set(self.applied), "a key applied twice"
        self.applied.update(zip(keys, rows.column("ref").to_pylist(), strict=True))


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(T0)


@pytest.fixture
def store(tmp_path: Path, clock: FrozenClock) -> DlqStore:
    return DlqStore(tmp_path / "dlq", clock=clock)


def closed_run(store: DlqStore, run_id: str = "run-1") -> list[str]:
    """Three file rows and one row that cannot be re-read; their record ids."""
    with store.open_run(run_id, "load-1", pipeline="orders") as writer:
        ids = writer.write_chunk(
            rejected_rows(
                file_refs("data/orders.csv", "ab" * 32, [2, 4, 5]),
                ReasonCode.TYPE_MISMATCH,
                columns="amount",
            )
        )
        ids += writer.write_chunk(
            rejected_rows(run_row_refs(run_id, "load-1", [9]), ReasonCode.REQUIRED_NULL)
        )
    return ids


def test_the_plan_is_stable_bounded_and_checks_itself(store: DlqStore, clock: FrozenClock) -> None:
    closed_run(store)
    first = plan(store, "run-1", FakeResolver.identity, FakeSink.identity)
    clock.advance(days=1)
    second = plan(store, "run-1", FakeResolver.identity, FakeSink.identity)

    assert first.plan_id == second.plan_id
    assert first.items == second.items
    assert first.created_at != second.created_at
    assert first.plan_id == checksum(first.body()) == body_checksum(first.body())
    assert [i.replayable for i in first.items].count(False) == 1
    for item in first.items:
        assert item.idempotency_key == idempotency_key(
            first.plan_id, item.record_id, item.record_sha256
        )
    doc = first.to_json()
    assert_valid(doc, "dpone.dlq-replay-plan.v1")
    assert ReplayPlan.from_json(doc) == first
    assert first.problems() == []
    assert plan(store, "run-1").plan_id != first.plan_id  # unbound is another plan


def test_execute_applies_each_row_once_and_acknowledges_after_the_sink(
    store: DlqStore,
) -> None:
    closed_run(store)
    replay_plan = plan(store, "run-1", FakeResolver.identity, FakeSink.identity)
    sink = FakeSink()

    result = execute(store, replay_plan, FakeResolver(), sink)

    assert result.counts() == {
        "applied": 3,
        "already_acknowledged": 0,
        "still_rejected": 0,
        "not_replayable": 1,
    }
    assert_valid(result.to_json(), "dpone.dlq-replay-result.v1")
    assert sorted(sink.applied) == sorted(i.idempotency_key for i in replay_plan.items[:3])
    assert sink.calls == 1  # one load for the batch
    acks = store.read_acks("run-1")
    assert len(acks) == 3
    for item in replay_plan.items[:3]:
        ack = acks[item.record_id]
        assert (ack.outcome, ack.plan_id, ack.idempotency_key) == (
            "applied",
            replay_plan.plan_id,
            item.idempotency_key,
        )
        assert ack.target_identity == FakeSink.identity
    assert verify_store(store) == []

    again = execute(store, replay_plan, FakeResolver(), sink)
    assert again.counts()["already_acknowledged"] == 3
    assert sink.calls == 1


def test_a_refusal_while_resolving_comes_before_any_row(store: DlqStore) -> None:
    closed_run(store)
    replay_plan = plan(store, "run-1", FakeResolver.identity, FakeSink.identity)
    sink = FakeSink()
    refusing = FakeResolver(refuse=ReplaySourceChanged("data/orders.csv changed"))

    with pytest.raises(ReplaySourceChanged):
        execute(store, replay_plan, refusing, sink)

    assert sink.calls == 0
    assert store.read_acks("run-1") == {}


def test_rows_that_still_fail_stay_pending_until_they_pass(store: DlqStore) -> None:
    ids = closed_run(store)
    replay_plan = plan(store, "run-1", FakeResolver.identity, FakeSink.identity)
    sink = FakeSink()

    result = execute(store, replay_plan, FakeResolver({ids[1]: ReasonCode.TYPE_MISMATCH}), sink)

    assert result.still_rejected() == {"schema.type_mismatch": 1}
    assert result.pending == 2
    assert ids[1] not in store.read_acks("run-1")
    later = execute(store, replay_plan, FakeResolver(), sink)
    assert later.counts()["applied"] == 1
    assert later.counts()["already_acknowledged"] == 2


def test_a_sink_failure_midway_is_finished_by_a_retry(store: DlqStore) -> None:
    closed_run(store)
    replay_plan = plan(store, "run-1", FakeResolver.identity, FakeSink.identity)
    sink = FakeSink(fail_on_call=2, batch_rows=2)

    with pytest.raises(ConnectionError):
        execute(store, replay_plan, FakeResolver(), sink)
    assert len(store.read_acks("run-1")) == 2  # the first batch of two

    result = execute(store, replay_plan, FakeResolver(), sink)
    assert result.counts()["applied"] == 1
    assert len(sink.applied) == 3


def test_rows_are_applied_in_batches_of_the_sinks_size(store: DlqStore) -> None:
    closed_run(store)
    replay_plan = plan(store, "run-1", FakeResolver.identity, FakeSink.identity)
    sink = FakeSink(batch_rows=2)

    result = execute(store, replay_plan, FakeResolver(), sink)

    assert result.counts()["applied"] == 3
    keys = [i.idempotency_key for i in replay_plan.items[:3]]
    assert sink.loads == [keys[:2], keys[2:]]


def test_keys_committed_without_acks_are_acknowledged_and_not_applied_again(
    store: DlqStore,
) -> None:
    """A crash between a batch's commit and its acknowledgements: the sink knows the keys."""
    closed_run(store)
    replay_plan = plan(store, "run-1", FakeResolver.identity, FakeSink.identity)
    sink = FakeSink()
    committed = replay_plan.items[0]
    sink.applied[committed.idempotency_key] = committed.record_ref
    resolver = FakeResolver()

    result = execute(store, replay_plan, resolver, sink)

    assert result.counts()["applied"] == 3
    assert committed.record_id not in resolver.resolved  # not even read again
    assert sink.loads == [[i.idempotency_key for i in replay_plan.items[1:3]]]
    assert sorted(store.read_acks("run-1")) == sorted(i.record_id for i in replay_plan.items[:3])


def test_a_resolver_that_loses_a_record_applies_nothing(store: DlqStore) -> None:
    closed_run(store)
    replay_plan = plan(store, "run-1", FakeResolver.identity, FakeSink.identity)

    class Lossy(FakeResolver):
        def resolve(self, records: Sequence[DlqRecord]) -> Resolution:
            return super().resolve(records[1:])

    sink = FakeSink()
    with pytest.raises(ReplayError):
        execute(store, replay_plan, Lossy(), sink)
    assert sink.calls == 0


def test_another_identity_or_a_changed_plan_is_refused(store: DlqStore) -> None:
    closed_run(store)
    replay_plan = plan(store, "run-1", FakeResolver.identity, FakeSink.identity)
    other_sink = FakeSink()
    other_sink.identity = "fake-sink:other"
    doc = replay_plan.to_json()
    doc["items"][1]["idempotency_key"] = doc["items"][0]["idempotency_key"]
    unbound = plan(store, "run-1")
    sink = FakeSink()

    for candidate, target in (
        (replay_plan, other_sink),
        (ReplayPlan.from_json(doc), sink),
        (unbound, sink),
    ):
        with pytest.raises(ReplayPlanMismatch):
            execute(store, candidate, FakeResolver(), target)
    assert sink.calls == other_sink.calls == 0


def test_open_and_aborted_runs_are_refused(store: DlqStore) -> None:
    closed_run(store)
    writer = store.open_run("run-open", "load-2", pipeline="orders")
    writer.write_chunk(
        rejected_rows(file_refs("data/b.csv", "cd" * 32, [1]), ReasonCode.TYPE_MISMATCH)
    )
    with pytest.raises(ReplayRunOpen):
        plan(store, "run-open")
    writer.close()
    store.abort_run("run-open")
    with pytest.raises(ReplayRunAborted):
        plan(store, "run-open")


def test_vocabularies_match_the_published_schemas() -> None:
    from dpone.ops.retention import PROTECTIONS

    result = load_schema("dpone.dlq-replay-result.v1")
    assert tuple(result["$defs"]["item"]["properties"]["outcome"]["enum"]) == OUTCOMES
    assert tuple(result["properties"]["counts"]["required"]) == OUTCOMES
    retention = load_schema("dpone.dlq-retention-plan.v1")
    assert tuple(retention["$defs"]["protected"]["required"]) == PROTECTIONS
    reasons = load_schema("dpone.dlq-replay-plan.v1")["$defs"]["item"]["properties"]
    assert reasons["reason_code"]["enum"] == [code.value for code in ReasonCode]
