"""A DLQ writer in its own process, for the crash and restart tests.

Argument: one JSON object ``{"root", "run_id", "load_id", "chunks": [sizes], "mode",
"policy": {...}, "hang_after": k}``. Prints the ids of every durable chunk as a JSON line.

Modes: ``close`` (close the run), ``abandon`` (exit without closing, as a crashed process
would leave it), ``hang`` (in the last chunk, after ``hang_after`` segments of it are
published, write the next segment's temporary file durably and stop before its link, print
``MID`` and wait to be killed). ``policy.max_segment_bytes`` makes a chunk several segments.
"""

from __future__ import annotations

import json
import os
import sys
import time

import structlog

import dpone.faults
from dpone.contracts.dlq import DlqPolicy
from dpone.contracts.reasons import ReasonCode
from dpone.dlq.refs import file_refs
from dpone.dlq.rejects import rejected_rows
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
    """Stop inside the publish of the chunk's segment number ``complete + 1`` (0-based
    ``complete``), between its durable temp file and its link (``during_dlq_group_commit``)."""
    published = 0

    def hook(point: str) -> None:
        nonlocal published
        if point != "during_dlq_group_commit":
            return
        if published == complete:
            print("MID", flush=True)
            while True:
                time.sleep(60)
        published += 1

    dpone.faults._hook = hook


if __name__ == "__main__":
    main()
