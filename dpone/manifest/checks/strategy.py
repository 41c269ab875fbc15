"""The load strategy: a merge has its keys, the merge settings fit the merge strategy, an append
is not paired with coerce (which re-reads rows, and append would load them twice), the key's
columns are declared, ``deleted_column`` is a boolean column of the contract, and the sink can
apply the strategy (the filesystem sink has no history and no deletes)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from dpone.errors import ErrorDetail
from dpone.manifest.context import SINK, CompileContext, Document, contract_columns

STRATEGY = f"{SINK}/strategy"
#: The keys that only a merge reads, and the merge strategies each applies to.
_MERGE_ONLY: dict[str, tuple[str, ...]] = {
    "merge_strategy": ("upsert", "delete-insert", "scd2"),
    "merge_key": ("delete-insert",),
    "deleted_column": ("upsert", "delete-insert", "scd2"),
    "boundary_timestamp": ("scd2",),
}


def check_strategy(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    strategy = doc["sink"]["strategy"]
    errors = _keys(strategy, ctx)
    if strategy["mode"] == "append" and _enforcement(doc) == "coerce":
        # coerce holds the state when it rejects rows, so the next run reads the same rows
        # again: every source dpone reads gives them again, and append would load each row
        # that loaded this time a second time (SPEC §3).
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_COERCE_APPEND",
                "enforcement coerce re-reads every row after a run that rejected one (the "
                "state is held), so strategy mode append would load rows twice",
                f"{STRATEGY}/mode",
                fixes=(
                    "use `mode: merge` with a `unique_key`: a re-read row replaces itself",
                    "or use enforcement: quarantine: the state advances and the rejected rows "
                    "wait in the DLQ",
                ),
            )
        )
    errors += _merge_settings(strategy, ctx)
    errors += _declared(doc, ctx)
    errors += _sink_can(doc, ctx)
    return errors


def _keys(strategy: dict[str, Any], ctx: CompileContext) -> list[ErrorDetail]:
    """A merge's keys: unique_key (but for delete-insert), merge_key for delete-insert."""
    errors = []
    how = strategy.get("merge_strategy")
    if strategy["mode"] == "merge" and not strategy.get("unique_key") and how != "delete-insert":
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_MERGE_WITHOUT_KEY",
                f"strategy mode merge ({how or 'upsert'}) needs a unique_key to match rows on",
                f"{STRATEGY}/mode",
                fixes=("add `unique_key: [id]` (the columns that identify a row)",),
            )
        )
    if how == "delete-insert" and not strategy.get("merge_key"):
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_MERGE_STRATEGY",
                "merge_strategy delete-insert needs a merge_key: the columns whose values the "
                "load replaces",
                f"{STRATEGY}/merge_strategy",
                fixes=("add `merge_key: [day]` under sink.strategy (it may equal unique_key)",),
            )
        )
    return errors


def _merge_settings(strategy: dict[str, Any], ctx: CompileContext) -> list[ErrorDetail]:
    """Each merge setting only where it means something, boundary_timestamp a UTC time."""
    errors = []
    how = strategy.get("merge_strategy")
    for key, strategies in _MERGE_ONLY.items():
        if key not in strategy:
            continue
        if strategy["mode"] != "merge":
            needs, fix = "strategy mode merge", "`mode: merge`"
        elif how not in strategies:
            needs, fix = (
                f"merge_strategy {' or '.join(strategies)}",
                f"`merge_strategy: {strategies[0]}`",
            )
        else:
            continue
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_MERGE_STRATEGY",
                f"{key} applies only to {needs}",
                f"{STRATEGY}/{key}",
                at_key=True,
                fixes=(f"remove {key}, or set {fix}",),
            )
        )
    boundary = strategy.get("boundary_timestamp")
    if isinstance(boundary, str) and parse_boundary(boundary) is None:
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_MERGE_STRATEGY",
                "boundary_timestamp must be an ISO-8601 time with a UTC offset",
                f"{STRATEGY}/boundary_timestamp",
                fixes=("write it like `2024-01-31T00:00:00Z` or `2024-01-31T02:00:00+02:00`",),
            )
        )
    return errors


def parse_boundary(text: str) -> datetime | None:
    """``boundary_timestamp`` as an aware datetime, or None when it is not one."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def _declared(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    """Key columns among the contract's (when it declares any); the deleted column always."""
    strategy = doc["sink"]["strategy"]
    columns = contract_columns(doc)
    errors = []
    if columns:
        for key in ("unique_key", "merge_key"):
            for i, column in enumerate(strategy.get(key, ())):
                if column not in columns:
                    errors.append(
                        ctx.error(
                            "DPONE_MANIFEST_UNIQUE_KEY_COLUMN",
                            f"{key} column '{column}' is not declared in the contract",
                            f"{STRATEGY}/{key}/{i}",
                            fixes=(f"declare '{column}' under schema_contract.columns",),
                        )
                    )
    deleted = strategy.get("deleted_column")
    if deleted is None:
        return errors
    declared = columns.get(deleted) if isinstance(columns, dict) else None
    if not isinstance(declared, dict) or declared.get("type") != "boolean":
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_MERGE_STRATEGY",
                f"deleted_column '{deleted}' must be a column the contract declares with "
                "type boolean",
                f"{STRATEGY}/deleted_column",
                fixes=(f"declare `{deleted}: {{type: boolean}}` under schema_contract.columns",),
            )
        )
    elif deleted in strategy.get("unique_key", ()) or deleted in strategy.get("merge_key", ()):
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_MERGE_STRATEGY",
                f"deleted_column '{deleted}' cannot be a key column",
                f"{STRATEGY}/deleted_column",
                fixes=("name the boolean column that marks a deleted row, not a key",),
            )
        )
    return errors


def _sink_can(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    """The filesystem sink merges by rewriting files (upsert); it keeps no history and
    applies no deletes."""
    sink, strategy = doc["sink"], doc["sink"]["strategy"]
    if sink.get("type") != "filesystem":
        return []
    errors = []
    how = strategy.get("merge_strategy")
    if how in ("delete-insert", "scd2"):
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_SINK_OPTION",
                f"the filesystem sink cannot apply merge_strategy {how}: it merges by "
                "rewriting files on unique_key (upsert) only",
                f"{STRATEGY}/merge_strategy",
                fixes=(
                    "use sink type duckdb or postgres, or dlt with a table format",
                    "or use `merge_strategy: upsert`",
                ),
            )
        )
    if "deleted_column" in strategy:
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_SINK_OPTION",
                "the filesystem sink does not apply deleted_column",
                f"{STRATEGY}/deleted_column",
                at_key=True,
                fixes=("use sink type duckdb or postgres, or remove deleted_column",),
            )
        )
    return errors


def _enforcement(doc: Document) -> str:
    return str(doc["sink"]["options"]["schema_contract"]["enforcement"])
