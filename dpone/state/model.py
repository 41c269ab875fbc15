"""``dpone.state.v1``: what a pipeline has durably committed (SPEC §6). Pure data."""

from __future__ import annotations

from dataclasses import field, replace
from typing import Any

from dpone.records import frozen

STATE_SCHEMA_ID = "dpone.state.v1"
CursorValue = str | int | None


@frozen
class Cursor:
    """The incremental cursor: the highest value actually committed to the sink.

    ``value`` is the canonical text of the typed value (ISO-8601 UTC for timestamps, the
    decimal's text, the integer itself), so comparing and resuming never depend on floats.
    """

    column: str
    type: str
    value: CursorValue

    def to_json(self) -> dict[str, Any]:
        return {"column": self.column, "type": self.type, "value": self.value}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Cursor:
        return cls(column=doc["column"], type=doc["type"], value=doc["value"])


@frozen
class Boundary:
    """What the committed runs read at the cursor's boundary (``runtime/window.py``).

    ``start`` is the lowest cursor the digests cover: every row a committed run loaded or
    quarantined with a cursor in ``[start, cursor.value]`` has its digest in ``digests``
    (cursor text -> base64 of its rows' 16-byte digests), unless ``complete`` is false (more
    rows than the cap, a merge pipeline's fallback). ``files`` are the file versions the last
    committed run read (file -> SHA-256): their rows older than the window are old, not late.
    """

    start: CursorValue
    digests: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    complete: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "from": self.start,
            "digests": dict(sorted(self.digests.items())),
            "files": dict(sorted(self.files.items())),
            "complete": self.complete,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Boundary:
        return cls(
            start=doc["from"],
            digests=dict(doc["digests"]),
            files=dict(doc["files"]),
            complete=doc["complete"],
        )


@frozen
class PipelineState:
    """A pipeline's committed state (``dpone.state.v1``): its revision, cursor and last run."""

    pipeline: str
    revision: int = 0
    cursor: Cursor | None = None
    last_run_id: str | None = None
    last_load_id: str | None = None
    manifest_fingerprint: str | None = None
    updated_at: str | None = None
    unplaced: dict[str, list[int]] = field(default_factory=dict)
    """Rows whose cursor could not be parsed, already committed: ``file@sha256`` -> rows."""
    boundary: Boundary | None = None
    """The committed rows at the cursor's boundary; None in a state of an earlier dpone."""

    def advanced(
        self,
        *,
        run_id: str,
        load_id: str,
        cursor: Cursor | None,
        manifest_fingerprint: str,
        updated_at: str,
        unplaced: dict[str, list[int]] | None = None,
        boundary: Boundary | None = None,
    ) -> PipelineState:
        """The next revision; a cursor (unplaced rows, boundary) of None keeps the committed
        one."""
        return replace(
            self,
            revision=self.revision + 1,
            cursor=cursor if cursor is not None else self.cursor,
            unplaced=unplaced if unplaced is not None else self.unplaced,
            boundary=boundary if boundary is not None else self.boundary,
            last_run_id=run_id,
            last_load_id=load_id,
            manifest_fingerprint=manifest_fingerprint,
            updated_at=updated_at,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": STATE_SCHEMA_ID,
            "pipeline": self.pipeline,
            "revision": self.revision,
            "cursor": self.cursor.to_json() if self.cursor else None,
            "last_run_id": self.last_run_id,
            "last_load_id": self.last_load_id,
            "manifest_fingerprint": self.manifest_fingerprint,
            "updated_at": self.updated_at,
            "unplaced": self.unplaced,
            **({"boundary": self.boundary.to_json()} if self.boundary is not None else {}),
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> PipelineState:
        cursor = doc.get("cursor")
        return cls(
            pipeline=doc["pipeline"],
            revision=doc["revision"],
            cursor=Cursor.from_json(cursor) if cursor else None,
            last_run_id=doc.get("last_run_id"),
            last_load_id=doc.get("last_load_id"),
            manifest_fingerprint=doc.get("manifest_fingerprint"),
            updated_at=doc.get("updated_at"),
            unplaced={k: list(v) for k, v in doc.get("unplaced", {}).items()},
            boundary=Boundary.from_json(doc["boundary"]) if doc.get("boundary") else None,
        )
