"""A DLQ writer in its own process, for the crash and restart tests.

Argument: one JSON object ``{"root", "run_id", "load_id", "chunks": [sizes], "mode",
"policy": {...}, "hang_after": k}``. Prints the ids of every durable chunk as a JSON line.

Modes: ``close`` (close the run), ``abandon`` (exit without closing, as a crashed process
would leave it), ``hang`` (in the last chunk, after ``hang_after`` complete record files,
create one more file and stop before writing it, print ``MID`` and wait to be killed).
"""

from __future__ import annotations

import json
import os
import sys
import time

import structlog

from dpone.contracts.reasons import ReasonCode
from dpone.dlq import fsio
from dpone.dlq.model import rejected_rows
from dpone.dlq.policy import DlqPolicy
from dpone.dlq.refs import file_refs
from dpone.dlq.store import DlqStore
from dpone.testing import FrozenClock


def main() -> None:
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    spec = json.loads(sys.argv[1])
    policy = DlqPolicy(directory=spec["root"], **spec.get("policy", {}))
    store = DlqStore(spec["root"], policy, clock=FrozenClock("2026-03-01T12:00:00Z"))
    writer = store.open_run(spec["run_id"], spec.get("load_id", "load-1"), pipeline="orders")
    chunks = spec["chunks"]
    first = spec.get("first_row", 1)
    for number, size in enumerate(chunks):
        if spec["mode"] == "hang" and number == len(chunks) - 1:
            _hang_after(spec["hang_after"])
        refs = file_refs("data/orders.csv", "ab" * 32, range(first, first + size))
        first += size
        ids = writer.write_chunk(rejected_rows(refs, ReasonCode.TYPE_MISMATCH, columns="amount"))
        print(json.dumps(ids), flush=True)
    if spec["mode"] == "close":
        writer.close()
    os._exit(0)  # no cleanup at all: what a crash leaves is what the test inspects


def _hang_after(complete: int) -> None:
    real = fsio.create_exclusive
    made = 0

    def create(dir_fd: int, name: str, data: bytes, *, fsync: bool) -> bool:
        nonlocal made
        if made == complete:
            os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640, dir_fd=dir_fd))
            print("MID", flush=True)
            while True:
                time.sleep(60)
        made += 1
        return real(dir_fd, name, data, fsync=fsync)

    fsio.create_exclusive = create  # type: ignore[assignment]


if __name__ == "__main__":
    main()
