"""The compiler: schema errors with positions, static checks, defaults, the plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpone.errors import ManifestError, SecretError
from dpone.manifest.compiler import compile_manifest, compile_text
from dpone.manifest.specs import DuckdbSinkSpec, FileSourceSpec
from dpone.published import schema_errors
from tests.manifest.helpers import BASE
from tests.support.paths import example_manifests


def errors_of(text: str) -> list[tuple[str, int | None, int | None]]:
    with pytest.raises(ManifestError) as info:
        compile_text(text, path="/m/manifest.yaml")
    return [(e.code, e.line, e.column) for e in info.value.errors]


@pytest.mark.parametrize("path", example_manifests(), ids=lambda p: p.parent.name)
def test_examples_compile_and_plan_json_is_schema_valid(path: Path) -> None:
    plan = compile_manifest(path)
    assert plan.manifest_dir == path.parent.resolve()
    assert schema_errors(plan.to_json(), "dpone.plan.v1") == []
    # The normalized document is itself a valid manifest.
    assert schema_errors(plan.document, "dpone.manifest.v1") == []


def test_defaults_are_explicit_in_the_plan() -> None:
    plan = compile_text(BASE, path="/m/manifest.yaml")
    assert plan.environment == "dev"
    assert plan.runtime.chunk_size == 10_000
    assert plan.runtime.work_dir == Path("/m/.dpone")
    assert isinstance(plan.sink.spec, DuckdbSinkSpec)
    assert plan.sink.spec.database == Path("/m/.dpone/orders_daily.duckdb")
    assert plan.sink.spec.display == ".dpone/orders_daily.duckdb"
    assert plan.sink.dlq.directory == "/m/.dpone/dlq"
    assert plan.sink.dlq.retention_days == 30
    assert plan.sink.dlq.pii_policy == "reference_only"
    assert plan.sink.evidence_dir == Path("/m/.dpone/evidence")
    assert plan.sink.contract.evolution.columns == "evolve"
    assert plan.sink.contract.type_inference.sample_rows == 10_000
    amount = plan.sink.contract.column("amount")
    assert amount is not None
    assert (amount.precision, amount.scale, amount.nullable) == (12, 2, True)
    assert plan.state_type == "file"
    assert isinstance(plan.source.spec, FileSourceSpec)
    assert plan.source.spec.csv.delimiter == ","


def test_one_word_evolution_sets_all_three() -> None:
    text = BASE.replace(
        "enforcement: quarantine", "enforcement: quarantine\n      evolution: freeze"
    )
    evolution = compile_text(text).sink.contract.evolution
    assert (evolution.tables, evolution.columns, evolution.data_type) == ("freeze",) * 3


def test_assertion_policy_precedence(tmp_path: Path) -> None:
    (tmp_path / "quality.py").write_text("def ok(row):\n    return True\nstrict = ok\n")
    text = (
        BASE
        + """\
quality:
  assertions:
    on_failure: warn
    min_rows_per_load: 1
    max_rows_per_load: {value: 100, on_failure: fail}
    unique_columns: {value: [id], on_failure: quarantine}
    required_columns: [id]
    custom:
      - {predicate: "quality:ok"}
      - {predicate: "quality:strict", on_failure: fail, name: strict_rule}
