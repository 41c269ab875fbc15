"""``QuarantineService``: seed 004's legacy service over a ``quarantine.dir`` folder, readable
for the deprecation window of that key.

``runs()`` and ``read(run_id)`` read the raw JSONL export (:mod:`dpone.runtime.legacy_export`)
as untrusted input: a run folder is reached without following links, each file's name must be
the SHA-256 of its bytes, each line must have the export's shape, and an error names the file
and line, never a value. ``replay(run_id, manifest=...)`` never replays from the export: it is
the canonical replay (:func:`dpone.ops.replay_execute`, the first-party file executor) of the
same run of the canonical DLQ, and its result says how many rows it applied and how many it
could not. A replay that leaves a row pending, or that fails, is never reported as a success:
with ``check=True`` (the default) it raises :class:`LegacyReplayFailed` carrying the result.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import orjson

from dpone import durable
from dpone.dlq.layout import ACKS_DIR, RUNS_DIR
from dpone.errors import DponeError, ErrorDetail, PathIsSymlink, UsageError
from dpone.ids import is_identifier
from dpone.records import frozen
from dpone.runtime.legacy_export import SUFFIX

if TYPE_CHECKING:
    from dpone.manifest.plan import Plan
    from dpone.ops.replay.executor import ReplayResult

PathLike = str | os.PathLike[str]
#: The largest export file read back (a chunk's rejected rows with their values).
MAX_FILE_BYTES = 1 << 30
_FILE_NAME = re.compile(r"^[0-9a-f]{64}" + re.escape(SUFFIX) + "$")
_LINE_KEYS = frozenset({"record_ref", "reason", "column", "row"})
_TRAILING_NUMBER = re.compile(r"^(.*?)(\d+)$")


class QuarantineExportInvalid(DponeError):
    """A file of the legacy export is not what dpone wrote (renamed, edited, truncated)."""

    code = "DPONE_QUARANTINE_EXPORT_INVALID"
    stage = "replay"


class LegacyReplayFailed(DponeError):
    """A legacy replay that did not apply every row of the run (``replay`` is the result)."""

    code = "DPONE_QUARANTINE_REPLAY_FAILED"
    stage = "replay"

    def __init__(self, message: str, *, replay: LegacyReplay, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.replay = replay


@frozen
class ExportedRow:
    """One line of the raw export: the rejected row's values and how to find its DLQ record."""

    record_ref: str
    reason: str
    column: str | None
    row: dict[str, Any]


@frozen
class LegacyReplay:
    """What a legacy replay achieved: ``succeeded`` only when no row of the run is pending."""

    run_id: str
    result: ReplayResult | None
    """The canonical replay's result (None: it failed before applying anything)."""
    error: ErrorDetail | None = None

    @property
    def status(self) -> Literal["succeeded", "incomplete", "failed"]:
        if self.error is not None or self.result is None:
            return "failed"
        return "incomplete" if self.result.pending else "succeeded"

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"

    def to_json(self) -> dict[str, Any]:
        counts = self.result.counts() if self.result is not None else {}
        return {
            "run_id": self.run_id,
            "status": self.status,
            "applied": counts.get("applied", 0),
            "already_acknowledged": counts.get("already_acknowledged", 0),
            "pending": self.result.pending if self.result is not None else None,
            "result": self.result.to_json() if self.result is not None else None,
            "error": self.error.to_json() if self.error is not None else None,
        }


