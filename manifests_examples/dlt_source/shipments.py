"""A user's own dlt resource, read by the dlt_source example (`type: dlt`).

Any ``@dlt.resource`` works the same way: dpone imports it at run time, calls it with the
manifest's ``args``, and hands its committed cursor to the resource's ``incremental``
argument, so the second run yields only newer shipments.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import dlt

HERE = Path(__file__).resolve().parent


@dlt.resource(name="shipments", primary_key="id")
def shipments(
    path: str = "data/shipments.jsonl",
    updated_at: Any = dlt.sources.incremental("updated_at"),
) -> Iterator[dict[str, Any]]:
    """Shipments from a carrier's export; ``updated_at`` arrives as a real datetime."""
    with (HERE / path).open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            row["updated_at"] = datetime.fromisoformat(row["updated_at"])
            yield row
