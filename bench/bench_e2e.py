"""End to end: ``dpone run`` of a 1,000,000-row orders CSV (8 columns, 1% bad) into DuckDB,
side by side with what users would write instead, every program a whole process.

Each program is timed as a whole process (interpreter start and imports included), on equal
terms (``bench/e2e_procs.py``: transparent huge pages off, bytecode compiled beforehand, the
same cores under ``taskset``, peak RSS from GNU time), the programs alternating round by round
(each round starts one program later), median of :data:`REPEATS`:

* dpone on one core and on two: ``python -m dpone run manifest.yaml --format json``, the whole
  run of SPEC §6 (quarantine, the DLQ durable on this disk, evidence, state), ``chunk_size``
  250,000; its artifacts are checked after every run;
* (a) the hand-written script on one core: pyarrow CSV (all text) -> the exact kernel
  (:func:`bench.e2e_data.split_valid`) -> the valid rows into DuckDB;
* (b) on two cores, DuckDB alone: ``CREATE TABLE AS SELECT * FROM read_csv(...)`` with no check,
  and DuckDB SQL doing the contract (``read_csv`` all_varchar -> TRY_CAST and checks -> a valid
  and a reject table);
* (e) start-up: dpone on a 2-row CSV against ``python -c "import pyarrow, duckdb"``, one core;
  the pipeline's work dir exists (it ran once before, as any pipeline after its first run).

Targets (rows/s, so a ratio above 1 is dpone faster): (a) >= 1.1x; (b) >= 1.0x against the
plain load and >= 1.2x against the SQL contract; (c) dpone on two cores >= 1.5x dpone on one;
(e) the 2-row run at most 0.25 s above the imports; a 5,000,000-row run (two cores, once) under
1 GB of peak RSS. (d), ``engine: dask``, is ``bench/bench_dask.py``. Last, dlt with Pydantic
``discard_row`` on 200,000 rows in-process (``bench/e2e_dlt.py``), target >= 25x.

Everything lives under one ``tempfile.mkdtemp()`` folder in /tmp, which must be a real disk
(the bench prints the filesystem type and refuses tmpfs), and is removed. Wall time is the
target; CPU time is printed beside it because the machine may be shared, and the load average
before and after. ``DPONE_BENCH_E2E_REPEATS`` sets the rounds.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from bench import e2e_data, e2e_dlt, e2e_procs
from bench.e2e_procs import Pinned
from bench.e2e_programs import PROGRAMS
from bench.e2e_report import BIG, Report

ROWS = 1_000_000
BIG_ROWS = 5_000_000
SMALL_ROWS = 2
REPEATS = int(os.environ.get("DPONE_BENCH_E2E_REPEATS", "5"))
CHUNK_SIZE = 250_000
NAME = "orders_e2e"
CSV, BIG_CSV, SMALL_CSV = "data/orders.csv", "data/orders-5m.csv", "data/orders-2.csv"
REPO = Path(__file__).resolve().parents[1]
CHECKSUM_SQL = (
    "SELECT count(*), sum(id), sum(amount), sum(quantity), sum(epoch_us(updated_at)), "
    "count(*) FILTER (WHERE is_gift), round(sum(discount), 2), count(discount), count(note) "
    "FROM analytics.orders"
)


@dataclass
class Outcome:
    seconds: float  # wall
    cpu: float  # user + sys of the process
    rss_mb: float
    loaded: int
    rejected: int
    checksum: tuple[Any, ...] | None = None
    stages: dict[str, float] = field(default_factory=dict)


def _query(db: Path, sql: str) -> tuple[Any, ...]:
    with duckdb.connect(str(db), read_only=True) as con:
        row = con.execute(sql).fetchone()
        assert row is not None
        return tuple(row)


# --- the programs -----------------------------------------------------------------------------


def _dpone(pinned: Pinned, tag: str, csv: str = CSV, *, fresh: bool = True) -> Outcome:
    """``dpone run`` of ``csv``; ``fresh``: a new work dir (removed after), its artifacts
    checked; else the work dir of the runs before (start-up as a pipeline's next run has it)."""
    work = f".dpone-{tag if fresh else 'steady'}"
    if fresh:
        shutil.rmtree(pinned.base / work, ignore_errors=True)
    manifest = e2e_data.write_manifest(
        pinned.base / f"manifest-{tag}.yaml",
        csv=csv,
        work_dir=work,
        chunk_size=CHUNK_SIZE,
        name=NAME,
    )
    argv = [sys.executable, "-m", "dpone", "run", manifest.name, "--format", "json"]
    timed = pinned.run(argv, tag)
    out, err = pinned.output(tag)
    report = json.loads(out)
    rows = report["rows"]
    outcome = Outcome(timed.seconds, timed.cpu, timed.rss_mb, rows["loaded"], rows["quarantined"])
    if fresh:
        _check_artifacts(pinned.base / work, report["run_id"], rows["quarantined"])
        outcome.checksum = _query(pinned.base / work / f"{NAME}.duckdb", CHECKSUM_SQL)
        outcome.stages = Report.stages(err, timed.spawned, timed.seconds)
        shutil.rmtree(pinned.base / work)
    return outcome


def _check_artifacts(work: Path, run_id: str, quarantined: int) -> None:
    """The run left what it promises: one DLQ segment line per rejected row, evidence, state."""
    lines = 0
    for segment in (work / "dlq" / "runs" / run_id / "segments").glob("*.jsonl"):
        with segment.open("rb") as fh:
            lines += sum(1 for line in fh if line.strip())
    evidence = work / "evidence" / NAME / run_id / "data_contract_evidence.json"
    state = work / "state" / f"{NAME}.json"
    if lines != quarantined or not evidence.is_file() or not state.is_file():
        raise RuntimeError(
            f"dpone artifacts: {lines} DLQ segment lines for {quarantined} quarantined rows, "
            f"evidence {'present' if evidence.is_file() else 'MISSING'}, "
            f"state {'present' if state.is_file() else 'MISSING'}"
        )
    json.loads(evidence.read_bytes())
    json.loads(state.read_bytes())


def _program(pinned: Pinned, tag: str, program: str, *, checksum: bool = False) -> Outcome:
    """One of :data:`PROGRAMS` on the 1,000,000-row CSV into a fresh DuckDB file."""
    db = pinned.base / f"{tag}.duckdb"
    db.unlink(missing_ok=True)
    timed = pinned.run([sys.executable, program, CSV, db.name, str(REPO)], tag)
    loaded, rejected = (int(n) for n in pinned.output(tag)[0].split())
    outcome = Outcome(timed.seconds, timed.cpu, timed.rss_mb, loaded, rejected)
    if checksum:
        outcome.checksum = _query(db, CHECKSUM_SQL)
    db.unlink()
    return outcome


def _imports(pinned: Pinned, tag: str) -> Outcome:
    timed = pinned.run([sys.executable, "imports.py"], tag)
    return Outcome(timed.seconds, timed.cpu, timed.rss_mb, 0, 0)


# --- the run ----------------------------------------------------------------------------------


def _cases(one: Pinned, two: Pinned | None) -> dict[str, Callable[[str], Outcome]]:
    """Every timed case by its label; the two-core ones only where there are two cores."""
    cases: dict[str, Callable[[str], Outcome]] = {
        "dpone, 1 core": lambda tag: _dpone(one, tag),
        "(a) script, 1 core": lambda tag: _program(one, tag, "handwritten.py", checksum=True),
        "dpone 2 rows, 1 core": lambda tag: _dpone(one, tag, SMALL_CSV, fresh=False),
        "(e) imports, 1 core": lambda tag: _imports(one, tag),
    }
    if two is not None:
        cases["dpone, 2 cores"] = lambda tag: _dpone(two, tag)
        cases["(b) DuckDB CTAS, 2 cores"] = lambda tag: _program(two, tag, "duckdb_ctas.py")
        cases["(b) DuckDB SQL contract, 2 cores"] = lambda tag: _program(
            two, tag, "duckdb_contract.py"
        )
    return cases


def _data(base: Path) -> int:
    """The CSVs (1,000,000 rows, its first 2 and its first 200,000, and 5,000,000 rows) in
    ``base/data``; the number of bad rows of the first."""
    began = time.perf_counter()
    bad = e2e_data.write_orders_csv(base / CSV, ROWS)
    e2e_data.copy_head(base / CSV, base / SMALL_CSV, SMALL_ROWS)
    e2e_data.copy_head(base / CSV, base / "data" / "orders-head.csv", e2e_dlt.DLT_ROWS)
    e2e_data.write_orders_csv(base / BIG_CSV, BIG_ROWS)
    size = (base / CSV).stat().st_size
    print(
        f"{ROWS:,} rows ({size / 1e6:.0f} MB CSV, {bad:,} bad = {bad / ROWS:.0%}) and "
        f"{BIG_ROWS:,} rows written in {time.perf_counter() - began:.1f} s to {base} "
        f"({e2e_procs.filesystem(base)})",
        flush=True,
    )
    return bad


def run() -> None:
    base = Path(tempfile.mkdtemp(prefix="dpone-bench-e2e-", dir="/tmp"))
    try:
        fs = e2e_procs.filesystem(base)
        if fs in e2e_procs.NOT_A_DISK:
            print(f"  {base} is on {fs}, not a disk: the comparison needs the real disk; skipped")
            return
        (base / "data").mkdir()
        for name, text in PROGRAMS.items():
            (base / name).write_text(text, encoding="utf-8")
        bad = _data(base)
        env = e2e_procs.child_env(base)
        e2e_procs.compile_bytecode(env, REPO / "dpone", REPO / "bench", base)
        if not e2e_procs.thp_disabled_in_children():
            print("  transparent huge pages could not be turned off for the programs; skipped")
            return
        cores = sorted(os.sched_getaffinity(0))
        one = Pinned(str(cores[-1]), base, env)
        two = Pinned(f"{cores[-2]},{cores[-1]}", base, env) if len(cores) > 1 else None
        cases = _cases(one, two)
        report = Report(ROWS, bad, REPEATS, os.getloadavg(), BIG_ROWS)
        print(
            f"  chunk_size {CHUNK_SIZE:,}; whole processes, THP off, bytecode compiled; one core "
            f"= taskset -c {one.cores}, two = {two.cores if two else 'n/a'}; median of {REPEATS}, "
            f"alternating; {os.cpu_count()} cores, load average {report.load_before}",
            flush=True,
        )
        labels = list(cases)
        for label in labels:  # untimed: page cache, DuckDB's and dpone's first-run work
            cases[label](f"warm{labels.index(label)}")
        for rep in range(REPEATS):
            turn = labels[rep % len(labels) :] + labels[: rep % len(labels)]
            for label in turn:
                report.add(label, cases[label](f"r{rep}c{labels.index(label)}"))
        if two is not None:
            report.add(BIG, _dpone(two, "big", BIG_CSV))
        with e2e_dlt.dlt_sandbox(base, int(one.cores)):
            dlt_one = e2e_dlt.dlt_case(base, base / "data" / "orders-head.csv")
            dlts = [dlt_one(f"dlt{rep}") for rep in range(e2e_dlt.DLT_REPEATS)]
        report.dlt = [took for took, _ in dlts]
        report.dlt_note = e2e_dlt.dlt_note(base / "data" / "orders-head.csv", dlts[0][1])
        report.print()
    finally:
        shutil.rmtree(base, ignore_errors=True)
