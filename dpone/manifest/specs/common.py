"""What every spec shares: paths as the manifest writes them, and the incremental cursor."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpone.records import frozen

Section = Mapping[str, Any]


def resolve_under(base: Path, text: str) -> Path:
    """A path as written in the manifest, joined to the manifest's folder and normalized
    lexically: a link in it is not resolved here. The folder the manifest names (the work dir,
    a sink folder) may be a link, followed when it is opened; a link *below* it, where dpone
    keeps a folder of its own (``<work_dir>/dlq``), must stay visible to be refused
    (:func:`dpone.durable.open_below`), not be resolved away at compile time."""
    return Path(os.path.normpath(base / Path(text).expanduser()))


def display_path(path: Path, base: Path) -> str:
    """Relative to the manifest's folder when ``path`` is under it, else the bare file name."""
    try:
        rel = os.path.relpath(path, base.resolve())
    except ValueError:
        return path.name
    return path.name if rel.startswith("..") else Path(rel).as_posix()


@frozen
class IncrementalPlan:
    """``source.incremental``: rows with ``cursor_column`` at or above the committed cursor
    (minus ``lag``, in the cursor's unit), below ``end_value`` when it is set (SPEC §6)."""

    cursor_column: str
    initial_value: str | int | float | None
    lag: int | float
    end_value: str | int | float | None


def incremental_plan(section: Section) -> IncrementalPlan | None:
    found = section.get("incremental")
    if found is None:
        return None
    return IncrementalPlan(
        found["cursor_column"],
        found["initial_value"],
        lag=found["lag"],
        end_value=found["end_value"],
    )