"""
    )
    plan = compile_text(text, path=tmp_path / "manifest.yaml")
    got = [(a.name, a.on_failure) for a in plan.quality.assertions]
    assert got == [
        ("min_rows_per_load", "warn"),
        ("max_rows_per_load", "fail"),
        ("unique_columns", "quarantine"),
        ("required_columns", "warn"),
        ("custom:quality:ok", "warn"),
        ("strict_rule", "fail"),
    ]
    assert plan.quality.assertions[2].params == {"value": ["id"]}
    default = compile_text(BASE + "quality:\n  assertions:\n    min_rows_per_load: 1\n")
    assert default.quality.assertions[0].on_failure == "fail"


def test_schema_errors_are_all_reported_with_positions() -> None:
    text = BASE.replace("name: orders_daily", "name: Orders").replace(
        "  table: orders", "  table: orders\n  tabel: typo"
    )
    text = text.replace("chunk", "chunk") + "runtime: {chunk_size: 0}\n"
    assert errors_of(text) == [
        ("DPONE_MANIFEST_PATTERN", 1, 7),
        ("DPONE_MANIFEST_UNKNOWN_KEY", 10, 3),
        ("DPONE_MANIFEST_RANGE", 19, 23),
    ]


def test_unknown_key_of_another_source_type_and_a_fix_hint() -> None:
    text = BASE.replace("  path: data/*.csv", "  path: data/*.csv\n  query: select 1")
    with pytest.raises(ManifestError) as info:
        compile_text(text)
    (error,) = info.value.errors
    assert (error.code, error.line, error.column, error.pointer) == (
        "DPONE_MANIFEST_UNKNOWN_KEY",
        6,
        3,
        "/source/query",
    )
    typo = BASE.replace("dataset:", "datset:")
    with pytest.raises(ManifestError) as info2:
        compile_text(typo)
    assert any("did you mean 'dataset'" in fix for e in info2.value.errors for fix in e.fixes)


def test_missing_required_keys() -> None:
    assert errors_of("name: abc\nsink: {type: duckdb, table: t}\n") == [
        ("DPONE_MANIFEST_MISSING_KEY", 1, 1)
    ]
    assert errors_of(BASE.replace("  format: csv\n", "")) == [("DPONE_MANIFEST_MISSING_KEY", 2, 1)]


def test_type_and_enum_errors_never_echo_the_value() -> None:
    secret = "hunter2-very-secret"
    text = BASE.replace("enforcement: quarantine", f"enforcement: {secret}")
    with pytest.raises(ManifestError) as info:
        compile_text(text)
    (error,) = info.value.errors
    assert error.code == "DPONE_MANIFEST_ENUM"
    rendered = str(error.to_json())
    assert secret not in rendered


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            ("strategy: {mode: append}", "strategy: {mode: merge}"),
            "DPONE_MANIFEST_MERGE_WITHOUT_KEY",
        ),
        (
            ("strategy: {mode: append}", "strategy: {mode: merge, unique_key: [nope]}"),
            "DPONE_MANIFEST_UNIQUE_KEY_COLUMN",
        ),
        (("precision: 12, scale: 2", "precision: 2, scale: 3"), "DPONE_MANIFEST_DECIMAL_SCALE"),
    ],
)
def test_static_checks(change: tuple[str, str], expected: str) -> None:
    got = errors_of(BASE.replace(*change))
    assert [c for c, _, _ in got] == [expected]


def test_dlq_static_checks() -> None:
    def with_dlq(dlq: str, env: str = "dev") -> str:
        return (
            BASE.replace("name: orders_daily", f"name: orders_daily\nenvironment: {env}")
            + f"    dlq: {dlq}\n"
        )

    assert [c for c, _, _ in errors_of(with_dlq("{enabled: false}"))] == [
        "DPONE_MANIFEST_DLQ_DISABLED"
    ]
    for env in ("production", "prod", "prod-eu"):
        assert [c for c, _, _ in errors_of(with_dlq("{pii_policy: preserve}", env))] == [
            "DPONE_MANIFEST_PII_PRESERVE_IN_PRODUCTION"
        ]
    assert compile_text(with_dlq("{pii_policy: preserve}", "staging")).sink.dlq.pii_policy == (
        "preserve"
    )
    assert [
        c for c, _, _ in errors_of(with_dlq("{max_record_bytes: 4096, max_diagnostic_bytes: 8192}"))
    ] == ["DPONE_MANIFEST_DLQ_LIMIT"]
    # Bounds at the edges are accepted; one past is a range error from the schema.
    ok = compile_text(with_dlq("{retention_days: 3650, max_records_per_run: 1}"))
    assert ok.sink.dlq.retention_days == 3650
    assert [c for c, _, _ in errors_of(with_dlq("{retention_days: 3651}"))] == [
        "DPONE_MANIFEST_RANGE"
    ]
    assert [c for c, _, _ in errors_of(with_dlq("{retention_days: 0}"))] == ["DPONE_MANIFEST_RANGE"]


def _pg(connection: str) -> str:
    return BASE.replace("  type: duckdb\n", f'  type: postgres\n  connection: "{connection}"\n')


def test_secrets_are_references_resolved_only_at_run_time() -> None:
    plan = compile_text(_pg("postgresql://app:${PG_PASSWORD}@${PG_HOST}/db"))
    assert plan.sink.connection is not None
    assert plan.secret_names == ("PG_PASSWORD", "PG_HOST")
    assert "${PG_PASSWORD}" in str(plan.to_json())
    resolved = plan.sink.connection.resolve({"PG_PASSWORD": "s3cr3t", "PG_HOST": "db.local"})
    assert resolved == "postgresql://app:s3cr3t@db.local/db"
    with pytest.raises(SecretError) as info:
        plan.sink.connection.resolve({"PG_HOST": "x"})
    assert info.value.code == "DPONE_SECRET_UNRESOLVED"
    assert info.value.exit_code == 2


@pytest.mark.parametrize(
    ("connection", "code"),
    [
        ("postgresql://u:hunter2@h/db", "DPONE_MANIFEST_INLINE_SECRET"),
        ("postgresql://h/db?password=hunter2", "DPONE_MANIFEST_INLINE_SECRET"),
        ("host=h password=hunter2", "DPONE_MANIFEST_INLINE_SECRET"),
        ("${lower case}", "DPONE_MANIFEST_SECRET_REFERENCE"),
        ("${UNCLOSED", "DPONE_MANIFEST_SECRET_REFERENCE"),
    ],
)
def test_secret_errors(connection: str, code: str) -> None:
    with pytest.raises(ManifestError) as info:
        compile_text(_pg(connection))
    assert [e.code for e in info.value.errors] == [code]
    assert "hunter2" not in str([e.to_json() for e in info.value.errors])


def test_references_outside_connections_are_refused() -> None:
    got = errors_of(BASE.replace("path: data/*.csv", "path: ${DATA_DIR}/*.csv"))
    assert got == [("DPONE_MANIFEST_SECRET_REFERENCE", 5, 9)]


def test_assertion_static_checks() -> None:
    text = (
        BASE
        + """\
