"""Replay planning: records planned per second (every record read and verified).

A replay plan reads each record of a closed run, verifies its checksum and its index entry,
and derives an idempotency key per item. Compares, in one run on this machine, dpone's planner
on 10,000 and 100,000 records with the reference implementation's figure (about 0.8 s for
10,000 records, i.e. 12,500 records/s) and with the straightforward way to do the same check
(``json`` plus the ``rfc8785`` reference canonicalizer per record). The records are written
with the DLQ writer under /tmp first (not timed); the folder is removed in the background at
the end, because deleting 110,000 files on this VM's disk takes minutes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import orjson
import pyarrow as pa
import rfc8785
import structlog

from dpone.dlq import DlqPolicy, DlqStore, file_refs, rejected_rows
from dpone.dlq.replay import plan
from dpone.testing import FrozenClock

REFERENCE_RECORDS_PER_S = 12_500  # about 0.8 s for 10,000 records
CHUNK = 10_000
CASES = ((10_000, 3), (100_000, 2))  # (records, repetitions)
SOURCE = "data/orders/2026-03-01.csv"


def _write_run(store: DlqStore, run_id: str, total: int) -> float:
    began = time.perf_counter()
    with store.open_run(run_id, "load-1", pipeline="orders") as writer:
        for start in range(1, total + 1, CHUNK):
            count = min(CHUNK, total - start + 1)
            writer.write_chunk(
                rejected_rows(
                    pa.array(file_refs(SOURCE, "ab" * 32, range(start, start + count))),
                    "schema.type_mismatch",
                    columns="amount",
                    actual_types="string",
                    expected_types="decimal(12,2)",
                    source_partitions=SOURCE,
                )
            )
    return time.perf_counter() - began


def _naive(records: Path) -> float:
    """Records/s of reading and verifying each record with json and rfc8785, sorted by id."""
    began = time.perf_counter()
    items = []
    for path in sorted(records.iterdir()):
        doc = json.loads(path.read_bytes())
        claimed = doc.pop("sha256")
        actual = "sha256:" + hashlib.sha256(rfc8785.dumps(doc)).hexdigest()
        assert claimed == actual
        items.append((doc["record_id"], claimed, doc["record_ref"]))
    return len(items) / (time.perf_counter() - began)


def _remove_later(folder: Path) -> None:
    """Delete ``folder`` from a detached process, so the bench does not wait for the disk."""
    try:
        subprocess.Popen(
            ["rm", "-rf", "--", str(folder)],
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)


def run() -> None:
    if not structlog.is_configured():  # the store's lifecycle logs would drown the table
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    base = Path(tempfile.mkdtemp(prefix="dpone-bench-replay-", dir="/tmp"))
    root = base / "dlq"
    try:
        store = DlqStore(root, DlqPolicy(directory=str(root)), clock=FrozenClock())
        print(
            f"reference: {REFERENCE_RECORDS_PER_S:,} records/s (0.8 s per 10,000); "
            "every record read from disk (page cache warm) and verified"
        )
        for total, repeats in CASES:
            run_id = f"bench-{total}"
            wrote = _write_run(store, run_id, total)
            rates = []
            size = 0
            for _ in range(repeats):
                began = time.perf_counter()
                built = plan(store, run_id, "bench-resolver", "bench-sink", max_items=total)
                rates.append(total / (time.perf_counter() - began))
                size = len(orjson.dumps(built.to_json()))
            best, worst = max(rates), min(rates)
            print(
                f"  dpone plan, {total:>7,} records: best {best:>7,.0f}, worst {worst:>7,.0f} "
                f"records/s = {best / REFERENCE_RECORDS_PER_S:.2f}x reference "
                f"({total / best:.2f} s; plan JSON {size / 1e6:.1f} MB; "
                f"records written in {wrote:.1f} s, not timed)"
            )
            if total == CASES[0][0]:
                naive = _naive(root / "runs" / run_id / "records")
                print(
                    f"  json + rfc8785 per record, {total:>7,} records: {naive:>7,.0f} records/s "
                    f"(dpone {best / naive:.1f}x)"
                )
    finally:
        _remove_later(base)
        print(f"  (the bench's files are being removed in the background: {base})")
