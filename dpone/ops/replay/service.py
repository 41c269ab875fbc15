"""``DlqReplayService``: plan and execute the replay of one DLQ run through a resolver and a
sink of the caller's (seed 004's Python interface, ``dpone.ops.dlq``).

The plan is the real ``dpone.dlq-replay-plan.v1`` (:func:`dpone.ops.replay.reading.plan`);
the acknowledgements are the store's (``store.write_acks``).
:meth:`DlqReplayService.execute` takes a row at a time: it refuses a plan that does not
check itself, pins other identities or is not the plan the store gives now; skips the records
whose acknowledgement exists (its checksum must match the plan's); resolves every other
record by its ``record_ref`` before applying any (``None``: the resolver cannot find it, and
the record stays pending); then applies each row with the plan's idempotency key and writes
its acknowledgement only after the sink returned. A crash between the two is harmless when
the sink keeps the key idempotent: the next execution applies the row again under the same
key. Batches through Protocols go through :func:`dpone.ops.replay.executor.execute` (the
executor of ``dpone ops quarantine-replay --execute``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from dpone.clock import format_timestamp
from dpone.dlq.model import DlqRecord
from dpone.ops.replay.document import DEFAULT_MAX_ITEMS, UNBOUND, ReplayItem, ReplayPlan
from dpone.ops.replay.executor import (
    ItemOutcome,
    ReplayResult,
    ack_docs,
    already_acknowledged,
    check_fresh,
    check_identities,
    finish,
    replay_id,
)
from dpone.ops.replay.reading import plan

if TYPE_CHECKING:
    from dpone.dlq.store import DlqStore

#: What to do about an unbound plan, and about one that pins other identities.
SERVICE_FIXES = (
    "build the plan with resolver_identity= and target_identity=",
    "build a new plan with this resolver and sink",
)


class DlqRecordResolver(Protocol):
    """Finds a quarantined row again from its record (``record.record_ref``)."""

    @property
    def identity(self) -> str:
        """Stable, secret-free name of what resolves (pinned in the plan)."""
        ...

    def resolve(self, record: DlqRecord) -> Mapping[str, Any] | None:
        """The row ``record`` stands for, or None when it cannot be found (stays pending)."""
        ...


class DlqReplaySink(Protocol):
    """Applies one row under its idempotency key; a key applied before must change nothing."""

    @property
    def identity(self) -> str: ...

    def apply(self, row: Mapping[str, Any], idempotency_key: str) -> None:
        """Apply ``row`` durably; return only once it is (then the row is acknowledged)."""
        ...


class DlqReplayService:
    """Plan and execute the replay of one DLQ run of ``store``."""

    def __init__(self, store: DlqStore) -> None:
        self.store = store

    def plan(
        self,
        run_id: str,
        resolver_identity: str = UNBOUND,
        target_identity: str = UNBOUND,
        *,
        max_items: int = DEFAULT_MAX_ITEMS,
    ) -> ReplayPlan:
        """The bounded, immutable plan of closed run ``run_id``; every record verified."""
        return plan(self.store, run_id, resolver_identity, target_identity, max_items=max_items)

    def execute(
        self, plan_: ReplayPlan, *, resolver: DlqRecordResolver, sink: DlqReplaySink
    ) -> ReplayResult:
        """Apply ``plan_`` once, a row at a time (see the module docstring)."""
        store = self.store
        started_at = format_timestamp(store.now())
        check_identities(plan_, resolver.identity, sink.identity, SERVICE_FIXES)
        check_fresh(
            plan_,
            self.plan(
                plan_.run_id,
                plan_.resolver_identity,
                plan_.target_identity,
                max_items=plan_.max_items,
            ),
        )
        acks = store.read_acks(plan_.run_id)
        outcomes: dict[str, ItemOutcome] = {}
        pending: list[ReplayItem] = []
        for item in plan_.items:
            done = already_acknowledged(item, acks)
            if done is None:
                pending.append(item)
            else:
                outcomes[item.record_id] = done
        index = store.read_index(plan_.run_id)
        # Resolve everything first: a resolver that refuses the replay does so before any row.
        rows = [
            resolver.resolve(store.read_record(plan_.run_id, item.record_id)) for item in pending
        ]
        for item, row in zip(pending, rows, strict=True):
            if row is None:
                outcomes[item.record_id] = ItemOutcome(
                    item.record_id,
                    item.idempotency_key,
                    "not_replayable",
                    reason_code=item.reason_code,
                )
                continue
            sink.apply(row, item.idempotency_key)
            store.write_acks(plan_.run_id, replay_id(plan_), ack_docs(plan_, [item]), index=index)
            outcomes[item.record_id] = ItemOutcome(item.record_id, item.idempotency_key, "applied")
        return finish(store, plan_, outcomes, started_at)


__all__ = ["DlqRecordResolver", "DlqReplayService", "DlqReplaySink"]
