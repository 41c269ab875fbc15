"""REST API -> DuckDB: 100,000 items over 100 pages from a local HTTP server, side by side.

Two programs, timed as whole processes (interpreter start and imports included) pinned to the
same core with ``taskset``, alternating, median of :data:`REPEATS`:

* dpone: ``python -m dpone run manifest.yaml --format json`` with a ``rest_api`` source (dlt's
  REST API source underneath), a declared contract under ``quarantine`` (0.1% of the items are
  bad), the DLQ durable on this disk, evidence and state;
* dlt alone: the same dlt REST API source config, ``dlt.pipeline(destination="duckdb")
  .run(rest_api_source(...))`` in a .py file of its own, with no contract (dlt's extract,
  normalize and load with its default schema inference).

Target: dpone's time <= 1.25x dlt's. Both read the same server: a threaded
``http.server`` in a process of its own, on the other core, serving pre-encoded pages
(``?page=N``, 1,000 items each, then an empty page) over keep-alive HTTP/1.1. Each dpone run's
artifacts are checked (one DLQ segment line per quarantined item, evidence, state) and both
programs must have loaded every good item. Everything lives under one ``tempfile.mkdtemp()``
folder on a real disk (tmpfs refused), removed at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

from bench.e2e_procs import NOT_A_DISK, Pinned, child_env, filesystem

ITEMS = 100_000
PAGES = 100
BAD_EVERY = 1_000  # one item in a thousand has an amount that is not a decimal
REPEATS = 3
TARGET = 1.25
NAME = "orders_rest"

#: The API: pages of JSON items, encoded once, served over keep-alive HTTP/1.1.
SERVER = """\
import json, sys
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

items, pages, bad_every = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
per_page = items // pages
start = datetime(2026, 1, 1, tzinfo=timezone.utc)


