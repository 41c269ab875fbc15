"""End to end: ``dpone run`` of a 1,000,000-row orders CSV (1% bad) into DuckDB, side by side.

Two programs, timed as whole processes (interpreter start and imports included) pinned to the
same core with ``taskset``, alternating (the first one of a pair alternates too), median of 5:

* dpone: ``python -m dpone run manifest.yaml --format json``, the whole run of SPEC §6
  (quarantine, the DLQ durable on this disk, evidence, state);
* (a) the hand-written script, a .py file written to the temp folder: pyarrow CSV (every
  column as text) -> the exact kernel (:func:`bench.e2e_data.split_valid`) -> the valid rows
  into a DuckDB table in one transaction. No DLQ, no evidence, no state, no streaming.

Targets in rows/s: dpone >= 1.1x (a), and >= 25x (b) below. After each dpone run the
bench checks its artifacts (as many DLQ segment lines as quarantined rows, evidence, state) and
both programs' loaded tables must have the same checksum. Wall time is the target; CPU time
(user + sys of the process, from ``wait4``) is printed beside it because this 2-core machine is
shared and a busy neighbour stretches wall time, not CPU time. dpone's time is split into stages
from the timestamps of its JSON log lines on stderr.

* (b) dlt with a Pydantic model and ``discard_row`` (data_type and columns) on the first
  200,000 rows, read with pyarrow and fed as dicts, into a fresh DuckDB destination. It stays
  in-process (this process pinned to the same core while it runs): its import (seconds) is not
  counted, which favours dlt; dpone's rows/s are its whole-process ones.

Everything (CSV, work dirs, DLQ, DuckDB files, dlt's folders) lives under one
``tempfile.mkdtemp()`` folder in /tmp, which must be a real disk (the bench prints the
filesystem type and refuses tmpfs), and is removed. ``PYTHONDONTWRITEBYTECODE`` is dropped for
the children and their bytecode cached inside that folder (``PYTHONPYCACHEPREFIX``): an
installed package has its .pyc files, and recompiling dpone's sources on every run would cost it
about 0.4 s. One untimed run of each program first warms that cache and the page cache.

``chunk_size`` is 250,000 here (the manifest default is 10,000). ``DPONE_BENCH_E2E_SWEEP=1``
times dpone once at each of the other sizes as well.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

import duckdb
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from bench import e2e_data

ROWS = 1_000_000
DLT_ROWS = 200_000
DLT_BATCH = 10_000  # rows per list the resource yields (one Pydantic list validation each)
REPEATS = 5  # dpone and (a), alternating
DLT_REPEATS = 3
CHUNK_SIZE = 250_000
CHUNK_SIZES_SWEPT = (10_000, 100_000, 500_000)  # with DPONE_BENCH_E2E_SWEEP=1, once each
TARGET_VS_SCRIPT = 1.1
TARGET_VS_DLT = 25.0
NAME = "orders_e2e"
CSV = "data/orders.csv"
REPO = Path(__file__).resolve().parents[1]
NOT_A_DISK = ("tmpfs", "ramfs", "devtmpfs")
_GNU_TIME = os.access("/usr/bin/time", os.X_OK)  # for the RSS column only
CHECKSUM_SQL = (
    "SELECT count(*), sum(id), sum(amount), sum(quantity), sum(epoch_us(updated_at)), "
    "count(*) FILTER (WHERE is_gift), round(sum(discount), 2), count(discount), count(note) "
    "FROM analytics.orders"
)
#: dpone's stages, from the timestamps of its log events: (label, event that ends the stage).
STAGES = (
    ("start: interpreter, imports, compile, preflight, lock", "run.start"),
    ("stream: read, enforce, stage, DLQ", "dlq.run.closed"),
    ("evidence built, sink commit, published", "evidence.written"),
    ("state, journal", "run.finished"),
    ("exit", None),
)

#: The hand-written script (a): a program of its own, as a careful engineer would write it.
SCRIPT = '''\
"""pyarrow CSV (all text) -> the exact kernel -> the valid rows into DuckDB, one transaction."""
import sys

sys.path.insert(0, sys.argv[3])  # the repository, for bench.e2e_data (pyarrow and stdlib only)

import duckdb
from bench.e2e_data import read_csv_as_text, split_valid

valid, invalid = split_valid(read_csv_as_text(sys.argv[1]))
con = duckdb.connect(sys.argv[2])
con.execute("BEGIN TRANSACTION")
con.execute("CREATE SCHEMA analytics")
con.register("valid_rows", valid)
con.execute("CREATE TABLE analytics.orders AS SELECT * FROM valid_rows")
con.execute("COMMIT")
con.close()
print(valid.num_rows, invalid)
'''


@dataclass
class Outcome:
    seconds: float  # wall
    cpu: float  # user + sys of the process (0 in-process)
    loaded: int
    rejected: int
    checksum: tuple[Any, ...] | None = None
    rss_mb: float = 0.0
    stages: dict[str, float] = field(default_factory=dict)
    ids: frozenset[int] | None = None  # dlt: the ids it loaded


def _query(db: Path, sql: str) -> tuple[Any, ...]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        row = con.execute(sql).fetchone()
        assert row is not None
        return tuple(row)
    finally:
        con.close()


def _filesystem(path: Path) -> str:
    """The filesystem type ``path`` lives on (/proc/mounts: the longest mount point above it)."""
    best, kind = "", "unknown"
    resolved = path.resolve()
    with open("/proc/mounts", encoding="utf-8") as mounts:
        for line in mounts:
            _, point, fstype, *_ = line.split()
            point = point.replace("\\040", " ")
            if (resolved == Path(point) or Path(point) in resolved.parents) and len(point) > len(
                best
            ):
                best, kind = point, fstype
    return kind


# --- whole processes --------------------------------------------------------------------------


@dataclass
class Pinned:
    """Runs programs as whole processes under ``taskset -c core``, in ``base``."""

    core: int
    base: Path
    env: dict[str, str]

    def run(self, argv: list[str], tag: str) -> tuple[float, float, float, int, float]:
        """(wall s, cpu s, peak RSS MB, exit code, epoch s at spawn); stdout and stderr go to
        ``<tag>.out`` / ``<tag>.err`` in ``base``.

        The peak RSS is the program's own, as GNU time (a small process the program is forked
        from) reports it: this process's ``wait4`` would report at least the bench's own peak,
        which Linux carries across the spawned child's exec. 0 where there is no GNU time."""
        os.sync()  # what the bench left dirty (the CSV, removed runs) is not this run's bill
        rss_file = self.base / f"{tag}.rss"
        measure = ["/usr/bin/time", "-f", "%M", "-o", str(rss_file)] if _GNU_TIME else []
        with (
            (self.base / f"{tag}.out").open("wb") as out,
            (self.base / f"{tag}.err").open("wb") as err,
        ):
            spawned = time.time()
            began = time.perf_counter()
            proc = subprocess.Popen(
                ["taskset", "-c", str(self.core), *measure, *argv],
                stdout=out,
                stderr=err,
                cwd=self.base,
                env=self.env,
            )
            _, status, usage = os.wait4(proc.pid, 0)
            took = time.perf_counter() - began
        proc.returncode = os.waitstatus_to_exitcode(status)
        cpu = usage.ru_utime + usage.ru_stime  # GNU time's and the program's it reaped
        rss_mb = 0.0
        if _GNU_TIME:
            with contextlib.suppress(OSError, ValueError, IndexError):
                rss_mb = int(rss_file.read_text(encoding="utf-8").split()[-1]) / 1024
        return took, cpu, rss_mb, proc.returncode, spawned

    def output(self, tag: str) -> tuple[str, str]:
        return (
            (self.base / f"{tag}.out").read_text(encoding="utf-8"),
            (self.base / f"{tag}.err").read_text(encoding="utf-8", errors="replace"),
        )


