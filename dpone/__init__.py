"""dpone: declarative data loads with runtime data contracts, a durable DLQ and evidence.

The public Python API (SPEC §11, ``docs/python-api.md``)::

    import dpone

    report = dpone.run("manifest.yaml")   # raises ConfigError / RunFailed, else a RunReport
    print(report.status, report.data_outcome)

Everything listed in ``__all__`` is imported on first use (PEP 562), so ``import dpone`` loads
neither pyarrow nor duckdb nor dlt: an orchestrator can import it at DAG parse time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpone._lazy import exports
from dpone._version import __version__
from dpone.errors import ConfigError, DponeError, ErrorDetail, ManifestError

if TYPE_CHECKING:
    from dpone import ops
    from dpone.api import RunFailed, Validation, compile, prevalidated_metadata, run, validate
    from dpone.manifest.plan import Plan
    from dpone.runtime.report import RowCounts, RunReport

__getattr__, __dir__ = exports(
    __name__,
    {
        "validate": "dpone.api",
        "compile": "dpone.api",
        "run": "dpone.api",
        "prevalidated_metadata": "dpone.api",
        "Validation": "dpone.api",
        "RunFailed": "dpone.api",
        "Plan": "dpone.manifest.plan",
        "RunReport": "dpone.runtime.report",
        "RowCounts": "dpone.runtime.report",
    },
    submodules=("ops",),
)

__all__ = [
    "ConfigError",
    "DponeError",
    "ErrorDetail",
    "ManifestError",
    "Plan",
    "RowCounts",
    "RunFailed",
    "RunReport",
    "Validation",
    "__version__",
    "compile",
    "ops",
    "prevalidated_metadata",
    "run",
    "validate",
]
