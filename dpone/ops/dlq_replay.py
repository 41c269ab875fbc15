"""``DlqReplayService``: seed 004's replay with a custom resolver and sink, one row at a time.

The plan is the real ``dpone.dlq-replay-plan.v1`` (:func:`dpone.ops.replay.plan`: sorted
record ids, checksums, pinned resolver and target identities, one idempotency key per item);
the acknowledgements are the store's (``store.write_acks``). :meth:`DlqReplayService.execute`:

1. refuses a plan that does not check itself (a changed key or body), whose pinned identities
   are not the resolver's and the sink's, or that is not the plan the store gives now;
2. skips the records whose acknowledgement exists (its checksum must match the plan's);
3. resolves every other record by its ``record_ref`` before applying any (the resolver finds
   the row outside the DLQ; ``None``: it cannot, and the record stays pending);
4. applies each resolved row with the plan's idempotency key and writes its acknowledgement
   only after the sink returned. A crash between the two is harmless when the sink keeps the
   key idempotent (seed 004): the next execution applies the row again under the same key.

:mod:`dpone.ops.replay_executor` is the batch executor of ``dpone ops quarantine-replay
--execute``; this one serves sinks that take a row at a time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from dpone.clock import format_timestamp
from dpone.dlq.errors import DlqAckMismatch
from dpone.dlq.model import DlqRecord
from dpone.dlq.store import DlqStore
from dpone.logs import get_logger
from dpone.ops.replay import (
    DEFAULT_MAX_ITEMS,
    UNBOUND,
    ReplayItem,
    ReplayPlan,
    ReplayPlanMismatch,
    plan,
)
from dpone.ops.replay_executor import ItemOutcome, ReplayResult, replay_id

log = get_logger("dpone.replay")


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
        """Apply ``plan_`` once (see the module docstring for the order of the steps)."""
        store = self.store
        started_at = format_timestamp(store.now())
        _check(self, plan_, resolver, sink)
        acks = store.read_acks(plan_.run_id)
        outcomes: dict[str, ItemOutcome] = {}
        pending: list[ReplayItem] = []
        for item in plan_.items:
            ack = acks.get(item.record_id)
            if ack is None:
                pending.append(item)
                continue
            if ack.record_sha256 != item.record_sha256:
                raise DlqAckMismatch(
                    f"the acknowledgement of record {item.record_id} names another checksum"
                )
            outcomes[item.record_id] = ItemOutcome(
                item.record_id, item.idempotency_key, "already_acknowledged"
            )
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
            store.write_acks(plan_.run_id, replay_id(plan_), [_ack(plan_, item)], index=index)
            outcomes[item.record_id] = ItemOutcome(item.record_id, item.idempotency_key, "applied")
        result = ReplayResult(
            plan_id=plan_.plan_id,
            run_id=plan_.run_id,
            pipeline=plan_.pipeline,
            resolver_identity=plan_.resolver_identity,
            target_identity=plan_.target_identity,
            items=tuple(outcomes[item.record_id] for item in plan_.items),
            started_at=started_at,
            finished_at=format_timestamp(store.now()),
        )
        log.info("replay.executed", run_id=plan_.run_id, **result.counts())
        return result


def _check(
    service: DlqReplayService,
    plan_: ReplayPlan,
    resolver: DlqRecordResolver,
    sink: DlqReplaySink,
) -> None:
    """Refuse before any row: a plan that was changed, is unbound, pins other identities, or
    is not the plan of the run as the store holds it now."""
    problems = plan_.problems()
    if problems:
        raise ReplayPlanMismatch(f"the replay plan does not check: {problems[0]}")
    if not plan_.bound:
        raise ReplayPlanMismatch(
            "the replay plan is unbound (no resolver or target was pinned); it cannot be executed",
            fixes=("build the plan with resolver_identity= and target_identity=",),
        )
    for name, pinned, actual in (
        ("resolver", plan_.resolver_identity, resolver.identity),
        ("target", plan_.target_identity, sink.identity),
    ):
        if pinned != actual:
            raise ReplayPlanMismatch(
                f"the plan pins another {name} ({pinned}) than the one given ({actual})",
                fixes=("build a new plan with this resolver and sink",),
            )
    fresh = service.plan(
        plan_.run_id,
        plan_.resolver_identity,
        plan_.target_identity,
        max_items=plan_.max_items,
    )
    if fresh.plan_id != plan_.plan_id or fresh.items != plan_.items:
        raise ReplayPlanMismatch(
            f"the plan is not the plan of run {plan_.run_id} as the store holds it now",
            fixes=("build a new plan; the run's records changed since this one was made",),
        )


def _ack(plan_: ReplayPlan, item: ReplayItem) -> dict[str, Any]:
    return {
        "record_id": item.record_id,
        "record_sha256": item.record_sha256,
        "plan_id": plan_.plan_id,
        "idempotency_key": item.idempotency_key,
        "outcome": "applied",
        "resolver_identity": plan_.resolver_identity,
        "target_identity": plan_.target_identity,
    }


__all__ = ["DlqRecordResolver", "DlqReplayService", "DlqReplaySink"]
