"""End to end: ``dpone run`` of a 1,000,000-row orders CSV (1% bad) into DuckDB, side by side.

* dpone: the whole run of SPEC §6 (quarantine, one durable DLQ record per bad row, evidence,
  state), in-process through ``run_pipeline`` (median of 5), and once as a ``dpone run``
  subprocess (what a user waits for: interpreter start and imports included; its peak RSS);
* (a) the hand-written script: pyarrow CSV (every column as text) -> ``bench_contracts``'
  hand-written exact kernel (:func:`bench.e2e_data.split_valid`) -> the valid rows into a
  DuckDB table in one transaction. No DLQ, no evidence, no state, no streaming: the floor
  dpone is held to;
* (b) dlt with a Pydantic model and ``discard_row`` (data_type and columns) on the first
  200,000 rows, read with pyarrow and fed as dicts, into a fresh DuckDB destination.

Also, for scale and not for the target: dpone with its DLQ on tmpfs (memory: the same records,
checksums and syncfs, durable nowhere), which separates dpone's own work from what this disk
charges for creating one file per rejected row (SPEC §5).

Targets in rows/s: dpone >= 1.0x (a) and >= 25x (b). Every repetition gets a fresh work_dir
and DuckDB file; dpone and (a) alternate so drift on this shared machine hits both. Everything
is written under one ``tempfile.mkdtemp()`` folder and removed; dlt runs with telemetry off
and its pipelines, data and project folders inside that folder.

``chunk_size`` 250,000 is the default: the fastest of 50k/100k/250k/500k here (medians of 3,
in-process: 6.8, 6.6, 5.9 and 9.9 s; noisy, the DLQ dominates every size).
``DPONE_BENCH_E2E_SWEEP=1`` measures the other sizes once each as well.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

import duckdb
import psutil
import structlog
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from bench import e2e_data
from dpone.manifest.compiler import compile_manifest
from dpone.runtime.lifecycle import RunOptions, run_pipeline

ROWS = 1_000_000
DLT_ROWS = 200_000
DLT_BATCH = 10_000  # rows per list the resource yields (one Pydantic list validation each)
REPEATS = 5  # dpone and (a), alternating
DLT_REPEATS = 3
TMPFS = Path("/dev/shm")  # the DLQ on memory, for scale only (durable nowhere)
CHUNK_SIZE = 250_000
CHUNK_SIZES_SWEPT = (50_000, 100_000, 500_000)  # with DPONE_BENCH_E2E_SWEEP=1, once each
TARGET_VS_SCRIPT = 1.0
TARGET_VS_DLT = 25.0
NAME = "orders_e2e"
CSV = "data/orders.csv"
CHECKSUM_SQL = (
    "SELECT count(*), sum(id), sum(amount), sum(quantity), sum(epoch_us(updated_at)), "
    "count(*) FILTER (WHERE is_gift), round(sum(discount), 2), count(discount), count(note) "
    "FROM analytics.orders"
)


@dataclass
class Outcome:
    seconds: float
    loaded: int
    rejected: int
    checksum: tuple[Any, ...] | None = None
    dlq_seconds: float = 0.0
    ids: frozenset[int] | None = None  # dlt: the ids it loaded


def _query(db: Path, sql: str) -> tuple[Any, ...]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        row = con.execute(sql).fetchone()
        assert row is not None
        return tuple(row)
    finally:
        con.close()


def _settle() -> None:
    """Flush what the benchmark itself left dirty (the CSV, deleted runs): a timed run's
    syncfs must not pay for it."""
    os.sync()


# --- dpone ------------------------------------------------------------------------------------


@contextlib.contextmanager
def _dlq_timer(seconds: list[float]) -> Iterator[None]:
    """Silence dpone's logs, keeping the DLQ writer's own timing of each durable chunk."""
    was_configured = structlog.is_configured()
    before = structlog.get_config()

    def keep(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        if event.get("event") == "dlq.chunk.durable":
            seconds.append(float(event["seconds"]))
        raise structlog.DropEvent

    structlog.configure(
        processors=[keep],
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        cache_logger_on_first_use=False,
    )
    try:
        yield
    finally:
        if was_configured:
            structlog.configure(**before)
        else:
            structlog.reset_defaults()


def _manifest(
    base: Path, tag: str, chunk_size: int, dlq_dir: Path | None = None
) -> tuple[Path, Path]:
    """A manifest whose work_dir (DLQ, state, evidence and the DuckDB file) is fresh."""
    work = f".dpone-{tag}"
    shutil.rmtree(base / work, ignore_errors=True)
    path = e2e_data.write_manifest(
        base / f"manifest-{tag}.yaml",
        csv=CSV,
        work_dir=work,
        chunk_size=chunk_size,
        name=NAME,
        dlq_dir=str(dlq_dir) if dlq_dir is not None else None,
    )
    return path, base / work


def _dpone_in_process(
    base: Path, tag: str, chunk_size: int, dlq_dir: Path | None = None
) -> Outcome:
    manifest, work = _manifest(base, tag, chunk_size, dlq_dir)
    _settle()
    dlq: list[float] = []
    with _dlq_timer(dlq):
        began = time.perf_counter()
        plan = compile_manifest(manifest)
        report = run_pipeline(plan, RunOptions())
        took = time.perf_counter() - began
    if report.exit_code != 0:
        raise RuntimeError(f"dpone run failed: {report.error}")
    outcome = Outcome(
        took,
        report.rows.loaded,
        report.rows.quarantined,
        _query(work / f"{NAME}.duckdb", CHECKSUM_SQL),
        sum(dlq),
    )
    _check_artifacts(work, dlq_dir or work / "dlq", report.run_id, report.rows.quarantined)
    shutil.rmtree(work)
    if dlq_dir is not None:
        shutil.rmtree(dlq_dir)
    return outcome


def _check_artifacts(work: Path, dlq: Path, run_id: str, quarantined: int) -> None:
    """The run left what it promises: one DLQ record per rejected row, evidence, state."""
    records = sum(1 for _ in (dlq / "runs" / run_id / "records").iterdir())
    evidence = work / "evidence" / NAME / run_id / "data_contract_evidence.json"
    state = work / "state" / f"{NAME}.json"
    if records != quarantined or not evidence.is_file() or not state.is_file():
        raise RuntimeError(
            f"dpone artifacts: {records} DLQ records for {quarantined} quarantined rows, "
            f"evidence {'present' if evidence.is_file() else 'MISSING'}, "
            f"state {'present' if state.is_file() else 'MISSING'}"
        )


def _dpone_subprocess(base: Path) -> tuple[float, float, int]:
    """Wall seconds, sampled peak RSS (MB) and exit code of one ``dpone run`` process."""
    manifest, work = _manifest(base, "subprocess", CHUNK_SIZE)
    _settle()
    peak = 0
    with (base / "subprocess.out").open("wb") as out:
        began = time.perf_counter()
        proc = psutil.Popen(
            [sys.executable, "-m", "dpone", "run", str(manifest), "--format", "json"],
            stdout=out,
            stderr=subprocess.DEVNULL,
            cwd=base,
        )
        while proc.poll() is None:
            with contextlib.suppress(psutil.Error):
                peak = max(peak, proc.memory_info().rss)
            time.sleep(0.01)
        took = time.perf_counter() - began
    shutil.rmtree(work)
    return took, peak / 2**20, int(proc.returncode)


def _bare_file_creates(folder: Path, count: int) -> float:
    """Seconds a bare loop takes to create ``count`` small files here (no fsync, no JSON):
    the floor of one file per DLQ record on this disk."""
    folder.mkdir()
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    payload = b"x" * 900  # about a DLQ record
    _settle()
    began = time.perf_counter()
    try:
        for n in range(count):
            out = os.open(f"r{n}.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640, dir_fd=fd)
            os.write(out, payload)
            os.close(out)
    finally:
        os.close(fd)
    took = time.perf_counter() - began
    shutil.rmtree(folder)
    return took


# --- (a) the hand-written script --------------------------------------------------------------


def _script(base: Path, tag: str) -> Outcome:
    db = base / f"script-{tag}.duckdb"
    db.unlink(missing_ok=True)
    _settle()
    began = time.perf_counter()
    table = e2e_data.read_csv_as_text(base / CSV)
    valid, invalid = e2e_data.split_valid(table)
    con = duckdb.connect(str(db))
    try:
        con.execute("BEGIN TRANSACTION")
        con.execute("CREATE SCHEMA analytics")
        con.register("valid_rows", valid)
        con.execute("CREATE TABLE analytics.orders AS SELECT * FROM valid_rows")
        con.execute("COMMIT")
    finally:
        con.close()
    took = time.perf_counter() - began
    outcome = Outcome(took, valid.num_rows, invalid, _query(db, CHECKSUM_SQL))
    db.unlink()
    return outcome


# --- (b) dlt + Pydantic + discard_row ---------------------------------------------------------


@contextlib.contextmanager
def _dlt_sandbox(base: Path) -> Iterator[None]:
    """Telemetry off; dlt's data and project folders inside ``base``; the env restored after."""
    wanted = {
        "RUNTIME__DLTHUB_TELEMETRY": "false",
        "DLT_DATA_DIR": str(base / "dlt-data"),
        "DLT_PROJECT_DIR": str(base / "dlt-project"),
    }
    saved = {k: os.environ.get(k) for k in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
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
        _settle()
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
        return Outcome(took, len(ids), len(rows) - len(ids), ids=ids)

    return one


# --- report -----------------------------------------------------------------------------------


def _median(outcomes: list[Outcome]) -> float:
    return statistics.median(o.seconds for o in outcomes)


def _spread(outcomes: list[Outcome]) -> str:
    times = sorted(o.seconds for o in outcomes)
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


def run() -> None:
    base = Path(tempfile.mkdtemp(prefix="dpone-bench-e2e-", dir="/tmp"))
    try:
        (base / "data").mkdir()
        began = time.perf_counter()
        bad = e2e_data.write_orders_csv(base / CSV, ROWS)
        head = base / "data" / "orders-head.csv"
        e2e_data.copy_head(base / CSV, head, DLT_ROWS)
        size = (base / CSV).stat().st_size
        print(
            f"{ROWS:,} rows ({size / 1e6:.0f} MB CSV, {bad:,} bad = {bad / ROWS:.0%}) written in "
            f"{time.perf_counter() - began:.1f} s; chunk_size {CHUNK_SIZE:,}; "
            f"median of {REPEATS} (dlt: {DLT_REPEATS}), dpone and (a) alternating; a shared 2-core "
            "machine: "
            "look at the spread",
            flush=True,
        )
        probe_s = _bare_file_creates(base / "probe", bad)

        dpone: list[Outcome] = []
        script: list[Outcome] = []
        for rep in range(REPEATS):
            dpone.append(_dpone_in_process(base, f"r{rep}", CHUNK_SIZE))
            script.append(_script(base, f"r{rep}"))
        swept: dict[int, Outcome] = {}
        if os.environ.get("DPONE_BENCH_E2E_SWEEP") == "1":
            for chunk in CHUNK_SIZES_SWEPT:
                swept[chunk] = _dpone_in_process(base, f"c{chunk}", chunk)
        sub_s, sub_rss, sub_rc = _dpone_subprocess(base)
        with _dlt_sandbox(base):
            dlt_one = _dlt_case(base, head)
            dlts = [dlt_one(f"r{rep}") for rep in range(DLT_REPEATS)]
        on_tmpfs: list[Outcome] = []
        if TMPFS.is_dir():
            for rep in range(REPEATS):
                scratch = Path(tempfile.mkdtemp(prefix="dpone-bench-dlq-", dir=TMPFS))
                scratch.rmdir()  # the run creates it
                on_tmpfs.append(_dpone_in_process(base, f"t{rep}", CHUNK_SIZE, scratch))

        d_s, a_s, b_s = _median(dpone), _median(script), _median(dlts)
        d_rate, a_rate, b_rate = ROWS / d_s, ROWS / a_s, DLT_ROWS / b_s
        vs_a, vs_b = d_rate / a_rate, d_rate / b_rate
        print(f"  {'case':<44}{'rows':>10}{'median s':>10}{'spread s':>12}{'rows/s':>10}")
        lines = (
            ("dpone run, in-process (run_pipeline)", ROWS, d_s, _spread(dpone), d_rate),
            ("(a) pyarrow CSV -> kernel -> DuckDB script", ROWS, a_s, _spread(script), a_rate),
            ("(b) dlt + Pydantic discard_row -> duckdb", DLT_ROWS, b_s, _spread(dlts), b_rate),
            ("dpone run, subprocess (once)", ROWS, sub_s, "", ROWS / sub_s),
        )
        for label, rows, secs, spread, rate in lines:
            print(f"  {label:<44}{rows:>10,}{secs:>10.2f}{spread:>12}{rate:>10,.0f}")
        print(
            f"  dpone / (a) = {vs_a:.2f}x: {_verdict(vs_a >= TARGET_VS_SCRIPT)} the "
            f">= {TARGET_VS_SCRIPT:.1f}x target;  dpone / (b) = {vs_b:.1f}x: "
            f"{_verdict(vs_b >= TARGET_VS_DLT)} the >= {TARGET_VS_DLT:.0f}x target  (rows/s)"
        )
        dlq_s = statistics.median(o.dlq_seconds for o in dpone)
        if not dlq_s:
            print("  (no dlq.chunk.durable timings were logged: the DLQ share is unknown)")
        print(
            f"  where dpone's time goes: its DLQ writer thread spent {dlq_s:.2f} s of the "
            f"run's {d_s:.2f} s making {bad:,} records durable ({dlq_s / bad * 1000:.2f} ms "
            f"each), overlapping the stream; a bare loop creating as many small files here "
            f"(no JSON, no fsync) took {probe_s:.2f} s"
        )
        if probe_s >= a_s:
            print(
                f"  on this disk just creating {bad:,} files takes {probe_s:.2f} s, as long as "
                f"or longer than all of (a) ({a_s:.2f} s): with one file per rejected row (SPEC "
                "§5) no DLQ implementation reaches 1.0x (a) here"
            )
        if on_tmpfs:
            t_s = _median(on_tmpfs)
            print(
                f"  for scale, not the target: the same dpone run with its DLQ on tmpfs "
                f"(memory, durable nowhere): median {t_s:.2f} s (spread {_spread(on_tmpfs)}) "
                f"= {a_s / t_s:.2f}x (a)"
            )
        failed = "" if sub_rc == 0 else " (FAILED)"
        print(
            f"  dpone run subprocess: exit {sub_rc}{failed}, peak RSS {sub_rss:,.0f} MB "
            "(sampled every 10 ms); (a) holds the whole file in memory"
        )
        if swept:
            sizes = ", ".join(f"{k:,}: {v.seconds:.2f} s" for k, v in swept.items())
            print(f"  dpone chunk_size, once each: {sizes} (default {CHUNK_SIZE:,}: {d_s:.2f} s)")

        problems = _mismatches(dpone, script, bad)
        if problems:
            print("  MISMATCH between dpone and the hand-written script (a):")
            for problem in problems:
                print(f"    {problem}")
        else:
            print(
                f"  correctness: dpone and (a) agree on every run: {ROWS - bad:,} loaded, "
                f"{bad:,} rejected (dpone: as many DLQ records), identical table checksums"
            )
        assert dlts[0].ids is not None
        print(f"  {_dlt_note(head, dlts[0].ids)}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
