"""The replay executor: applies a plan once, through two small Protocols (SPEC §8).

The plan is :mod:`dpone.ops.replay.document`'s. :func:`execute` applies it in this order:

1. the plan checks itself (its id is the checksum of its body, its keys derive from it) and
   its identities must be the resolver's and the sink's;
2. the plan is rebuilt from the store, verifying every record again, and must be identical;
3. existing acknowledgements are read (verified): those records are skipped;
4. the sink says which of the other items' keys it already committed (a crash between a
   batch's commit and its acknowledgements): those are acknowledged now and applied never again;
5. the resolver resolves every remaining record in bulk, so anything that refuses the whole
   replay (a changed source file) happens before a single row is applied; a row that still
   fails its contract or an assertion stays pending (``still_rejected``);
6. the rows that pass go to the sink in batches of at most ``sink.batch_rows``: one load per
   batch, whose idempotency keys (one per row) commit in the same transaction as its rows;
   only then are the batch's acknowledgements written (``store.write_acks``). A crash in
   between is harmless: step 4 of the next execution finds the keys.

Nothing here knows about sources, contracts or databases; :mod:`dpone.ops.replay.binding` is the
first-party executor that binds a manifest's file source and sink.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, get_args

from dpone.canonical import CHECKSUM_PREFIX
from dpone.clock import format_timestamp
from dpone.dlq.errors import DlqAckMismatch
from dpone.dlq.model import DlqRecord
from dpone.faults import checkpoint
from dpone.logs import get_logger
from dpone.ops.replay.document import ReplayItem, ReplayPlan
from dpone.ops.replay.errors import ReplayError, ReplayPlanMismatch, RowStillRejected
from dpone.ops.replay.reading import RunRead, read_run
from dpone.records import frozen

if TYPE_CHECKING:
    import pyarrow as pa

    from dpone.dlq.acks import ReplayAck
    from dpone.dlq.store import DlqStore

log = get_logger("dpone.replay")

RESULT_SCHEMA = "dpone.dlq-replay-result.v1"
Outcome = Literal["applied", "already_acknowledged", "still_rejected", "not_replayable"]
OUTCOMES: tuple[str, ...] = get_args(Outcome)
#: What to do about an unbound plan, and about one that pins another manifest's identities.
MANIFEST_FIXES = (
    "build the plan with --manifest M, or execute with --execute --manifest M",
    "build a new plan against this manifest",
)

# --- the two Protocols --------------------------------------------------------------------------


@frozen
class Resolution:
    """What a resolver made of the records it was given: the rows that pass now (row ``i``
    is the row of ``record_ids[i]``) and why each other record still fails."""

    rows: pa.Table
    record_ids: tuple[str, ...]
    rejected: Mapping[str, RowStillRejected]


class RecordResolver(Protocol):
    """Finds quarantined rows again from their ``record_ref`` and checks them once more."""

    @property
    def identity(self) -> str:
        """Stable, secret-free name of what resolves (pinned in the plan)."""
        ...

    def resolve(self, records: Sequence[DlqRecord]) -> Resolution:
        """Every record's row, read in bulk, ready for the sink, or why it still fails.

        Called once, before any row is applied: raise here for anything that must refuse the
        whole replay (a changed source file raises :class:`ReplaySourceChanged`).
        """
        ...


class ReplaySink(Protocol):
    """Applies resolved rows in batches, each row under its idempotency key."""

    @property
    def identity(self) -> str: ...

    @property
    def batch_rows(self) -> int:
        """The most rows one load takes."""
        ...

    def committed(self, keys: Sequence[str]) -> set[str]:
        """Those of ``keys`` that an earlier load committed."""
        ...

    def apply(self, keys: Sequence[str], rows: pa.Table) -> None:
        """One load of ``rows`` whose keys (``keys[i]`` for row ``i``) commit in the same
        transaction as the rows: after it returns, :meth:`committed` names every key."""
        ...


# --- executing ----------------------------------------------------------------------------------


@frozen
class ItemOutcome:
    """One record's outcome in an execution; a rejected or unreplayable row names its reason."""

    record_id: str
    idempotency_key: str
    outcome: Outcome
    reason_code: str | None = None
    column: str | None = None
    rule_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "record_id": self.record_id,
            "idempotency_key": self.idempotency_key,
            "outcome": self.outcome,
            "reason_code": self.reason_code,
            "column": self.column,
            "rule_id": self.rule_id,
        }