def _child_env(base: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(base / "pycache")
    return env


# --- dpone ------------------------------------------------------------------------------------


def _manifest(base: Path, tag: str, chunk_size: int) -> tuple[Path, Path]:
    """A manifest whose work_dir (DLQ, state, evidence and the DuckDB file) is fresh."""
    work = f".dpone-{tag}"
    shutil.rmtree(base / work, ignore_errors=True)
    path = e2e_data.write_manifest(
        base / f"manifest-{tag}.yaml",
        csv=CSV,
        work_dir=work,
        chunk_size=chunk_size,
        name=NAME,
    )
    return path, base / work


def _stages(log: str, spawned: float, wall: float) -> dict[str, float]:
    """Seconds per stage of :data:`STAGES`, from the log lines' UTC timestamps."""
    seen: dict[str, float] = {}
    for line in log.splitlines():
        with contextlib.suppress(ValueError, KeyError, TypeError):
            event = json.loads(line)
            seen.setdefault(event["event"], datetime.fromisoformat(event["timestamp"]).timestamp())
    marks = [spawned]
    for _, ends in STAGES:
        if ends is not None and ends not in seen:
            return {}
        marks.append(seen[ends] if ends is not None else spawned + wall)
    return {label: b - a for (label, _), a, b in zip(STAGES, marks[:-1], marks[1:], strict=True)}


def _dpone(pinned: Pinned, tag: str, chunk_size: int = CHUNK_SIZE) -> Outcome:
    manifest, work = _manifest(pinned.base, tag, chunk_size)
    argv = [sys.executable, "-m", "dpone", "run", manifest.name, "--format", "json"]
    took, cpu, rss, code, spawned = pinned.run(argv, tag)
    out, err = pinned.output(tag)
    if code != 0:
        raise RuntimeError(f"dpone run exited {code}: {out[-2000:]}{err[-2000:]}")
    report = json.loads(out)
    rows = report["rows"]
    _check_artifacts(work, report["run_id"], rows["quarantined"])
    outcome = Outcome(
        took,
        cpu,
        rows["loaded"],
        rows["quarantined"],
        _query(work / f"{NAME}.duckdb", CHECKSUM_SQL),
        rss,
        _stages(err, spawned, took),
    )
    shutil.rmtree(work)
    return outcome


def _check_artifacts(work: Path, run_id: str, quarantined: int) -> None:
    """The run left what it promises: one DLQ segment line per rejected row, evidence, state."""
    segments = work / "dlq" / "runs" / run_id / "segments"
    lines = 0
    for segment in segments.glob("*.jsonl"):
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


# --- (a) the hand-written script --------------------------------------------------------------


def _script(pinned: Pinned, tag: str) -> Outcome:
    db = pinned.base / f"script-{tag}.duckdb"
    db.unlink(missing_ok=True)
    argv = [sys.executable, "handwritten.py", CSV, db.name, str(REPO)]
    took, cpu, rss, code, _ = pinned.run(argv, tag)
    out, err = pinned.output(tag)
    if code != 0:
        raise RuntimeError(f"the hand-written script exited {code}: {err[-2000:]}")
    loaded, rejected = (int(n) for n in out.split())
    outcome = Outcome(took, cpu, loaded, rejected, _query(db, CHECKSUM_SQL), rss)
    db.unlink()
    return outcome


# --- (b) dlt + Pydantic + discard_row ---------------------------------------------------------


@contextlib.contextmanager
def _dlt_sandbox(base: Path, core: int) -> Iterator[None]:
    """Telemetry off; dlt's folders inside ``base``; this process on ``core``; all restored."""
    wanted = {
        "RUNTIME__DLTHUB_TELEMETRY": "false",
        "DLT_DATA_DIR": str(base / "dlt-data"),
        "DLT_PROJECT_DIR": str(base / "dlt-project"),
    }
    saved = {k: os.environ.get(k) for k in wanted}
    cores = os.sched_getaffinity(0)
    os.environ.update(wanted)
    os.sched_setaffinity(0, {core})
    try:
        yield
    finally:
        os.sched_setaffinity(0, cores)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


Int64 = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]


