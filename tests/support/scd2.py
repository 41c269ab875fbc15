"""An scd2 pipeline over :class:`tests.support.replay_pipeline.Pipeline`, and its history read
back from the sink with every time replaced by its rank (which load it was), so a history
written at other times by other runs compares equal when the loads did the same."""

from __future__ import annotations

import json
from typing import Any

from tests.support.replay_pipeline import TABLE, Pipeline

#: A version: id, name, amount, rank of valid_from, rank of valid_to (None: open).
Version = tuple[int, str, str, int, int | None]


def write_scd2_manifest(pipeline: Pipeline, **settings: Any) -> None:
    """The pipeline's manifest with ``merge_strategy: scd2`` on ``id`` (and ``settings``)."""
    pipeline.write_manifest(mode="merge", **settings.pop("manifest", {}))
    doc = json.loads(pipeline.manifest.read_text(encoding="utf-8"))
    doc["sink"]["strategy"] |= {"merge_strategy": "scd2", **settings}
    pipeline.manifest.write_text(json.dumps(doc, indent=2), encoding="utf-8")


def history(pipeline: Pipeline) -> list[Version]:
    """Every version of the target, times as ranks among the times the history holds."""
    rows = pipeline.sql(
        f'SELECT id, name, CAST(amount AS VARCHAR), "_dpone_valid_from", "_dpone_valid_to" '
        f'FROM "{pipeline.dataset}"."{TABLE}"'
        if pipeline.kind == "duckdb"
        else f'SELECT id, name, amount::text, "_dpone_valid_from", "_dpone_valid_to" '
        f'FROM "{pipeline.dataset}"."{TABLE}"'
    )
    times = sorted({t for r in rows for t in r[3:] if t is not None})
    rank = {t: i for i, t in enumerate(times)}
    return sorted(
        (int(r[0]), str(r[1]), str(r[2]), rank[r[3]], None if r[4] is None else rank[r[4]])
        for r in rows
    )
