"""The merge settings of SPEC §13 in the compiler: where each applies, what each needs, what
a sink cannot apply, and dlt's words answered with dpone's keys."""

from __future__ import annotations

import pytest

from dpone.errors import DponeError
from dpone.manifest.compiler import compile_text

from .helpers import BASE

COLUMNS = "        gone: {type: boolean}\n        day: {type: integer}\n"


def manifest(strategy: str, sink: str = "type: duckdb", extra: str = "") -> str:
    text = BASE.replace("  strategy: {mode: append}", f"  strategy: {strategy}{extra}")
    text = text.replace("  type: duckdb", f"  {sink}")
    return text + COLUMNS


def errors(text: str) -> list[tuple[str, str | None]]:
    with pytest.raises(DponeError) as caught:
        compile_text(text)
    return [(e.code, e.pointer) for e in caught.value.errors]


def test_each_strategy_compiles_into_the_plan() -> None:
    plan = compile_text(manifest("{mode: merge, unique_key: [id]}"))
    assert plan.sink.strategy.merge_strategy == "upsert"
    assert plan.sink.load_columns == ()
    scd2 = "{mode: merge, unique_key: [id], merge_strategy: scd2, deleted_column: gone, "
    scd2 += "boundary_timestamp: '2024-01-31T00:00:00Z'}"
    text = manifest(scd2).replace(
        "    schema_contract:", "    load_columns: [load_id]\n    schema_contract:"
    )
    plan = compile_text(text)
    strategy = plan.sink.strategy
    assert (strategy.merge_strategy, strategy.deleted_column) == ("scd2", "gone")
    boundary = strategy.boundary()
    assert boundary is not None
    assert boundary.isoformat() == "2024-01-31T00:00:00+00:00"
    assert plan.sink.load_columns == ("load_id",)
    plan = compile_text(manifest("{mode: merge, merge_strategy: delete-insert, merge_key: [day]}"))
    assert (plan.sink.strategy.merge_key, plan.sink.strategy.unique_key) == (("day",), ())
    assert compile_text(manifest("{mode: append}")).sink.strategy.merge_strategy is None


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        (
            "{mode: append, merge_strategy: upsert}",
            ("DPONE_MANIFEST_MERGE_STRATEGY", "merge_strategy"),
        ),
        ("{mode: merge, merge_strategy: scd2}", ("DPONE_MANIFEST_MERGE_WITHOUT_KEY", "mode")),
        (
            "{mode: merge, merge_strategy: delete-insert}",
            ("DPONE_MANIFEST_MERGE_STRATEGY", "merge_strategy"),
        ),
        (
            "{mode: merge, unique_key: [id], merge_key: [day]}",
            ("DPONE_MANIFEST_MERGE_STRATEGY", "merge_key"),
        ),
        (
            "{mode: merge, unique_key: [id], deleted_column: amount}",
            ("DPONE_MANIFEST_MERGE_STRATEGY", "deleted_column"),
        ),
        (
            "{mode: merge, unique_key: [id], deleted_column: nope}",
            ("DPONE_MANIFEST_MERGE_STRATEGY", "deleted_column"),
        ),
        (
            "{mode: merge, unique_key: [gone], deleted_column: gone}",
            ("DPONE_MANIFEST_MERGE_STRATEGY", "deleted_column"),
        ),
        (
            "{mode: merge, unique_key: [id], boundary_timestamp: '2024-01-01T00:00:00Z'}",
            ("DPONE_MANIFEST_MERGE_STRATEGY", "boundary_timestamp"),
        ),
        (
            "{mode: merge, unique_key: [id], merge_strategy: scd2, "
            "boundary_timestamp: '2024-01-01'}",
            ("DPONE_MANIFEST_SCHEMA", "boundary_timestamp"),  # format: date-time
        ),
        (
            "{mode: merge, merge_strategy: delete-insert, merge_key: [nope]}",
            ("DPONE_MANIFEST_UNIQUE_KEY_COLUMN", "merge_key/0"),
        ),
    ],
)
def test_a_merge_setting_that_does_not_fit_is_refused(
    strategy: str, expected: tuple[str, str]
) -> None:
    code, where = expected
    assert (code, f"/sink/strategy/{where}") in errors(manifest(strategy))


@pytest.mark.parametrize(
    "strategy",
    [
        "{mode: merge, unique_key: [id], merge_strategy: scd2}",
        "{mode: merge, merge_strategy: delete-insert, merge_key: [day]}",
        "{mode: merge, unique_key: [id], deleted_column: gone}",
    ],
)
def test_the_filesystem_sink_refuses_what_it_cannot_apply(strategy: str) -> None:
    found = errors(manifest(strategy, sink="type: filesystem\n  path: lake"))
    assert [code for code, _ in found] == ["DPONE_MANIFEST_SINK_OPTION"]


def test_the_dlt_sink_refuses_a_deleted_column_under_scd2() -> None:
    strategy = "{mode: merge, unique_key: [id], merge_strategy: scd2, deleted_column: gone}"
    found = errors(manifest(strategy, sink="type: dlt\n  destination: duckdb"))
    assert found == [("DPONE_MANIFEST_SINK_OPTION", "/sink/strategy/deleted_column")]


@pytest.mark.parametrize(
    ("where", "word", "names"),
    [
        ("sink", "write_disposition: merge", "sink.strategy.mode"),
        ("sink", "primary_key: [id]", "sink.strategy.unique_key"),
        ("sink", "merge_key: [day]", "sink.strategy.merge_key"),
        ("strategy", "primary_key: [id]", "sink.strategy.unique_key"),
        ("strategy", "write_disposition: merge", "sink.strategy.mode"),
        ("options", "schema_contract_mode: x", None),
    ],
)
def test_a_dlt_word_names_the_dpone_key(where: str, word: str, names: str | None) -> None:
    if where == "sink":
        text = manifest("{mode: append}").replace(
            "  table: orders\n", f"  table: orders\n  {word}\n"
        )
    elif where == "strategy":
        text = manifest("{mode: append, " + word + "}")
    else:
        text = manifest("{mode: append}").replace(
            "    schema_contract:", f"    {word}\n    schema_contract:"
        )
    with pytest.raises(DponeError) as caught:
        compile_text(text)
    [error] = caught.value.errors
    assert error.code == "DPONE_MANIFEST_UNKNOWN_KEY"
    if names is None:
        assert not any("dlt's" in fix for fix in error.fixes)
    else:
        assert names in error.fixes[0]


def test_the_dlt_sinks_earlier_merge_key_is_read_as_delete_insert_with_a_warning() -> None:
    text = manifest("{mode: merge, unique_key: [id]}", sink="type: dlt\n  destination: duckdb")
    text = text.replace("  table: orders\n", "  table: orders\n  merge_key: [day]\n")
    plan = compile_text(text)
    strategy = plan.sink.strategy
    assert (strategy.merge_strategy, strategy.merge_key) == ("delete-insert", ("day",))
    [warning] = plan.warnings
    assert (warning.code, warning.pointer) == ("DPONE_MANIFEST_DEPRECATED_KEY", "/sink/merge_key")
    assert "merge_strategy: delete-insert" in warning.fixes[0]