class QuarantineService:
    """The legacy export folder ``directory`` and the canonical DLQ at ``dlq_dir`` (by default
    the same folder: a legacy manifest keeps its DLQ there unless it names another)."""

    def __init__(self, directory: PathLike, *, dlq_dir: PathLike | None = None) -> None:
        self.directory = Path(directory)
        self.dlq_dir = Path(dlq_dir) if dlq_dir is not None else self.directory

    @classmethod
    def from_manifest(cls, manifest: PathLike | Plan) -> QuarantineService:
        """The service of a manifest's ``quarantine.dir`` and its DLQ."""
        plan = _plan(manifest)
        if plan.quarantine_export is None:
            raise UsageError(
                f"the manifest of pipeline {plan.name} has no quarantine.dir",
                fixes=("use dpone.ops.replay_execute for a manifest without the legacy key",),
            )
        return cls(plan.quarantine_export, dlq_dir=plan.sink.dlq.directory)

    def runs(self) -> list[str]:
        """The run ids with an export folder, sorted (links and other names are skipped)."""
        try:
            entries = list(os.scandir(self.directory))
        except FileNotFoundError:
            return []
        return sorted(
            e.name
            for e in entries
            if e.is_dir(follow_symlinks=False)
            and is_identifier(e.name)
            and e.name not in (RUNS_DIR, ACKS_DIR)
        )

    def read(self, run_id: str) -> list[ExportedRow]:
        """Every exported row of ``run_id``, each file verified, in source order."""
        folder = self._run_folder(run_id)
        fd = durable.open_below(self.directory, folder, create=False)
        if fd is None:
            return []
        try:
            with os.scandir(fd) as entries:
                names = sorted(e.name for e in entries if not durable.is_temp_name(e.name))
        finally:
            os.close(fd)
        rows: list[ExportedRow] = []
        for name in names:
            rows.extend(self._read_file(run_id, name))
        return sorted(rows, key=lambda r: _ref_order(r.record_ref))

    def replay(
        self,
        run_id: str,
        *,
        manifest: PathLike | Plan,
        env: Mapping[str, str] | None = None,
        check: bool = True,
    ) -> LegacyReplay:
        """Replay ``run_id`` from the canonical DLQ with the first-party executor into
        ``manifest``'s sink; ``check``: raise :class:`LegacyReplayFailed` unless every row of
        the run is applied (now or by an earlier replay)."""
        from dpone.ops import replay_execute

        self._run_folder(run_id)  # an unsafe id is a usage error before anything is read
        try:
            result = replay_execute(manifest, run_id, dlq_dir=self.dlq_dir, env=env)
        except DponeError as err:
            if check:
                raise
            return LegacyReplay(run_id, None, err.errors[0])
        replay = LegacyReplay(run_id, result)
        if check and not replay.succeeded:
            counts = result.counts()
            raise LegacyReplayFailed(
                f"the replay of run {run_id} applied {counts['applied']} row(s) and left "
                f"{result.pending} pending ({counts['still_rejected']} still rejected, "
                f"{counts['not_replayable']} not replayable)",
                replay=replay,
                fixes=(
                    "fix the contract (or the target) so that the pending rows pass, then "
                    "replay again: applied rows are never applied twice",
                ),
            )
        return replay

    # --- reading --------------------------------------------------------------------------------

    def _run_folder(self, run_id: str) -> Path:
        if not is_identifier(run_id) or run_id in (RUNS_DIR, ACKS_DIR):
            raise UsageError(
                "the run id is not a run of the quarantine folder",
                fixes=("pass a run id as QuarantineService.runs() lists it",),
            )
        return self.directory / run_id

    def _read_file(self, run_id: str, name: str) -> list[ExportedRow]:
        where = f"{run_id}/{name}"
        if not _FILE_NAME.fullmatch(name):
            raise _invalid(where, "is not a file of the export (<sha256>.jsonl)")
        try:
            data = durable.read_below(
                self.directory, self.directory / run_id / name, MAX_FILE_BYTES
            )
        except PathIsSymlink:
            raise _invalid(where, "is a link or not a plain file") from None
        if data is None:
            return []
        if len(data) > MAX_FILE_BYTES:
            raise _invalid(where, f"is larger than {MAX_FILE_BYTES} bytes")
        if hashlib.sha256(data).hexdigest() + SUFFIX != name:
            raise _invalid(where, "does not match the checksum its name gives")
        return [_row(where, n, line) for n, line in enumerate(data.splitlines(), start=1)]


def _row(where: str, number: int, line: bytes) -> ExportedRow:
    try:
        doc = orjson.loads(line)
    except orjson.JSONDecodeError:
        raise _invalid(f"{where}:{number}", "is not JSON") from None
    if not (
        isinstance(doc, dict)
        and set(doc) == _LINE_KEYS
        and isinstance(doc["record_ref"], str)
        and isinstance(doc["reason"], str)
        and (doc["column"] is None or isinstance(doc["column"], str))
        and isinstance(doc["row"], dict)
    ):
        raise _invalid(f"{where}:{number}", "does not have the export's shape")
    return ExportedRow(doc["record_ref"], doc["reason"], doc["column"], doc["row"])


def _invalid(where: str, what: str) -> QuarantineExportInvalid:
    return QuarantineExportInvalid(
        f"the quarantine export file {where} {what}",
        path=where,
        fixes=("restore the folder from a trusted copy; the canonical DLQ holds every row too",),
    )


def _ref_order(ref: str) -> tuple[str, int, str]:
    """Rows of one file by row number (``row=10`` after ``row=9``)."""
    match = _TRAILING_NUMBER.match(ref)
    return (match.group(1), int(match.group(2)), ref) if match else (ref, 0, ref)


def _plan(manifest: PathLike | Plan) -> Plan:
    from dpone.manifest.compiler import compile_manifest
    from dpone.manifest.plan import Plan

    return manifest if isinstance(manifest, Plan) else compile_manifest(os.fspath(manifest))


__all__ = [
    "ExportedRow",
    "LegacyReplay",
    "LegacyReplayFailed",
    "QuarantineExportInvalid",
    "QuarantineService",
]