class Order(BaseModel):
    """The careful user's model (as in ``bench_contracts``): int64 bounds, no NaN/inf."""

    model_config = ConfigDict(allow_inf_nan=False)

    id: Int64
    customer: str
    amount: Annotated[Decimal, Field(max_digits=12, decimal_places=2)]
    quantity: Int64
    updated_at: AwareDatetime
    is_gift: bool
    discount: float | None = None
    note: str


def _dlt_case(base: Path, source: Path) -> Callable[[str], Outcome]:
    import dlt  # after _dlt_sandbox set its environment

    def one(tag: str) -> Outcome:
        db = base / f"dlt-{tag}.duckdb"
        os.sync()
        began = time.perf_counter()
        rows = e2e_data.read_csv_as_text(source).to_pylist()

        @dlt.resource(
            name="orders",
            columns=Order,
            schema_contract={"data_type": "discard_row", "columns": "discard_row"},
        )
        def orders() -> Iterator[list[dict[str, Any]]]:
            for start in range(0, len(rows), DLT_BATCH):
                yield rows[start : start + DLT_BATCH]

        pipeline = dlt.pipeline(
            pipeline_name=f"orders_dlt_{tag}",
            pipelines_dir=str(base / "dlt-pipelines"),
            destination=dlt.destinations.duckdb(str(db)),
            dataset_name="analytics",
        )
        pipeline.run(orders())
        took = time.perf_counter() - began
        con = duckdb.connect(str(db), read_only=True)
        try:
            ids = frozenset(r[0] for r in con.execute("SELECT id FROM analytics.orders").fetchall())
        finally:
            con.close()
        shutil.rmtree(base / "dlt-pipelines", ignore_errors=True)
        db.unlink()
        return Outcome(took, 0.0, len(ids), len(rows) - len(ids), ids=ids)

    return one


