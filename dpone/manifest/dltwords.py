"""dlt's words for what dpone's manifest says elsewhere: a key a dlt user writes out of habit
(``write_disposition`` under ``sink``) is an unknown key whose fix names dpone's key.
docs/coming-from-dlt.md is the whole mapping."""

from __future__ import annotations

#: dlt's word -> where dpone says it, as a fix.
DLT_WORDS: dict[str, str] = {
    "write_disposition": (
        "dlt's write_disposition is dpone's sink.strategy.mode (append, replace, merge) with "
        "sink.strategy.merge_strategy (upsert, delete-insert, scd2) for a merge"
    ),
    "disposition": "dlt's disposition is dpone's sink.strategy.mode",
    "primary_key": "dlt's primary_key is dpone's sink.strategy.unique_key",
    "merge_key": (
        "dlt's merge_key is dpone's sink.strategy.merge_key (with merge_strategy: delete-insert)"
    ),
    "strategy": "dlt's merge strategy is dpone's sink.strategy.merge_strategy",
    "hard_delete": "dlt's hard_delete column hint is dpone's sink.strategy.deleted_column",
    "validity_column_names": (
        "dpone's scd2 keeps its versions in _dpone_valid_from and _dpone_valid_to; it has no "
        "setting for their names"
    ),
    "schema_contract": (
        "dlt's schema_contract is dpone's sink.options.schema_contract (enforcement, "
        "evolution, columns)"
    ),
    "columns": "dlt's columns hints are dpone's sink.options.schema_contract.columns",
    "table_name": "dlt's table_name is dpone's sink.table",
    "dataset_name": "dlt's dataset_name is dpone's sink.dataset",
    "nested_hints": "dpone does not unnest nested data into child tables yet",
    "max_table_nesting": "dpone does not unnest nested data into child tables yet",
}

#: Where a dlt word is looked for: the sink, its strategy, its options.
_PLACES = ("/sink", "/sink/strategy", "/sink/options")


def dlt_word_fix(pointer: str, key: str) -> str | None:
    """The fix naming dpone's key for the dlt word ``key`` written under ``pointer``."""
    if pointer not in _PLACES:
        return None
    return DLT_WORDS.get(key)
