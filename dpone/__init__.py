"""dpone: declarative data loads with runtime data contracts, a durable DLQ and evidence.

The public Python API (SPEC §11, ``docs/python-api.md``)::

    import dpone

    report = dpone.run("manifest.yaml")   # raises ConfigError / RunFailed, else a RunReport
    print(report.status, report.data_outcome)

Everything listed in ``__all__`` is imported on first use (PEP 562), so ``import dpone`` loads
neither pyarrow nor duckdb nor dlt: an orchestrator can import it at DAG parse time.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from dpone.errors import ConfigError, DponeError, ErrorDetail, ManifestError, RunFailed

if TYPE_CHECKING:
    from dpone import ops
    from dpone.api import Validation, compile, run, validate
    from dpone.manifest.plan import Plan
    from dpone.runtime.report import RowCounts, RunReport

__version__ = "0.1.0"

#: name -> the module that defines it, imported by :func:`__getattr__` on first use.
_LAZY: dict[str, str] = {
    "validate": "dpone.api",
    "compile": "dpone.api",
    "run": "dpone.api",
    "Validation": "dpone.api",
    "Plan": "dpone.manifest.plan",
    "RunReport": "dpone.runtime.report",
    "RowCounts": "dpone.runtime.report",
}
_SUBMODULES = frozenset({"ops"})


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"dpone.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dpone' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access skips __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


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
    "run",
    "validate",
]
