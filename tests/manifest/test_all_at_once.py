"""``dpone validate`` reports every error at once (SPEC §2): a schema error does not hide the
errors of the parts of the manifest it does not touch, and no pointer is reported twice.

Run as ``python -m dpone validate`` in a process of its own; the golden file is
``manifests_examples/invalid/schema_engine_predicate.yaml``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dpone.manifest.passes import STATIC_CHECKS, STATIC_INPUTS
from tests.support.paths import EXAMPLES
from tests.support.processes import dpone_subprocess

GOLDEN = EXAMPLES / "invalid" / "schema_engine_predicate.yaml"


def validate(path: Path) -> tuple[int, list[dict[str, Any]], str]:
    """Exit code, the JSON errors and the text output of two ``dpone validate`` runs."""
    proc = dpone_subprocess(["validate", str(path), "--format", "json"], cwd=path.parent, env={})
    doc = json.loads(proc.stdout)
    errors: list[dict[str, Any]] = doc["manifests"][0].get("errors", [])
    text = dpone_subprocess(["validate", str(path)], cwd=path.parent, env={})
    assert text.returncode == proc.returncode
    return proc.returncode, errors, text.stderr


def test_a_schema_error_an_engine_error_and_a_bad_predicate_in_one_run() -> None:
    code, errors, text = validate(GOLDEN)

    assert code == 2
    assert [(e["code"], e["pointer"], e["line"], e["column"]) for e in errors] == [
        ("DPONE_MANIFEST_ENUM", "/sink/strategy/mode", 14, 20),
        ("DPONE_MANIFEST_ENGINE_UNSUPPORTED", "/quality/assertions/unique_columns", 21, 5),
        (
            "DPONE_MANIFEST_PREDICATE_NOT_FOUND",
            "/quality/assertions/custom/0/predicate",
            23,
            21,
        ),
    ]
    assert all(e["path"] == str(GOLDEN) and e["fixes"] for e in errors)
    for e in errors:
        assert f"{GOLDEN}:{e['line']}:{e['column']}: error: {e['code']}" in text
    assert "3 error(s)" in text


def test_fixing_one_error_reveals_no_other(tmp_path: Path) -> None:
    """Each error was reported already: fixing one leaves exactly the others."""
    text = GOLDEN.read_text(encoding="utf-8")
    fixes = {
        "DPONE_MANIFEST_ENUM": ("{mode: upsert}", "{mode: append}"),
        "DPONE_MANIFEST_ENGINE_UNSUPPORTED": ("engine: dask", "engine: local"),
        "DPONE_MANIFEST_PREDICATE_NOT_FOUND": ("no_such_module_here:check", "quality:check"),
    }
    (tmp_path / "quality.py").write_text("def check(batch):\n    return None\n", "utf-8")
    for fixed, (old, new) in fixes.items():
        path = tmp_path / "manifest.yaml"
        path.write_text(text.replace(old, new), encoding="utf-8")
        code, errors, _ = validate(path)
        assert code == 2
        assert sorted(e["code"] for e in errors) == sorted(set(fixes) - {fixed})


def test_a_value_the_schema_refuses_is_reported_once(tmp_path: Path) -> None:
    """retention_days 0 breaks the schema's range and the DLQ limits check: one error for
    its pointer; an unknown assertion type under quality is still found."""
    path = tmp_path / "manifest.yaml"
    path.write_text(
        """\
name: orders_daily
source: {type: file, format: csv, path: data/*.csv}
sink:
  type: duckdb
  dataset: analytics
  table: orders
  options:
    schema_contract:
      columns: {id: {type: integer}}
    dlq: {retention_days: 0}
quality:
  assertions:
    no_such_assertion: {value: 1}
""",
        encoding="utf-8",
    )
    code, errors, _ = validate(path)

    assert code == 2
    found = [(e["code"], e["pointer"], e["line"]) for e in errors]
    assert found == [
        ("DPONE_MANIFEST_RANGE", "/sink/options/dlq/retention_days", 10),
        ("DPONE_ASSERTION_UNKNOWN_TYPE", "/quality/assertions/no_such_assertion", 13),
    ]


def test_no_golden_reports_a_pointer_twice_for_one_reason() -> None:
    """Over every golden invalid manifest: no (code, pointer, message) twice, and no later
    check repeats a pointer a schema error names."""
    from dpone.errors import ManifestError
    from dpone.manifest.compiler import compile_manifest

    for path in sorted((EXAMPLES / "invalid").glob("*.yaml")):
        try:
            compile_manifest(path)
        except ManifestError as err:
            keys = [(e.code, e.pointer, e.message) for e in err.errors]
            assert len(keys) == len(set(keys)), path
            schema = {e.pointer for e in err.errors if e.stage == "validate"}
            later = [e.pointer for e in err.errors if e.stage != "validate"]
            assert not schema & set(later), path


def test_every_static_check_names_its_inputs() -> None:
    # A check missing from STATIC_INPUTS would stop the checks after it once the schema
    # reported an error (its KeyError is taken for a salvaged document it cannot read).
    assert set(STATIC_CHECKS) == set(STATIC_INPUTS)
