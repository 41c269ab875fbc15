"""The load strategy: a merge has its key, an append is not paired with coerce (which re-reads
rows, and append would load them twice), the key's columns are declared."""

from __future__ import annotations

from dpone.errors import ErrorDetail
from dpone.manifest.context import SINK, CompileContext, Document, contract_columns


def check_strategy(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    strategy = doc["sink"]["strategy"]
    errors = []
    unique_key = strategy.get("unique_key", [])
    if strategy["mode"] == "merge" and not unique_key:
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_MERGE_WITHOUT_KEY",
                "strategy mode merge needs a unique_key to match rows on",
                f"{SINK}/strategy/mode",
                fixes=("add `unique_key: [id]` (the columns that identify a row)",),
            )
        )
    if strategy["mode"] == "append" and _enforcement(doc) == "coerce":
        # coerce holds the state when it rejects rows, so the next run reads the same rows
        # again: every source dpone reads gives them again, and append would load each row
        # that loaded this time a second time (SPEC §3).
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_COERCE_APPEND",
                "enforcement coerce re-reads every row after a run that rejected one (the "
                "state is held), so strategy mode append would load rows twice",
                f"{SINK}/strategy/mode",
                fixes=(
                    "use `mode: merge` with a `unique_key`: a re-read row replaces itself",
                    "or use enforcement: quarantine: the state advances and the rejected rows "
                    "wait in the DLQ",
                ),
            )
        )
    columns = contract_columns(doc)
    if columns:
        for i, column in enumerate(unique_key):
            if column not in columns:
                errors.append(
                    ctx.error(
                        "DPONE_MANIFEST_UNIQUE_KEY_COLUMN",
                        f"unique_key column '{column}' is not declared in the contract",
                        f"{SINK}/strategy/unique_key/{i}",
                        fixes=(f"declare '{column}' under schema_contract.columns",),
                    )
                )
    return errors


def _enforcement(doc: Document) -> str:
    return str(doc["sink"]["options"]["schema_contract"]["enforcement"])
