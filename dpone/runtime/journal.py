"""The pipeline lock and the run journal, under ``<work_dir>/runs/``.

- ``<name>.lock``: an exclusive ``flock`` for the whole run; a second run of the same
  pipeline is refused at once (``DPONE_PIPELINE_LOCKED``) instead of interleaving writes.
  The kernel drops the lock when the holder dies, even by SIGKILL.
- ``<name>.journal.json``: which run is in flight (run id, load id, DLQ run), written
  durably before anything else; the next run reads it to recover a run that died.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

from dpone.durable import replace_atomic
from dpone.errors import DponeError

JournalPhase = Literal["running", "finished", "failed", "recovered"]


class PipelineLocked(DponeError):
    code = "DPONE_PIPELINE_LOCKED"
    stage = "preflight"


@dataclass(frozen=True, slots=True)
class JournalEntry:
    pipeline: str
    run_id: str
    load_id: str
    phase: JournalPhase
    started_at: str
    evidence: dict[str, Any] | None = None
    """The evidence the run will publish once its sink commits (written before the commit)."""
    unplaced: dict[str, list[int]] | None = None
    """The state's unplaced rows once the run commits (see ``runtime/cursor.py``)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "pipeline": self.pipeline,
            "run_id": self.run_id,
            "load_id": self.load_id,
            "phase": self.phase,
            "started_at": self.started_at,
            "evidence": self.evidence,
            "unplaced": self.unplaced,
        }


class RunJournal:
    def __init__(self, runs_dir: Path, pipeline: str) -> None:
        self.runs_dir = runs_dir
        self.pipeline = pipeline
        self.path = runs_dir / f"{pipeline}.journal.json"
        self._lock_fd: int | None = None

    def lock(self) -> None:
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.runs_dir / f"{self.pipeline}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise PipelineLocked(
                f"another run of pipeline '{self.pipeline}' is in progress",
                fixes=("wait for it to finish; runs of one pipeline never overlap",),
            ) from None
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def read(self) -> JournalEntry | None:
        try:
            doc = orjson.loads(self.path.read_bytes())
        except FileNotFoundError:
            return None
        except orjson.JSONDecodeError:
            # Replaced atomically, so a torn journal means outside interference; treat the
            # previous run as unknown and let the sink markers and the DLQ decide.
            return None
        return JournalEntry(
            pipeline=doc["pipeline"],
            run_id=doc["run_id"],
            load_id=doc["load_id"],
            phase=doc["phase"],
            started_at=doc["started_at"],
            evidence=doc.get("evidence"),
            unplaced=doc.get("unplaced"),
        )

    def write(self, entry: JournalEntry) -> None:
        replace_atomic(self.path, orjson.dumps(entry.to_json(), option=orjson.OPT_INDENT_2))
