"""Real CSV files, as R, polars and Excel write them, loaded twice into one table.

The files in ``data/`` were written by the tools themselves (``make_files.R``,
``make_files.py``): R's empty row-name header, ``NA``, quoted strings with commas, quotes and
line breaks, ``TRUE``/``FALSE``, date-times with a space, a byte-order mark with CRLF line
ends, 250 columns. Each is loaded with ``dpone run`` into a DuckDB file twice (append), and
every value of both loads is compared with the file as Python's ``csv`` module reads it: the
second load of the same table must work, and nothing may be lost or changed.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.support.postgres import pg_query
from tests.support.processes import dpone_subprocess

DATA = Path(__file__).parent / "data"
FILES = sorted(p.name for p in DATA.glob("*.csv"))
NULL_MARKERS = ("NA",)
TRUE_WORDS = ("true", "t", "yes", "y", "1", "on")
FALSE_WORDS = ("false", "f", "no", "n", "0", "off")


def sink_name(header: list[str]) -> list[str]:
    """The documented rule for a name no sink can hold: an empty header is
    ``column_<position>`` (1-based); every other name is kept exactly as written."""
    return [name if name else f"column_{i}" for i, name in enumerate(header, 1)]


def read_reference(path: Path) -> tuple[list[str], list[list[str | None]]]:
    """The file as Python's csv module reads it (the BOM dropped, ``NA`` as missing)."""
    with open(path, encoding="utf-8-sig", newline="") as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], rows[1:]
    return header, [[None if cell in NULL_MARKERS else cell for cell in row] for row in body]


def same(loaded: Any, cell: str | None) -> bool:
    """Whether a loaded value is exactly the file's text ``cell``, read as its type."""
    if cell is None:
        return loaded is None
    if loaded is None:
        # an empty field of a non-text column is missing; of a text column it is ""
        return cell == ""
    if isinstance(loaded, bool):
        # coercion: safe types a Yes/No column (Titanic's) as boolean: PostgreSQL's words
        word = cell.strip().lower()
        return word in (TRUE_WORDS if loaded else FALSE_WORDS)
    if isinstance(loaded, int):
        return int(Decimal(cell)) == loaded and Decimal(cell) == loaded
    if isinstance(loaded, float):
        return math.isclose(float(cell), loaded, rel_tol=0, abs_tol=0)
    if isinstance(loaded, Decimal):
        return Decimal(cell) == loaded
    if isinstance(loaded, dt.datetime):
        return dt.datetime.fromisoformat(cell) == loaded
    if isinstance(loaded, dt.date):
        return loaded.isoformat() == cell
    return bool(loaded == cell)


def manifest(tmp: Path, data: Path, table: str, sink: dict[str, Any], dataset: str) -> Path:
    doc = {
        "name": "real_csv",
        "runtime": {"work_dir": str(tmp / "work"), "chunk_size": 7},
        "source": {
            "type": "file",
            "format": "csv",
            "path": str(data),
            "options": {"csv": {"null_values": list(NULL_MARKERS)}},
        },
        "sink": {
            **sink,
            "dataset": dataset,
            "table": table,
            "strategy": {"mode": "append"},
            "options": {"schema_contract": {"enforcement": "quarantine", "coercion": "safe"}},
        },
    }
    path = tmp / "project" / "manifest.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc), encoding="utf-8")  # JSON is YAML
    return path


def load_twice(
    tmp: Path,
    name: str,
    sink: dict[str, Any],
    *,
    dataset: str = "real",
    env: dict[str, str] | None = None,
) -> Path:
    # The data lives outside the manifest's folder, under a name the test did not choose.
    data = tmp / "elsewhere" / f"export {name}"
    data.parent.mkdir(parents=True)
    data.write_bytes((DATA / name).read_bytes())
    path = manifest(tmp, data, Path(name).stem, sink, dataset)
    for attempt in (1, 2):
        proc = dpone_subprocess(
            ["run", str(path), "--format", "json"], cwd=tmp, env=env or {}, timeout=240
        )
        assert proc.returncode == 0, (attempt, proc.stdout[-2000:], proc.stderr[-2000:])
        report = json.loads(proc.stdout)
        assert report["rows"]["quarantined"] == 0, (attempt, report["rows"])
    return data


def check_table(
    header: list[str], body: list[list[str | None]], columns: list[str], rows: list[tuple[Any, ...]]
) -> None:
    assert columns == sink_name(header)
    assert len(rows) == 2 * len(body)
    problems = []
    for i, row in enumerate(rows):
        want = body[i % len(body)]
        for j, (value, cell) in enumerate(zip(row, want, strict=True)):
            if not same(value, cell):
                problems.append((i, columns[j]))
    assert not problems, problems[:10]


@pytest.mark.parametrize("name", FILES)
def test_each_file_loads_twice_into_duckdb_value_for_value(tmp_path: Path, name: str) -> None:
    database = tmp_path / "warehouse.duckdb"
    load_twice(tmp_path, name, {"type": "duckdb", "database": str(database)})
    header, body = read_reference(DATA / name)
    with duckdb.connect(str(database), read_only=True) as con:
        rel = con.sql(f'SELECT * FROM real."{Path(name).stem}" ORDER BY rowid')
        check_table(header, body, list(rel.columns), rel.fetchall())


@pytest.mark.parametrize("name", ["mtcars.csv", "events.csv", "airquality.csv", "excel_utf8.csv"])
def test_files_load_twice_into_postgres_value_for_value(
    tmp_path: Path, name: str, pg_url: str, pg_schema: str
) -> None:
    sink = {"type": "postgres", "connection": "${DPONE_REAL_CSV_PG}"}
    load_twice(tmp_path, name, sink, dataset=pg_schema, env={"DPONE_REAL_CSV_PG": pg_url})
    header, body = read_reference(DATA / name)
    table = Path(name).stem
    names = pg_query(
        pg_url,
        "SELECT column_name FROM information_schema.columns "
        f"WHERE table_schema = '{pg_schema}' "
        f"AND table_name = '{table}' ORDER BY ordinal_position",
    )
    rows = pg_query(pg_url, f'SELECT * FROM "{pg_schema}"."{table}" ORDER BY ctid')
    check_table(header, body, [n for (n,) in names], rows)
