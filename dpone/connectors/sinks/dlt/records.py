"""The dlt sink's package records: ``packages/<load_id>.json`` (``dpone.dlt-package.v1``: dpone's
load id <-> dlt's load id, rows, cursor), published create-only and durably before dlt loads the
package, moved to ``dropped/`` when the load is abandoned. Every record read back is checked
against its schema, its checksum, its file name and its pipeline."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from dpone.canonical import with_checksum
from dpone.connectors.base import LoadMarker
from dpone.connectors.errors import SinkMarkerInvalid
from dpone.connectors.sinks._common import os_error
from dpone.durable import create_only, fsync_dir
from dpone.published import checked_document

RECORD_SCHEMA = "dpone.dlt-package.v1"
#: dlt load ids are Unix timestamps as text; checked before one reaches a SQL literal.
DLT_LOAD_ID = re.compile(r"[0-9]{1,12}(\.[0-9]{1,9})?")
MAX_RECORD_BYTES = 64 * 1024
FIX_RECORD = (
    "a file under the work dir's dlt/<pipeline>/packages/ or dropped/ is not one dpone wrote; "
    "compare it with a backup or move it out of the work dir, then rerun",
)


class PackageRecords:
    """The records under ``root`` (``<work_dir>/dlt/<pipeline>``) of one dpone pipeline."""

    def __init__(self, root: Path, pipeline_name: str, dlt_pipeline_name: str) -> None:
        self.root = root
        self.pipeline_name = pipeline_name
        self.dlt_pipeline_name = dlt_pipeline_name

    def path(self, folder: str, load_id: str) -> Path:
        return self.root / folder / f"{load_id}.json"

    def all(self, folder: str) -> list[dict[str, Any]]:
        where = self.root / folder
        if not where.is_dir():
            return []
        docs = [self.read(path) for path in sorted(where.glob("*.json"))]
        return sorted(docs, key=lambda d: float(d["dlt_load_id"]))

    def get(self, load_id: str) -> dict[str, Any] | None:
        path = self.path("packages", load_id)
        return self.read(path) if os.path.lexists(path) else None

    def read(self, path: Path) -> dict[str, Any]:
        def invalid(what: str) -> SinkMarkerInvalid:
            return SinkMarkerInvalid(f"dlt sink: a package record {what}", fixes=FIX_RECORD)

        if path.is_symlink() or not path.is_file():
            raise invalid("is not a regular file")
        try:
            with path.open("rb") as handle:
                raw = handle.read(MAX_RECORD_BYTES + 1)
        except OSError as exc:
            raise os_error(exc, "dlt sink: reading a package record") from None
        if len(raw) > MAX_RECORD_BYTES:
            raise invalid("is larger than any record dpone writes")
        doc = checked_document(raw, RECORD_SCHEMA, invalid)
        if doc["load_id"] != path.stem or not DLT_LOAD_ID.fullmatch(doc["dlt_load_id"]):
            raise invalid("names another load than its file name")
        if (doc["pipeline"], doc["dlt_pipeline"]) != (self.pipeline_name, self.dlt_pipeline_name):
            raise invalid("belongs to another pipeline")
        return doc

    def write(self, doc: dict[str, Any]) -> None:
        path = self.path("packages", doc["load_id"])
        try:
            create_only(path, orjson.dumps(with_checksum(doc), option=orjson.OPT_INDENT_2))
        except OSError as exc:
            raise os_error(exc, "dlt sink: recording the load package") from None

    def move_to_dropped(self, load_id: str) -> None:
        """Durably mark a recorded load as abandoned (what ``cleanup_abandoned`` finishes)."""
        source = self.path("packages", load_id)
        target = self.path("dropped", load_id)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(source, target)
        fsync_dir(target.parent)
        fsync_dir(source.parent)


def marker(doc: Mapping[str, Any], committed_at: str) -> LoadMarker:
    return LoadMarker(
        load_id=doc["load_id"],
        pipeline=doc["pipeline"],
        run_id=doc["run_id"],
        rows=int(doc["rows"]),
        cursor_to=doc["cursor_to"],
        committed_at=committed_at,
        target=doc["target"],
        mode=doc["mode"],
    )
