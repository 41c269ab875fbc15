"""The legacy raw JSONL export of a deprecated ``quarantine.dir`` manifest (seed 004's
migration window): every row the run dead-letters is also written, with its values, to
``<dir>/<run_id>/<sha256>.jsonl``.

One file per chunk that rejected rows, named by the SHA-256 of its own bytes: the name proves
the content (:mod:`dpone.ops.quarantine` checks it when it reads one back), and a chunk
written again (a resumed or retried partition) gives the same name and is a no-op, so the
file is create-only without a counter to keep. Each file is written whole to a temporary
name, fsynced and linked into place, its folder fsynced (:func:`dpone.durable.create_only`),
on the run's main thread before that chunk's DLQ records are handed to the DLQ pipe: the
export is durable before the sink commits, as the DLQ is.

Each line: ``{"record_ref", "reason", "column", "row"}``; ``record_ref`` joins it to the
chunk's ``dpone.dlq.v1`` record. The row values make the folder sensitive: the compiler
refuses the key in production (``DPONE_MANIFEST_LEGACY_EXPORT_IN_PRODUCTION``). A run that
fails after a chunk was exported leaves that file (its DLQ run is aborted, its rows are
read again by the next run); nothing else ever modifies or removes one.
"""

from __future__ import annotations

import errno
import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from dpone import durable
from dpone.dlq.layout import ACKS_DIR, RUNS_DIR
from dpone.dlq.rejects import to_json_safe
from dpone.errors import ConfigError, TransientError

SUFFIX = ".jsonl"


class LegacyExportFailed(TransientError):
    """The raw export could not be written (a full disk, a read-only folder): the run fails
    before its sink commit, as a DLQ write failure does."""

    code = "DPONE_QUARANTINE_EXPORT_FAILED"
    stage = "dlq"


class RawExport:
    """The raw export of one run's rejected rows under the legacy ``quarantine.dir``."""

    def __init__(self, folder: Path, run_id: str) -> None:
        if run_id in (RUNS_DIR, ACKS_DIR):
            # The export folder is the DLQ root unless the manifest names another one.
            raise ConfigError(
                f"the run id '{run_id}' is the name of a DLQ folder; quarantine.dir exports "
                "each run into a folder named by its run id",
                code="DPONE_QUARANTINE_RUN_ID_RESERVED",
                fixes=("pass another --run-id (or none: dpone makes one)",),
            )
        self._anchor = folder
        self._folder = folder / run_id

    def write(
        self,
        refs: Sequence[str],
        reasons: Sequence[str],
        columns: Sequence[str | None],
        rows: Sequence[Mapping[str, Any]],
    ) -> Path | None:
        """Export one chunk's rejected rows durably; the file's path (None: no rows)."""
        if not refs:
            return None
        data = b"".join(
            orjson.dumps(
                {"record_ref": ref, "reason": reason, "column": column, "row": to_json_safe(row)},
                option=orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE,
            )
            for ref, reason, column, row in zip(refs, reasons, columns, rows, strict=True)
        )
        path = self._folder / (hashlib.sha256(data).hexdigest() + SUFFIX)
        try:
            durable.create_only(path, data, anchor=self._anchor)
        except FileExistsError:
            pass  # the same bytes, exported before: the name is their checksum
        except OSError as exc:
            raise LegacyExportFailed(
                f"the legacy quarantine export could not be written in {self._anchor.name}/: "
                f"{exc.strerror or errno.errorcode.get(exc.errno or 0, 'OS error')}",
                fixes=("free space or fix the permissions of the quarantine.dir folder and rerun",),
            ) from None
        return path


__all__ = ["SUFFIX", "LegacyExportFailed", "RawExport"]
