"""The release gate (SPEC §7): verify evidence bundles and apply a release policy.

* :mod:`~dpone.ops.gate.policy`: what a release accepts, from flags and a policy file;
* :mod:`~dpone.ops.gate.confine`: reading a bundle or an index confined to the roots;
* :mod:`~dpone.ops.gate.checks`: the three steps per bundle, then the policy;
* :mod:`~dpone.ops.gate.report`: the verdicts and the ``dpone.release-gate.v1`` report.

The names below are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpone._lazy import exports

if TYPE_CHECKING:
    from dpone.ops.gate.checks import check_bundle, evaluate
    from dpone.ops.gate.policy import (
        DATA_OUTCOMES,
        DEFAULT_ALLOWED_OUTCOMES,
        DEFAULT_MAX_QUARANTINE_RATIO,
        POLICY_SCHEMA_ID,
        GatePolicy,
        GateUsageError,
        load_policy_file,
    )
    from dpone.ops.gate.report import (
        GATE_SCHEMA_ID,
        REPORT_JSON,
        REPORT_MD,
        SUBJECTS,
        BundleResult,
        GateCode,
        GateFinding,
        GateReport,
        quarantine_ratio,
        render_markdown,
        write_report,
    )

_POLICY = "dpone.ops.gate.policy"
_REPORT = "dpone.ops.gate.report"
__getattr__, __dir__ = exports(
    __name__,
    {
        "check_bundle": "dpone.ops.gate.checks",
        "evaluate": "dpone.ops.gate.checks",
        **dict.fromkeys(
            (
                "DATA_OUTCOMES",
                "DEFAULT_ALLOWED_OUTCOMES",
                "DEFAULT_MAX_QUARANTINE_RATIO",
                "POLICY_SCHEMA_ID",
                "GatePolicy",
                "GateUsageError",
                "load_policy_file",
            ),
            _POLICY,
        ),
        **dict.fromkeys(
            (
                "GATE_SCHEMA_ID",
                "REPORT_JSON",
                "REPORT_MD",
                "SUBJECTS",
                "BundleResult",
                "GateCode",
                "GateFinding",
                "GateReport",
                "quarantine_ratio",
                "render_markdown",
                "write_report",
            ),
            _REPORT,
        ),
    },
    ("checks", "confine", "policy", "report"),
)

__all__ = [
    "DATA_OUTCOMES",
    "DEFAULT_ALLOWED_OUTCOMES",
    "DEFAULT_MAX_QUARANTINE_RATIO",
    "GATE_SCHEMA_ID",
    "POLICY_SCHEMA_ID",
    "REPORT_JSON",
    "REPORT_MD",
    "SUBJECTS",
    "BundleResult",
    "GateCode",
    "GateFinding",
    "GatePolicy",
    "GateReport",
    "GateUsageError",
    "check_bundle",
    "evaluate",
    "load_policy_file",
    "quarantine_ratio",
    "render_markdown",
    "write_report",
]
