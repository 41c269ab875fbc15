"""engine: dask against engine: local, per core, as whole processes.

2,000,000 rows in 8 CSV files (three columns, 1% of the rows with an amount that is not a
decimal: quarantined); ``DPONE_BENCH_DASK_ROWS`` sets another row count (still 8 files). The
files are generated once into a cache folder on the real disk (``DPONE_BENCH_CACHE``, default
``~/.cache/dpone-bench``), never on a tmpfs. Three contenders, each a whole ``dpone run``
process (its start, imports and the cluster's start and close included), timed round-robin
(the order rotates every round), median of :data:`REPEATS`:

- ``local``: ``engine: local`` under ``taskset -c 0``;
- ``dask1``: ``engine: dask`` with one worker, the driver and the worker under ``taskset -c 0``;
- ``dask2``: ``engine: dask`` with two workers, under ``taskset -c 0,1``.

After each round, two controls: how much faster two processes run on cores 0 and 1 than one on
core 0, of pure Python work (2.00 on an idle machine) and of the runs' own kind of work (Arrow
reading the CSV files, DuckDB inserting the rows, one thread each): (d2) cannot be more than
that. The second is lower even on an idle machine when the two cores share their memory
bandwidth and caches (or are two threads of one physical core, as a VM may not say).

Printed: (d1) the per-core efficiency, local's time / dask1's (target >= 0.75), and (d2) the
scaling, dask1's time / dask2's (target >= 1.7), each with the ratio of the CPU seconds of the
whole process trees (less sensitive to other work on the machine than the wall times), then
the dask runs' stages from their logs (cluster start, tasks, DLQ index, the staged files'
check, the sink's commit) and the machine's load average: the figures are of the moment they
were taken, and on a machine that other work shares they are noisy.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import yaml

FILES = 8
ROWS = 2_000_000
ROWS_ENV = "DPONE_BENCH_DASK_ROWS"
BAD_EVERY = 100  # 1%
CHUNK = 100_000
REPEATS = 3
SPIN = 20_000_000  # about a second of one core
#: (label, engine, workers, cores)
CONTENDERS = (
    ("local", "local", 0, "0"),
    ("dask1", "dask", 1, "0"),
    ("dask2", "dask", 2, "0,1"),
)
DPONE_RUN = (sys.executable, "-m", "dpone", "run", "--format", "json")
STAGES = ("cluster_start", "tasks", "index_close", "staged_check", "sink_commit", "cluster_close")


def _rows() -> int:
    return int(os.environ.get(ROWS_ENV, ROWS))


def _cache() -> Path:
    root = Path(os.environ.get("DPONE_BENCH_CACHE", Path.home() / ".cache" / "dpone-bench"))
    rows = _rows()
    folder = root / f"dask-{rows}-{FILES}"
    done = folder / ".complete"
    if done.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "data").mkdir(parents=True)
    per = rows // FILES
    for f in range(FILES):
        ids = range(f * per, (f + 1) * per)
        amount = [("n/a" if i % BAD_EVERY == 0 else f"{i % 100_000}.25") for i in ids]
        kind = [f"k{i % 4}" for i in ids]
        table = pa.table({"id": pa.array(ids, pa.int64()), "amount": amount, "kind": kind})
        pacsv.write_csv(table, folder / "data" / f"part{f:02d}.csv")
    done.touch()
    return folder


def _manifest(folder: Path, label: str, engine: str, workers: int) -> Path:
    name = f"bench_{label}"
    doc: dict[str, Any] = {
        "name": name,
        "runtime": {"engine": engine, "chunk_size": CHUNK, "work_dir": f".{name}"},
        "source": {"type": "file", "format": "csv", "path": "data/*.csv"},
        "sink": {
            "type": "duckdb",
            "table": "t",
            "options": {
                "schema_contract": {
                    "enforcement": "quarantine",
                    "columns": {
                        "id": {"type": "integer", "nullable": False},
                        "amount": {"type": "decimal", "precision": 18, "scale": 2},
                        "kind": {"type": "string"},
                    },
                }
            },
        },
    }
    if engine == "dask":
        doc["runtime"]["dask"] = {"n_workers": workers}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


@dataclass
class Outcome:
    seconds: float
    cpu: float
    counts: tuple[int, int]
    stages: dict[str, float] = field(default_factory=dict)


def _child_env(folder: Path) -> dict[str, str]:
    """The environment of a run: compiled modules cached (as an installed dpone's are)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
    return env


def _once(folder: Path, label: str, manifest: Path, cores: str) -> Outcome:
    shutil.rmtree(folder / f".bench_{label}", ignore_errors=True)
    os.sync()  # the previous run's removed files are not this run's bill
    err = folder / f"{label}.err"
    with err.open("wb") as stderr:
        began = time.perf_counter()
        proc = subprocess.Popen(
            ["taskset", "-c", cores, *DPONE_RUN, str(manifest)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=folder,
            env=_child_env(folder),
        )
        assert proc.stdout is not None
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        took = time.perf_counter() - began
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{label} failed: see {err}")
    report = json.loads(out)
    rows = report["rows"]
    return Outcome(
        took,
        usage.ru_utime + usage.ru_stime,
        (int(rows["loaded"]), int(rows["quarantined"])),
        _stages(err.read_text(encoding="utf-8", errors="replace")),
    )


#: The control's data work: the bench's CSV files read by Arrow, the amounts cast and the rows
#: inserted into a DuckDB file of its own, one thread each (argv: data folder, DuckDB file).
DATA_WORK = """\
import glob, sys
import duckdb, pyarrow as pa, pyarrow.compute as pc, pyarrow.csv as pacsv
pa.set_cpu_count(1)
pa.set_io_thread_count(1)
con = duckdb.connect(sys.argv[2])
con.execute("SET threads = 1")
con.execute("CREATE TABLE t (id BIGINT, amount DECIMAL(18, 2), kind VARCHAR)")
for path in sorted(glob.glob(sys.argv[1] + "/*.csv")):
    t = pacsv.read_csv(path, read_options=pacsv.ReadOptions(use_threads=False))
    amount = pc.cast(t["amount"], pa.decimal128(18, 2))
    con.register("b", pa.table({"id": t["id"], "amount": amount, "kind": t["kind"]}))
    con.execute("INSERT INTO t SELECT * FROM b")
    con.unregister("b")
con.close()
"""


def _capacity(folder: Path) -> tuple[float, float]:
    """How much two cores give right now against one, for two kinds of work: two processes
    on cores 0 and 1 against one on core 0, of pure Python work and of the runs' own kind of
    work (:data:`DATA_WORK`: Arrow and DuckDB, which share the memory and caches of the two
    cores). 2.0 on an idle machine with nothing shared; other work lowers both."""
    spin = [sys.executable, "-c", f"for _ in range({SPIN}): pass"]
    work = [sys.executable, "-c", DATA_WORK, str(folder / "data")]

    def timed(cores: str, commands: list[list[str]]) -> float:
        began = time.perf_counter()
        procs = [subprocess.Popen(["taskset", "-c", cores, *c]) for c in commands]
        if any(proc.wait() != 0 for proc in procs):
            raise SystemExit("the capacity control failed")
        return time.perf_counter() - began

    def db(i: int) -> str:
        path = folder / f"capacity-{i}.duckdb"
        path.unlink(missing_ok=True)
        return str(path)

    python = 2 * timed("0", [spin]) / timed("0,1", [spin, spin])
    data = 2 * timed("0", [[*work, db(0)]]) / timed("0,1", [[*work, db(1)], [*work, db(2)]])
    for i in range(3):
        db(i)
    return python, data


def _stages(log: str) -> dict[str, float]:
    """The driver's seconds per stage, from its JSON log lines."""
    found: dict[str, float] = {}
    for line in log.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        name = event.get("event")
        if name == "scaleout.cluster_started":
            found["cluster_start"] = float(event["seconds"])
        elif name == "scaleout.cluster_closed":
            found["cluster_close"] = float(event["seconds"])
        elif name == "sink.files_committed":
            found["sink_commit"] = float(event["seconds"])
        elif name == "scaleout.stages":
            for key in ("tasks", "index_close", "staged_check"):
                found[key] = float(event.get(key, 0.0))
    if "tasks" in found:  # the tasks' stage holds the cluster's start and close
        found["tasks"] -= found.get("cluster_start", 0.0) + found.get("cluster_close", 0.0)
    return found


def run() -> None:
    folder = _cache()
    load = os.getloadavg()
    print(f"{_rows():,} rows in {FILES} CSV files (1% bad), cache {folder}")
    print(f"load average before: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}, {os.cpu_count()} cores")
    manifests = {lab: _manifest(folder, lab, eng, w) for lab, eng, w, _ in CONTENDERS}
    outcomes: dict[str, list[Outcome]] = {lab: [] for lab, *_ in CONTENDERS}
    capacity: list[tuple[float, float]] = []
    for r in range(REPEATS):
        order = CONTENDERS[r % len(CONTENDERS) :] + CONTENDERS[: r % len(CONTENDERS)]
        for label, _, _, cores in order:
            outcomes[label].append(_once(folder, label, manifests[label], cores))
        capacity.append(_capacity(folder))
    counts = {o.counts for runs in outcomes.values() for o in runs}
    assert len(counts) == 1, f"the engines loaded other rows: {counts}"
    wall = {k: statistics.median(o.seconds for o in v) for k, v in outcomes.items()}
    cpu = {k: statistics.median(o.cpu for o in v) for k, v in outcomes.items()}
    print(f"whole processes, median of {REPEATS}, seconds (CPU seconds of the process tree):")
    for label, *_, cores in CONTENDERS:
        spread = " ".join(f"{o.seconds:.2f}" for o in outcomes[label])
        print(
            f"  {label:6} cores {cores:4} {wall[label]:6.2f} s  cpu {cpu[label]:6.2f} s"
            f"  (runs: {spread})"
        )
    print(
        f"(d1) per-core efficiency, local / dask1: {wall['local'] / wall['dask1']:.2f} "
        f"(target >= 0.75; CPU seconds: {cpu['local'] / cpu['dask1']:.2f})"
    )
    print(
        f"(d2) scaling, dask1 / dask2: {wall['dask1'] / wall['dask2']:.2f}x (target >= 1.7; "
        f"CPU seconds dask2 / dask1: {cpu['dask2'] / cpu['dask1']:.2f})"
    )
    print(
        "    what two cores gave against one meanwhile, per round (2.00 when idle and nothing "
        "is shared):"
    )
    print("      pure Python work:     " + " ".join(f"{p:.2f}" for p, _ in capacity))
    print("      Arrow + DuckDB work:  " + " ".join(f"{d:.2f}" for _, d in capacity))
    for label in ("dask1", "dask2"):
        parts = " ".join(
            f"{s} {statistics.median(o.stages.get(s, 0.0) for o in outcomes[label]):.2f}"
            for s in STAGES
        )
        print(f"  {label} driver stages, median s: {parts}")
    load = os.getloadavg()
    print(f"load average after: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