def item(i):
    return {
        "id": i,
        "customer": f"c{i % 9973}",
        "amount": "n/a" if i % bad_every == 0 else f"{(i * 37) % 100000 / 100:.2f}",
        "quantity": i % 17 + 1,
        "updated_at": (start + timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "is_gift": i % 11 == 0,
        "note": f"order {i} of the bench",
    }


BODIES = {
    page: json.dumps(
        {"items": [item(i) for i in range((page - 1) * per_page + 1, page * per_page + 1)]}
    ).encode()
    for page in range(1, pages + 1)
}
EMPTY = b'{"items": []}'


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        query = parse_qs(urlsplit(self.path).query)
        body = BODIES.get(int(query.get("page", ["1"])[0]), EMPTY)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""

#: dlt alone: the same REST API source config, loaded by dlt's own pipeline, no contract.
DLT_ALONE = """\
import sys

import dlt
from dlt.sources.rest_api import rest_api_source

source = rest_api_source({
    "client": {
        "base_url": sys.argv[1],
        "paginator": {"type": "page_number", "base_page": 1, "total_path": None},
    },
    "resources": [{"name": "orders", "endpoint": {"path": "orders", "data_selector": "items"}}],
})
pipeline = dlt.pipeline(
    pipeline_name="orders_rest_dlt",
    destination=dlt.destinations.duckdb(sys.argv[2]),
    dataset_name="analytics",
)
pipeline.run(source)
with pipeline.sql_client() as client:
    print(client.execute_sql("SELECT count(*) FROM orders")[0][0])
"""

MANIFEST = """\
name: {name}
runtime: {{work_dir: {work}, chunk_size: 10000}}
source:
  type: rest_api
  client:
    base_url: {url}
    paginator: {{type: page_number, base_page: 1, total_path: null}}
  resource:
    name: orders
    endpoint: {{path: orders, data_selector: items}}
sink:
  type: duckdb
  dataset: analytics
  table: orders
  options:
    schema_contract:
      enforcement: quarantine
      columns:
        id: {{type: integer, nullable: false}}
        customer: {{type: string, nullable: false}}
        amount: {{type: decimal, precision: 12, scale: 2, nullable: false}}
        quantity: {{type: integer, nullable: false}}
        updated_at: {{type: timestamp, timezone: true, nullable: false}}
        is_gift: {{type: boolean, nullable: false}}
        note: {{type: string}}
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_listening(port: int) -> None:
    for _ in range(600):
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError("the bench API did not start")


def _check_artifacts(work: Path, run_id: str, quarantined: int) -> None:
    """One DLQ segment line per quarantined item, the evidence and the state, all JSON."""
    segments = (work / "dlq" / "runs" / run_id / "segments").glob("*.jsonl")
    lines = sum(len(s.read_bytes().splitlines()) for s in segments)
    evidence = work / "evidence" / NAME / run_id / "data_contract_evidence.json"
    state = work / "state" / f"{NAME}.json"
    if lines != quarantined:
        raise RuntimeError(f"{lines} DLQ segment lines for {quarantined} quarantined items")
    json.loads(evidence.read_bytes())
    json.loads(state.read_bytes())


def _dpone(pinned: Pinned, url: str, tag: str) -> float:
    work = f".dpone-{tag}"
    shutil.rmtree(pinned.base / work, ignore_errors=True)
    manifest = pinned.base / f"manifest-{tag}.yaml"
    manifest.write_text(MANIFEST.format(name=NAME, work=work, url=url), encoding="utf-8")
    argv = [sys.executable, "-m", "dpone", "run", manifest.name, "--format", "json"]
    took = pinned.run(argv, tag).seconds  # a program that fails raises there
    out, _ = pinned.output(tag)
    report = json.loads(out)
    rows = report["rows"]
    _check_artifacts(pinned.base / work, report["run_id"], rows["quarantined"])
    expected_bad = ITEMS // BAD_EVERY
    if (rows["loaded"], rows["quarantined"]) != (ITEMS - expected_bad, expected_bad):
        raise RuntimeError(f"dpone loaded {rows['loaded']}, quarantined {rows['quarantined']}")
    con = duckdb.connect(str(pinned.base / work / f"{NAME}.duckdb"), read_only=True)
    try:
        found = con.execute("SELECT count(*) FROM analytics.orders").fetchone()
    finally:
        con.close()
    if found is None or found[0] != ITEMS - expected_bad:
        raise RuntimeError(f"the DuckDB table holds {found} rows")
    shutil.rmtree(pinned.base / work)
    return took


def _dlt(pinned: Pinned, url: str, tag: str) -> float:
    db = pinned.base / f"dlt-{tag}.duckdb"
    db.unlink(missing_ok=True)
    shutil.rmtree(pinned.base / "dlt-data", ignore_errors=True)
    argv = [sys.executable, "dlt_alone.py", url, db.name]
    took = pinned.run(argv, tag).seconds  # a program that fails raises there
    out, err = pinned.output(tag)
    if int(out.split()[-1]) != ITEMS:
        raise RuntimeError(f"dlt alone loaded other than {ITEMS}: {out[-1000:]}{err[-2000:]}")
    db.unlink()
    return took


def run() -> None:
    if shutil.which("taskset") is None:
        raise RuntimeError("taskset (util-linux) is needed to pin the benchmarked processes")
    base = Path(tempfile.mkdtemp(prefix="dpone-bench-rest-"))
    fs = filesystem(base)
    if fs in NOT_A_DISK:
        raise RuntimeError(f"{base} is on {fs}; the bench needs a real disk")
    cores = sorted(os.sched_getaffinity(0))
    core, server_core = cores[-1], cores[0]
    port = _free_port()
    (base / "server.py").write_text(SERVER, encoding="utf-8")
    (base / "dlt_alone.py").write_text(DLT_ALONE, encoding="utf-8")
    env = child_env(base)
    env.update(
        RUNTIME__DLTHUB_TELEMETRY="false",
        DLT_DATA_DIR=str(base / "dlt-data"),
        DLT_PROJECT_DIR=str(base),
    )
    shape = [str(ITEMS), str(PAGES), str(BAD_EVERY)]
    server = subprocess.Popen(
        ["taskset", "-c", str(server_core), sys.executable, "server.py", str(port), *shape],
        cwd=base,
        env=env,
    )
    try:
        _wait_listening(port)
        url = f"http://127.0.0.1:{port}/"
        pinned = Pinned(str(core), base, env)
        print(
            f"{ITEMS:,} items over {PAGES} pages from a local HTTP server -> DuckDB; "
            f"whole processes on core {core} (server on core {server_core}), {fs} at {base}",
            flush=True,
        )
        _dpone(pinned, url, "warm-dpone")  # warms the bytecode and page caches
        _dlt(pinned, url, "warm-dlt")
        dpone_s, dlt_s = [], []
        for i in range(REPEATS):
            pair = [("dpone", _dpone), ("dlt", _dlt)]
            for label, fn in pair if i % 2 == 0 else pair[::-1]:
                took = fn(pinned, url, f"{label}-{i}")
                (dpone_s if label == "dpone" else dlt_s).append(took)
                print(f"  {label:<6} run {i + 1}: {took:6.2f} s", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(base, ignore_errors=True)
    ours, theirs = statistics.median(dpone_s), statistics.median(dlt_s)
    ratio = ours / theirs
    print(f"dpone (contract + DLQ + evidence + state): {ours:6.2f} s  median of {REPEATS}")
    print(f"dlt pipeline alone (no contract):          {theirs:6.2f} s  median of {REPEATS}")
    verdict = "met" if ratio <= TARGET else "MISSED"
    print(f"ratio dpone/dlt: {ratio:.2f}x  (target <= {TARGET}x: {verdict})")


if __name__ == "__main__":
    run()
