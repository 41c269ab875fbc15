"""Seed 004's DLQ services: ``DlqService`` (write and read a run's dead letters) and
``DlqReplayService`` (:mod:`dpone.ops.replay.service`), over the real store.

``DlqService.write_run`` is how a run turns its rejected rows into ``dpone.dlq.v1`` records:
one DLQ run opened, the rows written as one durable chunk, the index closed; a failure aborts
the run (replay refuses it) and raises.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from dpone.contracts.dlq import DlqPolicy
from dpone.dlq.index import DlqIndex
from dpone.dlq.model import DlqRecord
from dpone.dlq.rejects import RejectedRow
from dpone.dlq.result import RunResult
from dpone.dlq.store import DlqStore
from dpone.ops.replay.service import DlqRecordResolver, DlqReplayService, DlqReplaySink
from dpone.ops.summary import DlqSummary, summarize


class DlqService:
    """The dead letters of one store under one policy (``policy`` defaults to the store's)."""

    def __init__(self, store: DlqStore, *, policy: DlqPolicy | None = None) -> None:
        if (
            policy is not None
            and dataclasses.replace(policy, directory=store.policy.directory) != store.policy
        ):
            # The records follow the service's policy (pii_policy, retention, limits): the
            # same folder, under a store checked against that policy.
            store = DlqStore(
                store.root,
                dataclasses.replace(policy, directory=str(store.root)),
                clock=store.clock,
                environment=store.environment,
                require_signature=store.require_signature,
            )
        self.store = store
        self.policy = store.policy

    def write_run(
        self,
        run_id: str,
        load_id: str,
        rows: Sequence[RejectedRow],
        *,
        pipeline: str | None = None,
    ) -> RunResult:
        """Write ``rows`` as the records of run ``run_id`` and close it; durable on return."""
        with self.store.open_run(run_id, load_id, pipeline=pipeline) as writer:
            if rows:
                writer.write_chunk(rows)
            return writer.close()

    def index(self, run_id: str) -> DlqIndex:
        """The run's index, verified."""
        return self.store.read_index(run_id)

    def records(self, run_id: str) -> list[DlqRecord]:
        """Every record of the run, each verified, in record-id order."""
        return list(self.store.iter_records(run_id))

    def summary(self, run_id: str | None = None) -> DlqSummary:
        """Counts per reason (one run, or every run of the store)."""
        return summarize(self.store, run_id)


__all__ = ["DlqRecordResolver", "DlqReplayService", "DlqReplaySink", "DlqService"]
