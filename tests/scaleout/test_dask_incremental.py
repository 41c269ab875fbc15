"""engine: dask keeps the incremental window's promises as engine: local does (SPEC §6, §12):
each partition de-duplicates the boundary rows against the committed state and counts its late
rows; the driver merges what the partitions saw into one boundary for the state."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from dpone import api
from tests.support.scaleout import csv_files, outcome, same_result, write_manifest

pytestmark = [pytest.mark.dask, pytest.mark.slow]


def test_an_incremental_rerun_gives_the_local_result(
    tmp_path: Path, local_cluster: dict[str, Any]
) -> None:
    csv_files(tmp_path)
    source = {
        "type": "file",
        "format": "csv",
        "path": "data/*.csv",
        "incremental": {"cursor_column": "id", "lag": 5},
    }
    local_path = write_manifest(tmp_path, "inc_local", "local", source)
    dask_path = write_manifest(tmp_path, "inc_dask", "dask", source, **local_cluster)
    for path in (local_path, dask_path):  # a rerun over unchanged input loads no row
        doc = yaml.safe_load(path.read_text())
        del doc["quality"]
        path.write_text(yaml.safe_dump(doc))
    same_result(outcome(local_path), outcome(dask_path))

    # The last row of part2.csv restated, a new row at the same cursor, a row within the lag
    # and a row older than the window, in a file no committed run read.
    (tmp_path / "data" / "part3.csv").write_text(
        "id,amount,kind\n201199,1199.25,k2\n201199,5.00,k0\n201196,2.00,k1\n150000,1.00,k0\n"
    )
    local, dask = rerun(local_path), rerun(dask_path)

    assert local == dask
    assert local["counts"] == (3604, 2, 3601, 1)  # read, loaded, skipped, late_skipped
    assert local["summary"]["rows_late_skipped"] == 1
    assert [r for r in local["rows"] if r[0] >= 201196] == [
        (201196, "1196.25"),  # amounts order as text
        (201196, "2.00"),
        (201197, "1197.25"),
        (201198, "1198.25"),
        (201199, "1199.25"),
        (201199, "5.00"),
    ]

    # Nothing new: neither engine loads a row twice.
    again_local, again_dask = rerun(local_path), rerun(dask_path)
    assert again_local == again_dask
    assert again_local["counts"][1] == 0
    assert again_local["rows"] == local["rows"]


def rerun(manifest: Path) -> dict[str, Any]:
    """A run of ``manifest`` that may quarantine nothing: its counts, evidence summary and
    the table's rows."""
    report = api.run(manifest).to_json()
    assert report["exit_code"] == 0, report["error"]
    work = manifest.parent / f".{manifest.stem}"
    with duckdb.connect(str(work / f"{manifest.stem}.duckdb"), read_only=True) as con:
        rows = con.sql("SELECT id, amount::VARCHAR AS a FROM dpone.t ORDER BY id, a").fetchall()
    evidence = (manifest.parent / report["evidence"]).read_text()
    summary = json.loads(evidence)["summary"]
    counts = tuple(report["rows"][k] for k in ("read", "loaded", "skipped", "late_skipped"))
    return {
        "counts": counts,
        "summary": {k: v for k, v in summary.items() if k != "chunks"},
        "rows": rows,
    }
