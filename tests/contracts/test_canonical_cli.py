"""SPEC §3's canonical forms through the CLI: R's and Excel's `TRUE`/`FALSE` and date-times
with a space load under the default (canonical-only) quarantine, declared or inferred."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import duckdb

from tests.support.processes import dpone_subprocess

CSV = (
    '"id","flag","at","at_utc"\n'
    "1,TRUE,1912-04-15 00:45:00,2020-01-01 10:00:00Z\n"
    "2,False,2020-02-29 23:59:59.5,2020-01-01 10:00:00+05:30\n"
    "3,true,2020-03-01T00:00:00,2020-01-01T10:00:00-01:00\n"
)


def run(tmp_path: Path, columns: dict[str, object]) -> tuple[dict[str, object], Path]:
    data = tmp_path / "export.csv"
    data.write_text(CSV, encoding="utf-8")
    database = tmp_path / "w.duckdb"
    manifest = {
        "name": "canonical_forms",
        "runtime": {"work_dir": str(tmp_path / "work")},
        "source": {"type": "file", "format": "csv", "path": str(data)},
        "sink": {
            "type": "duckdb",
            "database": str(database),
            "dataset": "raw",
            "table": "events",
            "options": {"schema_contract": {"enforcement": "quarantine", "columns": columns}},
        },
    }
    path = tmp_path / "manifest.yaml"
    path.write_text(json.dumps(manifest), encoding="utf-8")
    proc = dpone_subprocess(["run", str(path), "--format", "json"], cwd=tmp_path, env={})
    assert proc.returncode == 0, proc.stderr[-2000:]
    report: dict[str, object] = json.loads(proc.stdout)
    return report, database


def test_declared_columns_take_any_case_booleans_and_space_date_times(tmp_path: Path) -> None:
    report, database = run(
        tmp_path,
        {
            "flag": {"type": "boolean"},
            "at": {"type": "timestamp"},
            "at_utc": {"type": "timestamp", "timezone": True},
        },
    )
    assert report["rows"] == {**report["rows"], "loaded": 3, "quarantined": 0}  # type: ignore[dict-item]
    with duckdb.connect(str(database), read_only=True) as con:
        con.execute("SET TimeZone = 'UTC'")
        rows = con.sql('SELECT flag, "at", at_utc FROM raw.events ORDER BY id').fetchall()
    utc = dt.UTC
    assert rows == [
        (True, dt.datetime(1912, 4, 15, 0, 45), dt.datetime(2020, 1, 1, 10, tzinfo=utc)),
        (
            False,
            dt.datetime(2020, 2, 29, 23, 59, 59, 500000),
            dt.datetime(2020, 1, 1, 4, 30, tzinfo=utc),
        ),
        (True, dt.datetime(2020, 3, 1), dt.datetime(2020, 1, 1, 11, tzinfo=utc)),
    ]


def test_inference_types_them_too(tmp_path: Path) -> None:
    _, database = run(tmp_path, {})
    with duckdb.connect(str(database), read_only=True) as con:
        types = dict(
            con.sql(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_name = 'events'"
            ).fetchall()
        )
    assert types["flag"] == "BOOLEAN"
    assert types["at"] == "TIMESTAMP"
    assert types["at_utc"] == "TIMESTAMP WITH TIME ZONE"