# --- report -----------------------------------------------------------------------------------


def _median(outcomes: list[Outcome], cpu: bool = False) -> float:
    return statistics.median(o.cpu if cpu else o.seconds for o in outcomes)


def _spread(outcomes: list[Outcome], cpu: bool = False) -> str:
    times = sorted(o.cpu if cpu else o.seconds for o in outcomes)
    return f"{times[0]:.2f}-{times[-1]:.2f}"


def _verdict(ok: bool) -> str:
    return "meets" if ok else "MISSES"


def _mismatches(dpone: list[Outcome], script: list[Outcome], bad: int) -> list[str]:
    problems = []
    for who, outcomes in (("dpone", dpone), ("script (a)", script)):
        for o in outcomes:
            if (o.loaded, o.rejected) != (ROWS - bad, bad):
                problems.append(
                    f"{who} split {o.loaded:,} valid / {o.rejected:,} invalid; the generator "
                    f"made {ROWS - bad:,} / {bad:,}"
                )
    if len({o.checksum for o in dpone + script}) != 1:
        problems.append(
            "the loaded tables differ: " + "; ".join(f"{o.checksum}" for o in (dpone[0], script[0]))
        )
    return problems


def _dlt_note(source: Path, loaded: frozenset[int]) -> str:
    """dlt's loaded rows against the exact split of the same 200,000 rows."""
    valid, _ = e2e_data.split_valid(e2e_data.read_csv_as_text(source))
    exact = frozenset(valid.column("id").to_pylist())
    if loaded == exact:
        return f"dlt loaded {len(loaded):,} of {DLT_ROWS:,} rows: the exact split"
    wrong: dict[str, int] = {}
    for row_id in loaded - exact:
        cell = (
            e2e_data.bad_cell(row_id - e2e_data.FIRST_ID) if row_id >= e2e_data.FIRST_ID else None
        )
        column = cell[0] if cell is not None else "id"
        wrong[column] = wrong.get(column, 0) + 1
    loaded_bad = ", ".join(f"{c} {n:,}" for c, n in sorted(wrong.items())) or "none"
    return (
        f"dlt loaded {len(loaded):,} of {DLT_ROWS:,} rows, NOT the exact split "
        f"({len(exact):,}): bad rows it loaded, by bad column: {loaded_bad}; good rows it "
        f"dropped: {len(exact - loaded):,}"
    )


def _print_stages(dpone: list[Outcome]) -> None:
    split = [o.stages for o in dpone if o.stages]
    if not split:
        print("  (dpone's log lines had no timestamps for its stages: no split)")
        return
    parts = ", ".join(
        f"{label} {statistics.median(s[label] for s in split):.2f}" for label, _ in STAGES
    )
    print(f"  dpone's stages, median s (from its log timestamps): {parts}")


