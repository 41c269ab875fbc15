"""The replay failures: every one stops before a row is applied (SPEC §8)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpone.errors import EXIT_CONFIG, EXIT_REPLAY_EXECUTOR_REQUIRED, DponeError, Stage

if TYPE_CHECKING:
    from dpone.contracts.reasons import ReasonCode


class ReplayError(DponeError):
    """Root of the replay failures; all of them stop before a row is applied."""

    code = "DPONE_DLQ_REPLAY_ERROR"
    stage: Stage = "replay"


class ReplayRunAborted(ReplayError):
    code = "DPONE_DLQ_REPLAY_RUN_ABORTED"


class ReplayRunOpen(ReplayError):
    code = "DPONE_DLQ_REPLAY_RUN_OPEN"


class ReplayExecutorRequired(ReplayError):
    code = "DPONE_DLQ_REPLAY_EXECUTOR_REQUIRED"
    exit_code = EXIT_REPLAY_EXECUTOR_REQUIRED


class ReplayPlanMismatch(ReplayError):
    """The plan is not the plan the store, the resolver and the sink give now."""

    code = "DPONE_DLQ_REPLAY_PLAN_MISMATCH"


class ReplayPlanInvalid(ReplayError):
    code = "DPONE_DLQ_REPLAY_PLAN_INVALID"
    exit_code = EXIT_CONFIG


class ReplayPlanTooLarge(ReplayError):
    code = "DPONE_DLQ_REPLAY_PLAN_TOO_LARGE"


class ReplaySourceChanged(ReplayError):
    """A source file is not the file the record was read from (its SHA-256 differs)."""

    code = "DPONE_DLQ_REPLAY_SOURCE_CHANGED"


class ReplayUnsupported(ReplayError):
    code = "DPONE_DLQ_REPLAY_UNSUPPORTED"
    exit_code = EXIT_CONFIG


class ReplayLoadNotCommitted(ReplayError):
    """The run that quarantined the rows never committed its own load."""

    code = "DPONE_DLQ_REPLAY_LOAD_NOT_COMMITTED"


class ReplayPipelineMismatch(ReplayError):
    """The DLQ run belongs to another pipeline than the manifest's."""

    code = "DPONE_DLQ_REPLAY_PIPELINE_MISMATCH"
    exit_code = 2


class ReplayRefOutsideSource(ReplayError):
    """A record names a file the manifest's source glob does not match."""

    code = "DPONE_DLQ_REPLAY_REF_OUTSIDE_SOURCE"
    exit_code = 2


class RowStillRejected(ReplayError):
    """Why a resolver keeps one record's row out: it stays pending."""

    code = "DPONE_DLQ_REPLAY_ROW_REJECTED"

    def __init__(
        self, reason: ReasonCode, column: str | None = None, *, rule_id: str | None = None
    ) -> None:
        where = f" (column {column})" if column else ""
        rule = f" (assertion {rule_id})" if rule_id else ""
        super().__init__(f"the row is still rejected: {reason.value}{where}{rule}")
        self.reason = reason
        self.column_name = column
        self.rule_id = rule_id


__all__ = [
    "ReplayError",
    "ReplayExecutorRequired",
    "ReplayLoadNotCommitted",
    "ReplayPipelineMismatch",
    "ReplayPlanInvalid",
    "ReplayPlanMismatch",
    "ReplayPlanTooLarge",
    "ReplayRefOutsideSource",
    "ReplayRunAborted",
    "ReplayRunOpen",
    "ReplaySourceChanged",
    "ReplayUnsupported",
    "RowStillRejected",
]
