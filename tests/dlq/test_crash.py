"""A writer killed with SIGKILL in the middle of a chunk, then verify and --repair."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import orjson
from click.testing import CliRunner

from dpone.cli.ops_dlq import dlq_group
from dpone.dlq.store import DlqStore

from .conftest import record_files, start_writer

RUN = "run-killed"


def _kill_mid_chunk(root: Path, complete: int) -> list[str]:
    """Write one durable chunk, then die inside the next after ``complete`` more files."""
    proc = start_writer(root, run_id=RUN, chunks=[25, 40], mode="hang", hang_after=complete)
    assert proc.stdout is not None
    reported = json.loads(proc.stdout.readline())
    assert proc.stdout.readline().strip() == "MID"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    proc.stdout.close()
    assert proc.stderr is not None
    proc.stderr.close()
    return list(reported)


def test_sigkill_mid_chunk_then_verify_and_repair(root: Path, store: DlqStore) -> None:
    reported = _kill_mid_chunk(root, complete=17)
    files = record_files(root, RUN)
    torn = [p for p in files if p.stat().st_size == 0]
    assert len(files) == 25 + 17 + 1
    assert len(torn) == 1
    index = json.loads((root / "runs" / RUN / "index.json").read_bytes())
    assert index["status"] == "open"

    runner = CliRunner()
    found = runner.invoke(dlq_group, ["verify", "--dir", str(root), "--format", "json"])
    assert found.exit_code == 1, found.output
    report = json.loads(found.output)
    assert sorted(f["code"] for f in report["findings"]) == [
        "DPONE_DLQ_RUN_ABANDONED",
        "DPONE_DLQ_TORN_RECORD",
    ]
    assert all(f["repairable"] for f in report["findings"])

    fixed = runner.invoke(dlq_group, ["verify", "--dir", str(root), "--repair"])
    assert fixed.exit_code == 0, fixed.output
    assert "repaired DPONE_DLQ_RUN_ABANDONED" in fixed.output

    index = json.loads((root / "runs" / RUN / "index.json").read_bytes())
    assert (index["status"], index["status_reason"]) == ("aborted", "writer_gone")
    on_disk = sorted(p.stem for p in record_files(root, RUN))
    indexed = [e["record_id"] for e in index["records"]]
    assert indexed == on_disk  # exactly the records that verify on disk, the torn one removed
    assert len(indexed) == 25 + 17
    assert set(reported) <= set(indexed)  # nothing reported durable was lost
    for record_id in indexed:
        store.read_record(RUN, record_id)
    assert store.verify() == []
    assert not (root / "runs" / RUN / "writer.lock").exists()
    assert orjson.loads((root / "runs" / RUN / "index.json").read_bytes())["owner"] is None


def test_sigkill_then_recovery_by_the_next_run(root: Path, store: DlqStore) -> None:
    reported = _kill_mid_chunk(root, complete=0)
    assert store.recover_abandoned(pipeline="orders") == [RUN]
    index = store.read_index(RUN)
    assert index.status == "aborted"
    assert index.record_ids == tuple(sorted(reported))
    assert store.verify() == []
