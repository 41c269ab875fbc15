"""Memory stays bounded by the chunk, not the input: 5,000,000 CSV rows through ``dpone run``.

The CSV is generated with Arrow compute kernels, 500,000 rows at a time (no Python per row),
and the run happens in a process of its own so that its peak RSS is its own. That process is
started by a small launcher, not by the test: Linux keeps a process's RSS high-water mark
across ``exec``, so a child forked straight from a pytest worker that holds a gigabyte reports
that gigabyte as its own peak (seen in CI: 1,032 MiB for a run whose own peak is 320 MiB).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pytest

from dpone.published import schema_errors

ROWS = 5_000_000
GENERATE_BATCH = 500_000
CHUNK_SIZE = 50_000
RSS_LIMIT_BYTES = 1 << 30

#: Runs argv[2:] and writes its peak RSS (kB, ``ru_maxrss`` of ``wait4``) to argv[1]; being a
#: fresh small process, what its child inherits as a high-water mark is a few MB.
LAUNCHER = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(child.pid, 0)
with open(sys.argv[1], "w") as out:
    out.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""
BASE_EPOCH_S = 1_767_225_600  # 2026-01-01T00:00:00Z

COLUMNS = {
    "id": {"type": "integer", "nullable": False},
    "name": {"type": "string"},
    "amount": {"type": "decimal", "precision": 12, "scale": 2, "nullable": False},
    "updated_at": {"type": "timestamp", "timezone": True, "nullable": False},
    "active": {"type": "boolean"},
    "category": {"type": "string"},
    "qty": {"type": "integer"},
    "note": {"type": "string"},
}


def _text(array: pa.Array) -> pa.Array:
    return pc.cast(array, pa.string())


def _join(*parts: pa.Array | str) -> pa.Array:
    return pc.binary_join_element_wise(*parts, "")


def generated_batch(start: int, n: int) -> pa.RecordBatch:
    """Rows ``start+1 .. start+n``, every column text in its canonical form."""
    ones = pc.fill_null(pa.nulls(n, pa.bool_()), True)
    ids = pc.add(pc.indices_nonzero(ones).cast(pa.int64()), start + 1)
    cents = pc.utf8_lpad(_text(pc.bit_wise_and(pc.shift_right(ids, 3), 63)), 2, "0")
    moments = pc.add(ids, BASE_EPOCH_S).cast(pa.timestamp("s", tz="UTC"))
    categories = pa.array(["books", "games", "music", "tools"]).take(pc.bit_wise_and(ids, 3))
    return pa.record_batch(
        {
            "id": _text(ids),
            "name": _join("customer-", _text(ids)),
            "amount": _join(_text(pc.bit_wise_and(ids, 8191)), ".", cents),
            "updated_at": pc.strftime(moments, format="%Y-%m-%dT%H:%M:%SZ"),
            "active": _text(pc.equal(pc.bit_wise_and(ids, 1), 0)),
            "category": categories,
            "qty": _text(pc.bit_wise_and(ids, 255)),
            "note": _join("order note ", _text(ids)),
        }
    )


def write_csv(path: Path, rows: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    schema = generated_batch(0, 1).schema
    options = pacsv.WriteOptions(quoting_style="none")
    with pacsv.CSVWriter(str(path), schema, write_options=options) as writer:
        for start in range(0, rows, GENERATE_BATCH):
            writer.write_batch(generated_batch(start, min(GENERATE_BATCH, rows - start)))


def write_manifest(root: Path) -> Path:
    doc = {
        "kind": "dpone.manifest.v1",
        "name": "memory_5m",
        "runtime": {"work_dir": ".dpone", "chunk_size": CHUNK_SIZE},
        "source": {"type": "file", "format": "csv", "path": "data/*.csv"},
        "sink": {
            "type": "duckdb",
            "database": "warehouse.duckdb",
            "dataset": "analytics",
            "table": "orders",
            "strategy": {"mode": "append"},
            "options": {"schema_contract": {"enforcement": "quarantine", "columns": COLUMNS}},
        },
    }
    path = root / "manifest.yaml"
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    return path


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Path]:
    """A folder for the run, removed afterwards: the CSV and the database are large."""
    yield tmp_path
    shutil.rmtree(tmp_path, ignore_errors=True)


@pytest.mark.slow
def test_five_million_rows_stay_under_one_gigabyte(workspace: Path) -> None:
    tmp_path = workspace
    write_csv(tmp_path / "data" / "orders.csv", ROWS)
    manifest = write_manifest(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPONE_")}

    started = time.monotonic()
    peak_file = tmp_path / "peak_rss_kb"
    run = [sys.executable, "-m", "dpone", "run", str(manifest), "--format", "json"]
    proc = subprocess.run(
        [sys.executable, "-c", LAUNCHER, str(peak_file), *run],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    stdout = proc.stdout
    elapsed = time.monotonic() - started
    peak = int(peak_file.read_text()) * 1024  # kilobytes on Linux
    print(f"\n5M-row run: peak RSS {peak / 2**20:.0f} MiB, {elapsed:.1f} s")

    assert proc.returncode == 0
    report = json.loads(stdout)
    assert schema_errors(report, "dpone.run.v1") == []
    assert report["rows"]["loaded"] == ROWS
    assert report["rows"]["chunks"] == ROWS // CHUNK_SIZE
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as con:
        found = con.execute(
            "SELECT count(*), count(DISTINCT id), max(id) FROM analytics.orders"
        ).fetchall()
    assert found == [(ROWS, ROWS, ROWS)]
    assert peak < RSS_LIMIT_BYTES