@frozen
class ReplayResult:
    """What one execution did, item by item (``dpone.dlq-replay-result.v1``)."""

    plan_id: str
    run_id: str
    pipeline: str | None
    resolver_identity: str
    target_identity: str
    items: tuple[ItemOutcome, ...]
    started_at: str
    finished_at: str

    def counts(self) -> dict[str, int]:
        found: Counter[str] = Counter(item.outcome for item in self.items)
        return {outcome: found.get(outcome, 0) for outcome in OUTCOMES}

    def still_rejected(self) -> dict[str, int]:
        """Rows that still fail, per reason code."""
        found = Counter(
            item.reason_code or "unknown.unclassified"
            for item in self.items
            if item.outcome == "still_rejected"
        )
        return dict(sorted(found.items()))

    @property
    def pending(self) -> int:
        """Records that are still not acknowledged after this execution."""
        counts = self.counts()
        return counts["still_rejected"] + counts["not_replayable"]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": RESULT_SCHEMA,
            "plan_id": self.plan_id,
            "run_id": self.run_id,
            "pipeline": self.pipeline,
            "resolver_identity": self.resolver_identity,
            "target_identity": self.target_identity,
            "item_count": len(self.items),
            "counts": self.counts(),
            "pending": self.pending,
            "still_rejected_by_reason": self.still_rejected(),
            "items": [item.to_json() for item in self.items],
            "started_at": self.started_at,
            "finished_at": self.finished_at,
        }


def check_identities(
    plan_: ReplayPlan, resolver: str, sink: str, fixes: tuple[str, str] = MANIFEST_FIXES
) -> None:
    """Refuse a plan that does not check itself, is unbound, or pins other identities than
    ``resolver`` and ``sink``; ``fixes``: what to do about an unbound plan, and about one
    that pins other identities."""
    problems = plan_.problems()
    if problems:
        raise ReplayPlanMismatch(f"the replay plan does not check: {problems[0]}")
    if not plan_.bound:
        raise ReplayPlanMismatch(
            "the replay plan is unbound (no resolver or target was pinned); it cannot be executed",
            fixes=(fixes[0],),
        )
    for name, pinned, actual in (
        ("resolver", plan_.resolver_identity, resolver),
        ("target", plan_.target_identity, sink),
    ):
        if pinned != actual:
            raise ReplayPlanMismatch(
                f"the plan pins another {name} ({pinned}) than the one given ({actual})",
                fixes=(fixes[1],),
            )


def check_fresh(plan_: ReplayPlan, fresh: ReplayPlan) -> None:
    """Refuse ``plan_`` unless it is ``fresh``, the plan of its run as the store holds it now."""
    if fresh.plan_id != plan_.plan_id or fresh.items != plan_.items:
        raise ReplayPlanMismatch(
            f"the plan is not the plan of run {plan_.run_id} as the store holds it now",
            fixes=("build a new plan; the run's records changed since this one was made",),
        )


def replay_id(plan_: ReplayPlan) -> str:
    """The name this plan's acknowledgements are written under (``store.write_acks``)."""
    return plan_.plan_id.removeprefix(CHECKSUM_PREFIX)[:32]


