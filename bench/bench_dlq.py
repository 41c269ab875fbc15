"""DLQ write throughput: rejected rows made durable per second, and the index of a big run.

Compares, in one run on this machine, the dpone writer (a whole chunk per call, published as
one segment file: temp file, fsync, create-only link, fsync the folder) with what a careful
hand-written dead-letter writer does instead (the same steps per record), and with the
reference store's published figure (3.1 ms per record). Writes under /tmp (the real disk on
this VM, not tmpfs: the bench says which) and removes what it wrote.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import structlog

from dpone.dlq import DlqPolicy, DlqStore, RejectedRow, file_refs, rejected_rows
from dpone.ops.verification import verify_store
from dpone.testing import FrozenClock

CHUNK = 10_000  # runtime.chunk_size's default
REFERENCE_MS_PER_RECORD = 3.1  # the reference store's published figure
TARGET_RECORDS_PER_S = 100_000  # rejects made durable per second (docs/dlq.md, Numbers)
TARGET_INDEX_S = 1.0
NAIVE_RECORDS = 2_000
CASES = ((10_000, 5), (100_000, 5))  # (rejected rows, repetitions)
SOURCE = "data/orders/2026-03-01.csv"


def _chunk(start: int, count: int) -> list[RejectedRow]:
    """One chunk of rejects, built as the lifecycle builds them: from Arrow columns."""
    nulls = count // 4
    return rejected_rows(
        pa.array(file_refs(SOURCE, "ab" * 32, range(start, start + count))),
        pa.array(["schema.type_mismatch"] * (count - nulls) + ["schema.required_null"] * nulls),
        columns=pa.array(["amount"] * (count - nulls) + ["updated_at"] * nulls),
        actual_types="string",
        expected_types="decimal(18,2)",
        source_offsets=pa.array(range(start - 1, start - 1 + count)),
        source_partitions=SOURCE,
    )


def _durable_run(store: DlqStore, run_id: str, total: int) -> tuple[float, float, float]:
    """Seconds (building descriptors, inside write_chunk, inside close)."""
    writer = store.open_run(run_id, "load-1", pipeline="orders")
    build = write = 0.0
    for start in range(1, total + 1, CHUNK):
        began = time.perf_counter()
        rows = _chunk(start, min(CHUNK, total - start + 1))
        built = time.perf_counter()
        writer.write_chunk(rows)
        write += time.perf_counter() - built
        build += built - began
    began = time.perf_counter()
    result = writer.close()
    closed = time.perf_counter() - began
    assert result.record_count == total
    return build, write, closed


def _per_record_fsync(folder: Path, count: int) -> float:
    """Records/s of the usual careful writer: temp file, fsync, rename, fsync, per record."""
    payload = b'{"schema":"dpone.dlq.v1","reason":"schema.type_mismatch"}' * 10
    folder.mkdir()
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    began = time.perf_counter()
    try:
        for n in range(count):
            tmp = f".r{n}.tmp"
            out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640, dir_fd=fd)
            os.write(out, payload)
            os.fsync(out)
            os.close(out)
            os.rename(tmp, f"r{n}.json", src_dir_fd=fd, dst_dir_fd=fd)
            os.fsync(fd)
    finally:
        os.close(fd)
    return count / (time.perf_counter() - began)


def _filesystem(path: Path) -> str:
    """The filesystem type ``path`` lives on (from /proc/mounts: the longest mount prefix)."""
    best, kind = "", "unknown"
    with open("/proc/mounts") as mounts:
        for line in mounts:
            _, point, fstype, *_ = line.split()
            if str(path).startswith(point) and len(point) > len(best):
                best, kind = point, fstype
    return kind


def _verdict(ok: bool) -> str:
    return "meets" if ok else "MISSES"


def _stats(rates: list[float]) -> str:
    """Best, median and worst of the repetitions (one number when there is one)."""
    ordered = sorted(rates, reverse=True)
    if len(ordered) == 1:
        return f"{ordered[0]:>7,.0f} records/s"
    return (
        f"best {ordered[0]:>7,.0f}, median {ordered[len(ordered) // 2]:>7,.0f}, "
        f"worst {ordered[-1]:>7,.0f} records/s"
    )


def run() -> None:
    if not structlog.is_configured():  # the store's lifecycle logs would drown the table
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    base = Path(tempfile.mkdtemp(prefix="dpone-bench-dlq-", dir="/tmp"))
    root = base / "dlq"
    try:
        store = DlqStore(root, DlqPolicy(directory=str(root)), clock=FrozenClock())
        print(
            f"one segment per chunk of {CHUNK:,} rejected rows, on {_filesystem(base)}; "
            "each case repeated, a fresh run each time (the disk is shared: look at the spread)"
        )
        reference = 1000 / REFERENCE_MS_PER_RECORD
        # Nothing is deleted before the end: on a filesystem mounted with `discard` (this VM),
        # a large delete slows the file creations that follow for many seconds.
        naive = _per_record_fsync(base / "naive", NAIVE_RECORDS)
        print(f"  reference store (published 3.1 ms/record): {reference:>9,.0f} records/s")
        print(f"  per-record fsync writer, {NAIVE_RECORDS:,} records:  {naive:>9,.0f} records/s")
        for total, repeats in CASES:
            rates, closes, builds, size = [], [], [], 0
            for attempt in range(repeats):
                run_id = f"bench-{total}-{attempt}"
                build, write, close = _durable_run(store, run_id, total)
                rates.append(total / write)
                closes.append(close)
                builds.append(build)
                size = (root / "runs" / run_id / "index.json").stat().st_size
            best = max(rates)
            print(
                f"  dpone, {total:>7,} rejects durable: {_stats(rates)} "
                f"= {best / reference:,.0f}x reference, {best / naive:,.1f}x per-record fsync; "
                f"{_verdict(best >= TARGET_RECORDS_PER_S)} {TARGET_RECORDS_PER_S:,}/s "
                f"(descriptors from Arrow: {min(builds):.2f} s)"
            )
            print(
                f"  dpone, {total:>7,}-record index written: best {min(closes):.3f} s, "
                f"worst {max(closes):.3f} s ({size / 1e6:.1f} MB); "
                f"{_verdict(max(closes) < TARGET_INDEX_S)} {TARGET_INDEX_S:.0f} s"
            )
        first = CASES[0][0]
        began = time.perf_counter()
        findings = verify_store(store, f"bench-{first}-0")
        took = time.perf_counter() - began
        print(
            f"  dpone, verify a {first:,}-record run: {first / took:>9,.0f} records/s "
            f"({took:.2f} s, {len(findings)} findings)"
        )
    finally:
        # Not part of any figure.
        began = time.perf_counter()
        shutil.rmtree(base, ignore_errors=True)
        print(f"  (cleanup: removing the bench's files took {time.perf_counter() - began:.0f} s)")