def run() -> None:
    base = Path(tempfile.mkdtemp(prefix="dpone-bench-e2e-", dir="/tmp"))
    try:
        fs = _filesystem(base)
        if fs in NOT_A_DISK:
            print(f"  {base} is on {fs}, not a disk: the comparison needs the real disk; skipped")
            return
        core = max(os.sched_getaffinity(0))
        pinned = Pinned(core, base, _child_env(base))
        (base / "data").mkdir()
        (base / "handwritten.py").write_text(SCRIPT, encoding="utf-8")
        began = time.perf_counter()
        bad = e2e_data.write_orders_csv(base / CSV, ROWS)
        head = base / "data" / "orders-head.csv"
        e2e_data.copy_head(base / CSV, head, DLT_ROWS)
        size = (base / CSV).stat().st_size
        load = ", ".join(f"{n:.1f}" for n in os.getloadavg())
        print(
            f"{ROWS:,} rows ({size / 1e6:.0f} MB CSV, {bad:,} bad = {bad / ROWS:.0%}) written in "
            f"{time.perf_counter() - began:.1f} s to {base} ({fs}); chunk_size {CHUNK_SIZE:,}; "
            f"whole processes under taskset -c {core}, median of {REPEATS} (dlt: "
            f"{DLT_REPEATS}, in-process), dpone and (a) alternating; {os.cpu_count()} cores, "
            f"load average {load}: look at the spread",
            flush=True,
        )

        _dpone(pinned, "warm")  # untimed: bytecode cache and page cache for both programs
        _script(pinned, "warm")
        dpone: list[Outcome] = []
        script: list[Outcome] = []
        for rep in range(REPEATS):
            if rep % 2 == 0:
                dpone.append(_dpone(pinned, f"r{rep}"))
                script.append(_script(pinned, f"r{rep}"))
            else:
                script.append(_script(pinned, f"r{rep}"))
                dpone.append(_dpone(pinned, f"r{rep}"))
        swept: dict[int, Outcome] = {}
        if os.environ.get("DPONE_BENCH_E2E_SWEEP") == "1":
            for chunk in CHUNK_SIZES_SWEPT:
                swept[chunk] = _dpone(pinned, f"c{chunk}", chunk)
        with _dlt_sandbox(base, core):
            dlt_one = _dlt_case(base, head)
            dlts = [dlt_one(f"r{rep}") for rep in range(DLT_REPEATS)]

        d_s, a_s, b_s = _median(dpone), _median(script), _median(dlts)
        d_cpu, a_cpu = _median(dpone, cpu=True), _median(script, cpu=True)
        d_rate, a_rate, b_rate = ROWS / d_s, ROWS / a_s, DLT_ROWS / b_s
        vs_a, vs_b = d_rate / a_rate, d_rate / b_rate
        print(
            f"  {'case':<46}{'rows':>10}{'wall s':>8}{'spread':>12}{'rows/s':>10}"
            f"{'cpu s':>7}{'spread':>11}{'RSS MB':>8}"
        )
        lines = (
            ("dpone run (process)", ROWS, dpone, d_rate),
            ("(a) pyarrow CSV -> kernel -> DuckDB (process)", ROWS, script, a_rate),
        )
        for label, rows, outcomes, rate in lines:
            print(
                f"  {label:<46}{rows:>10,}{_median(outcomes):>8.2f}{_spread(outcomes):>12}"
                f"{rate:>10,.0f}{_median(outcomes, True):>7.2f}{_spread(outcomes, True):>11}"
                f"{statistics.median(o.rss_mb for o in outcomes):>8,.0f}"
            )
        print(
            f"  {'(b) dlt + Pydantic discard_row (in-process)':<46}{DLT_ROWS:>10,}{b_s:>8.2f}"
            f"{_spread(dlts):>12}{b_rate:>10,.0f}"
        )
        print(
            f"  dpone / (a) = {vs_a:.2f}x: {_verdict(vs_a >= TARGET_VS_SCRIPT)} the "
            f">= {TARGET_VS_SCRIPT:.1f}x target (wall rows/s; by CPU time {a_cpu / d_cpu:.2f}x);  "
            f"dpone / (b) = {vs_b:.1f}x: {_verdict(vs_b >= TARGET_VS_DLT)} the "
            f">= {TARGET_VS_DLT:.0f}x target"
        )
        _print_stages(dpone)
        if swept:
            sizes = ", ".join(
                f"{k:,}: {v.seconds:.2f} s (cpu {v.cpu:.2f})" for k, v in swept.items()
            )
            print(
                f"  dpone chunk_size, once each: {sizes}; {CHUNK_SIZE:,}: median {d_s:.2f} s "
                f"(cpu {d_cpu:.2f})"
            )

        problems = _mismatches(dpone, script, bad)
        if problems:
            print("  MISMATCH between dpone and the hand-written script (a):")
            for problem in problems:
                print(f"    {problem}")
        else:
            print(
                f"  correctness: dpone and (a) agree on every run: {ROWS - bad:,} loaded, "
                f"{bad:,} rejected (dpone: as many DLQ segment lines, evidence and state "
                "present), identical table checksums"
            )
        assert dlts[0].ids is not None
        print(f"  {_dlt_note(head, dlts[0].ids)}")
        print(f"  load average after: {', '.join(f'{n:.1f}' for n in os.getloadavg())}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