def execute(
    store: DlqStore,
    plan_: ReplayPlan,
    resolver: RecordResolver,
    sink: ReplaySink,
    *,
    run: RunRead | None = None,
) -> ReplayResult:
    """Apply ``plan_`` once (see the module docstring for the order of the steps).

    ``run`` is a :func:`read_run` of the plan's run taken for this execution (the caller
    that built the plan from it saves reading every record twice); without it one is taken.
    """
    started_at = format_timestamp(store.now())
    check_identities(plan_, resolver.identity, sink.identity)
    if run is None or run.index.run_id != plan_.run_id or run.max_items != plan_.max_items:
        run = read_run(store, plan_.run_id, plan_.max_items)
    index, acks, records = run.index, run.acks, run.pending
    check_fresh(plan_, run.plan(plan_.resolver_identity, plan_.target_identity, plan_.created_at))
    outcomes, pending = _triage(plan_, acks)

    def acknowledge(items: Sequence[ReplayItem]) -> None:
        store.write_acks(plan_.run_id, replay_id(plan_), ack_docs(plan_, items), index=index)
        for item in items:
            outcomes[item.record_id] = ItemOutcome(item.record_id, item.idempotency_key, "applied")
        checkpoint("replay_during_acks")

    # Committed by an execution that died before acknowledging them: acknowledge, never apply.
    committed = sink.committed([item.idempotency_key for item in pending])
    if committed:
        acknowledge([item for item in pending if item.idempotency_key in committed])
        pending = [item for item in pending if item.idempotency_key not in committed]

    # Resolve everything first: a refusal of the whole replay comes before any row is applied.
    resolution = resolver.resolve([records[item.record_id] for item in pending])
    _check_resolution(resolution, pending)
    by_id = {item.record_id: item for item in pending}
    for record_id, rejected in resolution.rejected.items():
        outcomes[record_id] = ItemOutcome(
            record_id,
            by_id[record_id].idempotency_key,
            "still_rejected",
            reason_code=rejected.reason.value,
            column=rejected.column_name,
            rule_id=rejected.rule_id,
        )

    size = sink.batch_rows
    for start in range(0, len(resolution.record_ids), size):
        batch = [by_id[record_id] for record_id in resolution.record_ids[start : start + size]]
        sink.apply([item.idempotency_key for item in batch], resolution.rows.slice(start, size))
        checkpoint("replay_after_batch_commit")
        acknowledge(batch)

    return finish(store, plan_, outcomes, started_at)


def finish(
    store: DlqStore, plan_: ReplayPlan, outcomes: Mapping[str, ItemOutcome], started_at: str
) -> ReplayResult:
    """The result of an execution that decided every item of ``plan_`` (logged once)."""
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


def already_acknowledged(item: ReplayItem, acks: Mapping[str, ReplayAck]) -> ItemOutcome | None:
    """The outcome of ``item`` when an acknowledgement of it exists (which must name the
    plan's checksum of the record), else None."""
    ack = acks.get(item.record_id)
    if ack is None:
        return None
    if ack.record_sha256 != item.record_sha256:
        raise DlqAckMismatch(
            f"the acknowledgement of record {item.record_id} names another checksum"
        )
    return ItemOutcome(item.record_id, item.idempotency_key, "already_acknowledged")


def _triage(
    plan_: ReplayPlan, acks: Mapping[str, ReplayAck]
) -> tuple[dict[str, ItemOutcome], list[ReplayItem]]:
    """The outcomes known before anything is resolved, and the items still to replay."""
    outcomes: dict[str, ItemOutcome] = {}
    pending: list[ReplayItem] = []
    for item in plan_.items:
        done = already_acknowledged(item, acks)
        if done is not None:
            outcomes[item.record_id] = done
        elif not item.replayable:
            outcomes[item.record_id] = ItemOutcome(
                item.record_id,
                item.idempotency_key,
                "not_replayable",
                reason_code=item.reason_code,
            )
        else:
            pending.append(item)
    return outcomes, pending


def _check_resolution(resolution: Resolution, pending: Sequence[ReplayItem]) -> None:
    """Every pending record is either a row or a rejection, exactly once."""
    ids = resolution.record_ids
    expected = {item.record_id for item in pending}
    passed = set(ids)
    if (
        resolution.rows.num_rows != len(ids)
        or len(passed) != len(ids)
        or passed & set(resolution.rejected)
        or passed | set(resolution.rejected) != expected
    ):
        raise ReplayError(
            "the resolver did not answer for every record exactly once; nothing was applied"
        )


def ack_docs(plan_: ReplayPlan, items: Sequence[ReplayItem]) -> list[dict[str, Any]]:
    """The acknowledgement documents of ``items``, applied under ``plan_``."""
    return [
        {
            "record_id": item.record_id,
            "record_sha256": item.record_sha256,
            "plan_id": plan_.plan_id,
            "idempotency_key": item.idempotency_key,
            "outcome": "applied",
            "resolver_identity": plan_.resolver_identity,
            "target_identity": plan_.target_identity,
        }
        for item in items
    ]


__all__ = [
    "MANIFEST_FIXES",
    "OUTCOMES",
    "RESULT_SCHEMA",
    "ItemOutcome",
    "Outcome",
    "RecordResolver",
    "ReplayResult",
    "ReplaySink",
    "Resolution",
    "ack_docs",
    "already_acknowledged",
    "check_fresh",
    "check_identities",
    "execute",
    "finish",
    "replay_id",
]
