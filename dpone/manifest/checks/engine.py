"""Static checks of ``runtime.engine`` (SPEC §12) that the schema cannot express.

Validating never imports Dask: whether the ``dpone[dask]`` extra is installed is asked of the
import system (:func:`importlib.util.find_spec`), which finds a module without running it.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from dpone.errors import ErrorDetail
from dpone.manifest.context import CompileContext


def dask_installed() -> bool:
    """Whether ``dask.distributed`` can be imported (found, not imported)."""
    return importlib.util.find_spec("distributed") is not None


def check_engine(doc: dict[str, Any], ctx: CompileContext) -> list[ErrorDetail]:
    """``engine: dask`` needs the extra and refuses ``unique_columns``; ``partitions`` needs
    ``partition_column``."""
    errors: list[ErrorDetail] = []
    source = doc["source"]
    if "partitions" in source and "partition_column" not in source:
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_SOURCE_OPTION",
                "partitions needs partition_column: the column whose key range is split",
                "/source/partitions",
                at_key=True,
                fixes=("add partition_column: <an integer, date or timestamp column>",),
            )
        )
    if doc["runtime"].get("engine") != "dask":
        return errors
    if not dask_installed():
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_ENGINE_UNAVAILABLE",
                "engine: dask needs dask.distributed, which is not installed",
                "/runtime/engine",
                fixes=("pip install 'dpone[dask]'", "or set engine: local"),
            )
        )
    assertions = doc.get("quality", {}).get("assertions", {})
    if "unique_columns" in assertions:
        # Uniqueness across partitions would need every key at one place; dpone refuses it
        # rather than promise it partly (docs/scale-out.md).
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_ENGINE_UNSUPPORTED",
                "unique_columns is not supported with engine: dask (keys span partitions)",
                "/quality/assertions/unique_columns",
                at_key=True,
                fixes=(
                    "use engine: local for this pipeline",
                    "or enforce uniqueness in the sink (strategy merge with unique_key)",
                ),
            )
        )
    return errors


__all__ = ["check_engine", "dask_installed"]
