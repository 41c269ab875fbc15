"""The pipeline lock and the run journal, under ``<work_dir>/runs/``.

- ``<name>.lock``: an exclusive ``flock`` for the whole run; a second run of the same
  pipeline is refused at once (``DPONE_PIPELINE_LOCKED``) instead of interleaving writes.
  The kernel drops the lock when the holder dies, even by SIGKILL. The lock file is opened
  ``O_NOFOLLOW`` in ``runs/`` (itself reached without following links, see
  :func:`dpone.durable.open_below`), and after ``flock`` its name must still be the locked
  file: a lock file unlinked or replaced under a holder would otherwise let a second run
  lock a fresh file and run alongside (the DLQ writer lock checks the same way).
- ``<name>.journal.json``: which run is in flight (run id, load id, DLQ run), written
  durably before anything else; the next run reads it to recover a run that died.

The journal is read back, so it is input (STYLE habit 14): recovery acts on it (publishes
the evidence it holds, advances the state) only once it matched ``dpone.run-journal.v1``,
its checksum, this pipeline, and its evidence matched its run. Anything else is
``DPONE_JOURNAL_INVALID``, before recovery touches a file. A checksum proves the journal whole,
not who wrote it: with a signing key configured (``dpone/signing.py``) the journal is signed
like the state, and a ``running`` journal (the only one recovery acts on) whose signature is
missing or does not verify is ``DPONE_JOURNAL_SIGNATURE_INVALID``: recovery would otherwise
sign and publish whatever evidence an edited journal holds.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path
from typing import Any, Literal

import orjson

from dpone import durable, signing
from dpone.canonical import with_checksum
from dpone.errors import DponeError, PathIsSymlink, Stage
from dpone.ids import is_identifier
from dpone.published import checked_document, schema_errors
from dpone.records import frozen
from dpone.runtime.identity import RunIdentity

JOURNAL_SCHEMA = "dpone.run-journal.v1"
EVIDENCE_SCHEMA = "dpone.data_contract_evidence.v1"
MAX_JOURNAL_BYTES = 64 * 1024 * 1024
#: How often a lock whose file was swapped under us is retried before the run is refused.
_LOCK_ATTEMPTS = 5

JournalPhase = Literal["running", "finished", "failed", "recovered"]


class PipelineLocked(DponeError):
    code = "DPONE_PIPELINE_LOCKED"
    stage: Stage = "preflight"


class PipelineLockLost(PipelineLocked):
    """The run's lock file was unlinked or replaced while the run held it: another run of the
    pipeline may have locked a fresh file and be under way, so this one must not commit."""

    code = "DPONE_PIPELINE_LOCK_LOST"
    stage = "runtime"


class JournalInvalid(DponeError):
    """The run journal is not one dpone wrote (edited, planted or damaged)."""

    code = "DPONE_JOURNAL_INVALID"
    stage = "recover"


@frozen
class JournalEntry:
    """The journal's one entry: which run, in which phase, and what it publishes once it commits."""

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

    @classmethod
    def of(cls, identity: RunIdentity, phase: JournalPhase, **publish: Any) -> JournalEntry:
        """The entry of the run ``identity`` in ``phase`` (``publish``: what it will publish)."""
        return cls(
            identity.pipeline,
            identity.run_id,
            identity.load_id,
            phase,
            identity.started_at,
            **publish,
        )

    @property
    def identity(self) -> RunIdentity:
        """The run this entry is about."""
        return RunIdentity(self.pipeline, self.run_id, self.load_id, self.started_at)

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
    def __init__(self, runs_dir: Path, pipeline: str, *, anchor: Path | None = None) -> None:
        self.runs_dir = runs_dir
        self.pipeline = pipeline
        self.path = runs_dir / f"{pipeline}.journal.json"
        #: the user's folder above ``runs/`` (the work dir): followed; nothing below it is
        self.anchor = anchor if anchor is not None else runs_dir.parent
        self._lock_fd: int | None = None

    def lock(self) -> None:
        name = f"{self.pipeline}.lock"
        runs_fd = durable.open_below(self.anchor, self.runs_dir, create=True)
        assert runs_fd is not None  # created
        try:
            for _ in range(_LOCK_ATTEMPTS):
                fd = self._open_lock(runs_fd, name)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    raise self._locked() from None
                if _still_named(fd, runs_fd, name):
                    self._lock_fd = fd
                    return
                # The name no longer leads to the file we locked (unlinked or replaced while
                # we opened it): that lock guards nothing. Drop it and lock the current file.
                os.close(fd)
            raise self._locked()
        finally:
            os.close(runs_fd)

    def _open_lock(self, runs_fd: int, name: str) -> int:
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        try:
            return os.open(name, flags, durable.FILE_MODE, dir_fd=runs_fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
                raise durable.symlink_refused(f"runs/{name}") from None
            raise

    def _locked(self) -> PipelineLocked:
        return PipelineLocked(
            f"another run of pipeline '{self.pipeline}' is in progress",
            fixes=("wait for it to finish; runs of one pipeline never overlap",),
        )

    def _still_locked(self) -> bool:
        assert self._lock_fd is not None
        runs_fd = durable.open_below(self.anchor, self.runs_dir, create=False)
        if runs_fd is None:
            return False
        try:
            return _still_named(self._lock_fd, runs_fd, f"{self.pipeline}.lock")
        finally:
            os.close(runs_fd)

    def unlock(self) -> None:
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def read(self) -> JournalEntry | None:
        """The journal's entry, checked; None when the pipeline never ran."""
        try:
            raw = durable.read_below(self.anchor, self.path, MAX_JOURNAL_BYTES)
        except PathIsSymlink as exc:
            if exc.path == "runs":
                raise  # the folder, not the journal: refused as such
            raise self._invalid("is a symbolic link or not a file") from None
        if raw is None:
            return None
        if len(raw) > MAX_JOURNAL_BYTES:
            raise self._invalid("is larger than any journal dpone writes")
        # Replaced atomically, so a torn journal means outside interference.
        doc = checked_document(raw, JOURNAL_SCHEMA, self._invalid)
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

    def _check(self, doc: dict[str, Any]) -> None:
        if doc["pipeline"] != self.pipeline:
            raise self._invalid("names another pipeline")
        if doc["phase"] == "running" and signing.configured():
            found = signing.problem(doc, signing.keyring(), require=True, what="it")
            if found is not None:
                raise self._invalid(
                    f"is unsigned or its signature does not verify ({found[0]})",
                    code="DPONE_JOURNAL_SIGNATURE_INVALID",
                )
        if not (is_identifier(doc["run_id"]) and is_identifier(doc["load_id"])):
            raise self._invalid("holds a run or load id that is not a safe identifier")
        evidence = doc["evidence"]
        if evidence is not None and (
            schema_errors(with_checksum(evidence), EVIDENCE_SCHEMA)
            or evidence["pipeline"] != self.pipeline
            or evidence["run_id"] != doc["run_id"]
        ):
            raise self._invalid("holds evidence that is not its own run's")

    def _invalid(self, what: str, code: str | None = None) -> JournalInvalid:
        name = self.path.name
        return JournalInvalid(
            f"the run journal runs/{name} {what}; dpone does not recover from a journal it "
            "did not write",
            code=code,
            path=f"runs/{name}",
            fixes=(
                "run `dpone ops dlq verify --dir <the DLQ directory> --repair` (closes a dead "
                f"run's DLQ run as aborted), then move runs/{name} out of the work dir and "
                "rerun; the sink's load markers still say what committed",
            ),
        )

    def write(self, entry: JournalEntry) -> None:
        """Replace the journal. While this object holds the lock, the lock file must still be
        the locked one: every journal write checks it, the last just before the sink commit,
        so a run whose lock was taken from under it stops before committing. Any later entry
        (``failed``, or ``finished`` after a commit) is then not written at all: the journal
        may be the other run's now, and a ``running`` one left behind is recovered (its
        evidence republished identically) by the next run."""
        if self._lock_fd is not None and not self._still_locked():
            if entry.phase != "running":
                return
            raise PipelineLockLost(
                f"the lock file runs/{self.pipeline}.lock was removed or replaced during this "
                "run; another run of the pipeline may be under way, so this one stops before "
                "its sink commit",
                fixes=(
                    "nothing outside dpone may remove files under the work dir's runs/ while a "
                    "run is under way; find what did, then rerun",
                ),
            )
        doc = signing.sign(with_checksum(entry.to_json()))
        durable.replace_atomic(
            self.path, orjson.dumps(doc, option=orjson.OPT_INDENT_2), anchor=self.anchor
        )


def _still_named(fd: int, dir_fd: int, name: str) -> bool:
    """Whether ``name`` in ``dir_fd`` is still the file open as ``fd``."""
    try:
        named = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)
