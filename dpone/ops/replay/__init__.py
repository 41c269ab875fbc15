"""Replay of quarantined rows (SPEC §8): a bounded, immutable plan of one closed DLQ run,
executed once through a resolver and a sink, each row acknowledged after the sink committed it.

* :mod:`~dpone.ops.replay.errors`: the replay failures (``DPONE_DLQ_REPLAY_*``);
* :mod:`~dpone.ops.replay.document`: the plan document, its ids and keys, a plan file read back;
* :mod:`~dpone.ops.replay.reading`: the verified read of a run, which builds the plan;
* :mod:`~dpone.ops.replay.executor`: the executor behind two Protocols (resolver, sink);
* :mod:`~dpone.ops.replay.file_resolver` and :mod:`~dpone.ops.replay.binding`: the
  first-party executor of ``quarantine-replay --execute``, for a manifest's file source;
* :mod:`~dpone.ops.replay.service`: ``DlqReplayService``, seed 004's Python interface.

The names below are imported on first use: the plan needs no Arrow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpone._lazy import exports

if TYPE_CHECKING:
    from dpone.ops.replay.binding import (
        ReplayBinding,
        SinkReplayTarget,
        batch_load_id,
        bind,
        execute_replay,
    )
    from dpone.ops.replay.document import (
        DEFAULT_MAX_ITEMS,
        HARD_MAX_ITEMS,
        KEY_PATTERN,
        PLAN_SCHEMA,
        UNBOUND,
        ReplayItem,
        ReplayPlan,
        body_checksum,
        idempotency_key,
        is_valid_identity,
        load_plan,
        replay_bound,
    )
    from dpone.ops.replay.errors import (
        ReplayError,
        ReplayExecutorRequired,
        ReplayLoadNotCommitted,
        ReplayPipelineMismatch,
        ReplayPlanInvalid,
        ReplayPlanMismatch,
        ReplayPlanTooLarge,
        ReplayRefOutsideSource,
        ReplayRunAborted,
        ReplayRunOpen,
        ReplaySourceChanged,
        ReplayUnsupported,
        RowStillRejected,
    )
    from dpone.ops.replay.executor import (
        OUTCOMES,
        RESULT_SCHEMA,
        ItemOutcome,
        Outcome,
        RecordResolver,
        ReplayResult,
        ReplaySink,
        Resolution,
        execute,
        replay_id,
    )
    from dpone.ops.replay.file_resolver import (
        FileRowResolver,
        fit_to_target,
        resolver_identity,
    )
    from dpone.ops.replay.reading import (
        RunRead,
        plan,
        read_run,
        replayable_index,
    )
    from dpone.ops.replay.service import (
        DlqRecordResolver,
        DlqReplayService,
        DlqReplaySink,
    )

__getattr__, __dir__ = exports(
    __name__,
    {
        "ReplayError": "dpone.ops.replay.errors",
        "ReplayExecutorRequired": "dpone.ops.replay.errors",
        "ReplayLoadNotCommitted": "dpone.ops.replay.errors",
        "ReplayPipelineMismatch": "dpone.ops.replay.errors",
        "ReplayPlanInvalid": "dpone.ops.replay.errors",
        "ReplayPlanMismatch": "dpone.ops.replay.errors",
        "ReplayPlanTooLarge": "dpone.ops.replay.errors",
        "ReplayRefOutsideSource": "dpone.ops.replay.errors",
        "ReplayRunAborted": "dpone.ops.replay.errors",
        "ReplayRunOpen": "dpone.ops.replay.errors",
        "ReplaySourceChanged": "dpone.ops.replay.errors",
        "ReplayUnsupported": "dpone.ops.replay.errors",
        "RowStillRejected": "dpone.ops.replay.errors",
        "DEFAULT_MAX_ITEMS": "dpone.ops.replay.document",
        "HARD_MAX_ITEMS": "dpone.ops.replay.document",
        "KEY_PATTERN": "dpone.ops.replay.document",
        "PLAN_SCHEMA": "dpone.ops.replay.document",
        "UNBOUND": "dpone.ops.replay.document",
        "ReplayItem": "dpone.ops.replay.document",
        "ReplayPlan": "dpone.ops.replay.document",
        "body_checksum": "dpone.ops.replay.document",
        "idempotency_key": "dpone.ops.replay.document",
        "is_valid_identity": "dpone.ops.replay.document",
        "load_plan": "dpone.ops.replay.document",
        "replay_bound": "dpone.ops.replay.document",
        "RunRead": "dpone.ops.replay.reading",
        "plan": "dpone.ops.replay.reading",
        "read_run": "dpone.ops.replay.reading",
        "replayable_index": "dpone.ops.replay.reading",
        "OUTCOMES": "dpone.ops.replay.executor",
        "RESULT_SCHEMA": "dpone.ops.replay.executor",
        "ItemOutcome": "dpone.ops.replay.executor",
        "Outcome": "dpone.ops.replay.executor",
        "RecordResolver": "dpone.ops.replay.executor",
        "ReplayResult": "dpone.ops.replay.executor",
        "ReplaySink": "dpone.ops.replay.executor",
        "Resolution": "dpone.ops.replay.executor",
        "execute": "dpone.ops.replay.executor",
        "replay_id": "dpone.ops.replay.executor",
        "FileRowResolver": "dpone.ops.replay.file_resolver",
        "fit_to_target": "dpone.ops.replay.file_resolver",
        "resolver_identity": "dpone.ops.replay.file_resolver",
        "ReplayBinding": "dpone.ops.replay.binding",
        "SinkReplayTarget": "dpone.ops.replay.binding",
        "batch_load_id": "dpone.ops.replay.binding",
        "bind": "dpone.ops.replay.binding",
        "execute_replay": "dpone.ops.replay.binding",
        "DlqRecordResolver": "dpone.ops.replay.service",
        "DlqReplayService": "dpone.ops.replay.service",
        "DlqReplaySink": "dpone.ops.replay.service",
    },
    ("errors", "document", "reading", "executor", "file_resolver", "binding", "service"),
)

__all__ = [
    "DEFAULT_MAX_ITEMS",
    "HARD_MAX_ITEMS",
    "KEY_PATTERN",
    "OUTCOMES",
    "PLAN_SCHEMA",
    "RESULT_SCHEMA",
    "UNBOUND",
    "DlqRecordResolver",
    "DlqReplayService",
    "DlqReplaySink",
    "FileRowResolver",
    "ItemOutcome",
    "Outcome",
    "RecordResolver",
    "ReplayBinding",
    "ReplayError",
    "ReplayExecutorRequired",
    "ReplayItem",
    "ReplayLoadNotCommitted",
    "ReplayPipelineMismatch",
    "ReplayPlan",
    "ReplayPlanInvalid",
    "ReplayPlanMismatch",
    "ReplayPlanTooLarge",
    "ReplayRefOutsideSource",
    "ReplayResult",
    "ReplayRunAborted",
    "ReplayRunOpen",
    "ReplaySink",
    "ReplaySourceChanged",
    "ReplayUnsupported",
    "Resolution",
    "RowStillRejected",
    "RunRead",
    "SinkReplayTarget",
    "batch_load_id",
    "bind",
    "body_checksum",
    "execute",
    "execute_replay",
    "fit_to_target",
    "idempotency_key",
    "is_valid_identity",
    "load_plan",
    "plan",
    "read_run",
    "replay_bound",
    "replay_id",
    "replayable_index",
    "resolver_identity",
]
