"""``dpone.state.v1``: what a pipeline has durably committed (SPEC §6). Pure data."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

STATE_SCHEMA_ID = "dpone.state.v1"
CursorValue = str | int | None


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class PipelineState:
    pipeline: str
    revision: int = 0
    cursor: Cursor | None = None
    last_run_id: str | None = None
    last_load_id: str | None = None
    manifest_fingerprint: str | None = None
    updated_at: str | None = None
    unplaced: dict[str, list[int]] = field(default_factory=dict)
    """Rows whose cursor could not be parsed, already committed: ``file@sha256`` -> rows."""

    def advanced(
        self,
        *,
        run_id: str,
        load_id: str,
        cursor: Cursor | None,
        manifest_fingerprint: str,
        updated_at: str,
        unplaced: dict[str, list[int]] | None = None,
    ) -> PipelineState:
        """The next revision; a cursor (or unplaced rows) of None keeps the committed one."""
        return replace(
            self,
            revision=self.revision + 1,
            cursor=cursor if cursor is not None else self.cursor,
            unplaced=unplaced if unplaced is not None else self.unplaced,
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
        )
