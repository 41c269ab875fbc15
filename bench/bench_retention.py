"""Retention over segments: plan + apply over 1,000,000 records (100 runs of 10,000).

The store is built first under /tmp (the real disk on this VM; not timed): 100 closed runs of
10,000 records, one segment per chunk of 2,500 records, every record of every run replayed
and acknowledged. The clock then moves past their expiry and the bench times, as the CLI
does them, ``plan_retention`` then ``apply_retention`` (which re-reads the store and judges
every protection again before it deletes). Half of the runs lose every record (their
segments are removed); the other half keep the records of one segment in four, unexpired
because they were written later (their other segments go whole). Target: < 10 s.
The per-record-file store this replaced deleted by unlinking one file per record.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import structlog

from dpone.dlq import DlqPolicy, DlqStore, file_refs, rejected_rows
from dpone.dlq.acks import replay_id_of
from dpone.ops.retention import apply_retention, plan_retention
from dpone.testing import FrozenClock

RUNS = 100
PER_RUN = 10_000
CHUNK = 2_500
TARGET_S = 10.0
SOURCE = "data/orders/2026-03-01.csv"


def _fill(store: DlqStore, clock: FrozenClock) -> None:
    plan_id = "sha256:" + "0" * 64
    for n in range(RUNS):
        run_id = f"run-{n:03d}"
        with store.open_run(run_id, f"load-{n}", pipeline="orders") as writer:
            for start in range(1, PER_RUN + 1, CHUNK):
                if n % 2 and start > PER_RUN - CHUNK:
                    clock.advance(days=20)  # the last chunk of odd runs expires later
                writer.write_chunk(
                    rejected_rows(
                        pa.array(file_refs(SOURCE, "ab" * 32, range(start, start + CHUNK))),
                        "schema.type_mismatch",
                        columns="amount",
                        actual_types="string",
                        expected_types="decimal(12,2)",
                        source_partitions=SOURCE,
                    )
                )
            if n % 2:
                clock.advance(days=-20)
        index = store.read_index(run_id)
        acks = [
            {
                "record_id": e.record_id,
                "record_sha256": e.sha256,
                "plan_id": plan_id,
                "idempotency_key": f"k-{e.record_id}",
                "outcome": "applied",
                "resolver_identity": "bench",
                "target_identity": "bench",
            }
            for e in index.entries
        ]
        store.write_acks(run_id, replay_id_of(plan_id), acks, index=index)


def run() -> None:
    if not structlog.is_configured():
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    base = Path(tempfile.mkdtemp(prefix="dpone-bench-retention-", dir="/tmp"))
    root = base / "dlq"
    clock = FrozenClock("2026-01-01T00:00:00Z")
    try:
        store = DlqStore(
            root, DlqPolicy(directory=str(root), max_records_per_run=PER_RUN), clock=clock
        )
        began = time.perf_counter()
        _fill(store, clock)
        print(
            f"store: {RUNS} runs x {PER_RUN:,} records, all acknowledged "
            f"(built in {time.perf_counter() - began:.0f} s, not timed)"
        )
        clock.advance(days=40)  # past 30 days for most segments, not for the later ones
        started = time.perf_counter()
        plan = plan_retention(store, clock())
        planned = time.perf_counter()
        result = apply_retention(store, plan)
        applied = time.perf_counter()
        total = applied - started
        verdict = "meets" if total < TARGET_S else "MISSES"
        print(
            f"  plan: {planned - started:.2f} s ({RUNS * PER_RUN / (planned - started):,.0f} "
            f"records/s); apply: {applied - planned:.2f} s; deleted {result.deleted:,} records "
            f"and {result.deleted_acks:,} acknowledgements; verify clean: {result.clean}"
        )
        print(
            f"  plan + apply over {RUNS * PER_RUN:,} records: {total:.2f} s; "
            f"{verdict} {TARGET_S:.0f} s"
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)
