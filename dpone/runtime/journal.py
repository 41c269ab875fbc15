"""The pipeline lock and the run journal, under ``<work_dir>/runs/``.

- ``<name>.lock``: an exclusive ``flock`` for the whole run; a second run of the same
  pipeline is refused at once (``DPONE_PIPELINE_LOCKED``) instead of interleaving writes.
  The kernel drops the lock when the holder dies, even by SIGKILL.
- ``<name>.journal.json``: which run is in flight (run id, load id, DLQ run), written
  durably before anything else; the next run reads it to recover a run that died.

The journal is read back, so it is input (STYLE habit 14): recovery acts on it (publishes
the evidence it holds, advances the state) only once it matched ``dpone.run-journal.v1``,
its checksum, this pipeline, and its evidence matched its run. Anything else is
``DPONE_JOURNAL_INVALID``, before recovery touches a file.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

from dpone.canonical import verify_checksum, with_checksum
from dpone.durable import replace_atomic
from dpone.errors import DponeError
from dpone.ids import is_identifier
from dpone.published import schema_errors

JOURNAL_SCHEMA = "dpone.run-journal.v1"
EVIDENCE_SCHEMA = "dpone.data_contract_evidence.v1"
MAX_JOURNAL_BYTES = 64 * 1024 * 1024

JournalPhase = Literal["running", "finished", "failed", "recovered"]


class PipelineLocked(DponeError):
    code = "DPONE_PIPELINE_LOCKED"
    stage = "preflight"


class JournalInvalid(DponeError):
    """The run journal is not one dpone wrote (edited, planted or damaged)."""

    code = "DPONE_JOURNAL_INVALID"
    stage = "recover"


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
    boundary: dict[str, Any] | None = None
    """The state's boundary window once the run commits (``runtime/window.py``), as JSON."""

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": JOURNAL_SCHEMA,
            "pipeline": self.pipeline,
            "run_id": self.run_id,
            "load_id": self.load_id,
            "phase": self.phase,
            "started_at": self.started_at,
            "evidence": self.evidence,
            "unplaced": self.unplaced,
            "boundary": self.boundary,
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
        """The journal's entry, checked; None when the pipeline never ran."""
        try:
            if self.path.is_symlink():
                raise self._invalid("is a symbolic link")
            with self.path.open("rb") as handle:
                raw = handle.read(MAX_JOURNAL_BYTES + 1)
        except FileNotFoundError:
            return None
        except IsADirectoryError:
            raise self._invalid("is not a file") from None
        if len(raw) > MAX_JOURNAL_BYTES:
            raise self._invalid("is larger than any journal dpone writes")
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            # Replaced atomically, so a torn journal means outside interference.
            raise self._invalid("is not JSON") from None
        self._check(doc)
        return JournalEntry(
            pipeline=doc["pipeline"],
            run_id=doc["run_id"],
            load_id=doc["load_id"],
            phase=doc["phase"],
            started_at=doc["started_at"],
            evidence=doc.get("evidence"),
            unplaced=doc.get("unplaced"),
            boundary=doc.get("boundary"),
        )

    def _check(self, doc: Any) -> None:
        if not isinstance(doc, dict) or schema_errors(doc, JOURNAL_SCHEMA):
            raise self._invalid(f"is not a valid {JOURNAL_SCHEMA}")
        if not verify_checksum(doc):
            raise self._invalid("does not match its checksum")
        if doc["pipeline"] != self.pipeline:
            raise self._invalid("names another pipeline")
        if not (is_identifier(doc["run_id"]) and is_identifier(doc["load_id"])):
            raise self._invalid("holds a run or load id that is not a safe identifier")
        evidence = doc["evidence"]
        if evidence is not None and (
            schema_errors(with_checksum(evidence), EVIDENCE_SCHEMA)
            or evidence["pipeline"] != self.pipeline
            or evidence["run_id"] != doc["run_id"]
        ):
            raise self._invalid("holds evidence that is not its own run's")

    def _invalid(self, what: str) -> JournalInvalid:
        name = self.path.name
        return JournalInvalid(
            f"the run journal runs/{name} {what}; dpone does not recover from a journal it "
            "did not write",
            path=f"runs/{name}",
            fixes=(
                "run `dpone ops dlq verify --dir <the DLQ directory> --repair` (closes a dead "
                f"run's DLQ run as aborted), then move runs/{name} out of the work dir and "
                "rerun; the sink's load markers still say what committed",
            ),
        )

    def write(self, entry: JournalEntry) -> None:
        doc = with_checksum(entry.to_json())
        replace_atomic(self.path, orjson.dumps(doc, option=orjson.OPT_INDENT_2))