quality:
  assertions:
    min_rows: 1
    required_columns: [id, nope]
    min_rows_per_load: {value: 1, on_failure: quarantine}
"""
    )
    assert errors_of(text) == [
        ("DPONE_ASSERTION_UNKNOWN_TYPE", 20, 5),
        ("DPONE_ASSERTION_UNKNOWN_COLUMN", 21, 28),
        ("DPONE_ASSERTION_QUARANTINE_BATCH", 22, 47),
    ]
    inherited = (
        BASE + "quality:\n  assertions:\n    on_failure: quarantine\n    min_rows_per_load: 1\n"
    )
    assert [c for c, _, _ in errors_of(inherited)] == ["DPONE_ASSERTION_QUARANTINE_BATCH"]


def test_predicates_must_be_found_and_callable(tmp_path: Path) -> None:
    (tmp_path / "rules.py").write_text("NOT_A_FUNCTION = 3\n")
    text = (
        BASE + "quality:\n  assertions:\n    custom:\n      - {predicate: 'rules:NOT_A_FUNCTION'}\n"
    )
    text += "      - {predicate: 'missing_module:f'}\n"
    with pytest.raises(ManifestError) as info:
        compile_text(text, path=tmp_path / "manifest.yaml")
    assert [(e.code, e.line) for e in info.value.errors] == [
        ("DPONE_ASSERTION_PREDICATE_NOT_CALLABLE", 21),
        ("DPONE_MANIFEST_PREDICATE_NOT_FOUND", 22),
    ]


def test_incremental_cursor_must_be_declared_and_orderable() -> None:
    text = BASE.replace(
        "  path: data/*.csv", "  path: data/*.csv\n  incremental: {cursor_column: nope}"
    )
    assert [c for c, _, _ in errors_of(text)] == ["DPONE_MANIFEST_INCREMENTAL_COLUMN"]
    ok = BASE.replace(
        "  path: data/*.csv", "  path: data/*.csv\n  incremental: {cursor_column: updated_at}"
    )
    inc = compile_text(ok).source.incremental
    assert inc is not None
    assert (inc.cursor_column, inc.initial_value) == ("updated_at", None)


def test_extension_keys_are_accepted_and_ignored() -> None:
    annotated = BASE.replace("name: orders_daily", "name: orders_daily\nx-owner: data-team") + (
        "    x-note: {anything: [1, 2]}\n"
    )
    assert compile_text(annotated).fingerprint == compile_text(BASE).fingerprint


def test_a_source_rename_compiles_into_the_plan() -> None:
    text = BASE.replace(
        "        id: {type: integer, nullable: false}\n",
        '        id: {type: integer, nullable: false, source: ""}\n',
    )
    plan = compile_text(text)
    assert plan.sink.contract.columns[0].source == ""
    assert plan.document["sink"]["options"]["schema_contract"]["columns"]["id"]["source"] == ""
    # A manifest without source: keeps its fingerprint's document unchanged.
    assert (
        "source"
        not in compile_text(BASE).document["sink"]["options"]["schema_contract"]["columns"]["id"]
    )


@pytest.mark.parametrize(
    "columns",
    [
        "        Amount: {type: string}\n",  # amount and Amount: one name to DuckDB
        "        a: {type: string, source: x}\n        b: {type: string, source: x}\n",
        "        a: {type: string, source: amount}\n",  # amount is declared by its own name
    ],
)
def test_column_name_collisions_are_compile_errors(columns: str) -> None:
    got = errors_of(BASE + columns)
    assert [c for c, _, _ in got] == ["DPONE_MANIFEST_COLUMN_NAME"]


def test_a_swap_of_two_source_columns_compiles() -> None:
    text = BASE + ("        a: {type: string, source: b}\n        b: {type: string, source: a}\n")
    assert [c.source for c in compile_text(text).sink.contract.columns][-2:] == ["b", "a"]


def test_a_renamed_cursor_is_refused_where_the_source_filters_on_it() -> None:
    text = BASE.replace(
        "  type: file\n  format: csv\n  path: data/*.csv\n",
        '  type: postgres\n  connection: "${PG}"\n  table: orders\n'
        "  incremental: {cursor_column: updated_at}\n",
    ).replace(
        "updated_at: {type: timestamp, timezone: true}",
        "updated_at: {type: timestamp, timezone: true, source: changed}",
    )
    assert [c for c, _, _ in errors_of(text)] == ["DPONE_MANIFEST_COLUMN_NAME"]
    # A file source filters rows itself, by the contract's name: the rename is fine there.
    file_text = BASE.replace(
        "updated_at: {type: timestamp, timezone: true}",
        "updated_at: {type: timestamp, timezone: true, source: changed}",
    ).replace(
        "  path: data/*.csv\n", "  path: data/*.csv\n  incremental: {cursor_column: updated_at}\n"
    )
    compile_text(file_text)
