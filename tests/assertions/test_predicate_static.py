"""Validation finds and parses predicate modules; it never runs a manifest's code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpone.assertions.locate import check_reference
from tests.support.processes import dpone_subprocess

CANARY_MODULE = """\
import pathlib
pathlib.Path(__file__).with_name("CANARY").write_text("imported")
print("hello from an untrusted module")

def positive(row):
    return row["id"] > 0
"""

MANIFEST = """\
name: canary_check
source: {type: file, format: csv, path: rows.csv}
sink:
  type: duckdb
  dataset: main
  table: rows
  options:
    schema_contract:
      enforcement: quarantine
      columns:
        id: {type: integer, nullable: false}
quality:
  assertions:
    custom:
      - {predicate: "PREDICATE", on_failure: quarantine}
"""


def project(tmp_path: Path, predicate: str) -> Path:
    (tmp_path / "rules.py").write_text(CANARY_MODULE)
    (tmp_path / "rows.csv").write_text("id\n1\n-2\n3\n")
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(MANIFEST.replace("PREDICATE", predicate))
    return manifest


def test_validate_and_plan_never_import_the_predicate(tmp_path: Path) -> None:
    project(tmp_path, "rules:positive")
    checked = dpone_subprocess(
        ["validate", "manifest.yaml", "--format", "json"], cwd=tmp_path, env={}
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert json.loads(checked.stdout)["valid"] is True
    planned = dpone_subprocess(["plan", "manifest.yaml", "--format", "json"], cwd=tmp_path, env={})
    assert planned.returncode == 0, planned.stderr
    assert json.loads(planned.stdout)["name"] == "canary_check"
    assert not (tmp_path / "CANARY").exists()


def test_run_still_imports_and_runs_a_valid_predicate(tmp_path: Path) -> None:
    project(tmp_path, "rules:positive")
    ran = dpone_subprocess(["run", "manifest.yaml", "--format", "json"], cwd=tmp_path, env={})
    assert ran.returncode == 0, ran.stderr
    report = json.loads(ran.stdout.split("\n", 1)[1])  # the module's own print comes first
    assert (report["rows"]["loaded"], report["rows"]["quarantined"]) == (2, 1)
    assert (tmp_path / "CANARY").exists()


def test_an_installed_module_is_refused_without_allow_any_import(tmp_path: Path) -> None:
    project(tmp_path, "os:system")
    checked = dpone_subprocess(
        ["validate", "manifest.yaml", "--format", "json"], cwd=tmp_path, env={}
    )
    assert checked.returncode == 2
    [error] = json.loads(checked.stdout)["manifests"][0]["errors"]
    assert (error["code"], error["line"]) == ("DPONE_MANIFEST_PREDICATE_NOT_ALLOWED", 15)
    assert any("--allow-any-import" in fix for fix in error["fixes"])
    ran = dpone_subprocess(["run", "manifest.yaml", "--format", "json"], cwd=tmp_path, env={})
    assert ran.returncode == 2
    assert json.loads(ran.stdout)["code"] == "DPONE_MANIFEST_PREDICATE_NOT_ALLOWED"
    assert not (tmp_path / ".dpone").exists() or not any((tmp_path / ".dpone").rglob("*.jsonl"))


def test_a_missing_attribute_is_reported_with_line_and_column(tmp_path: Path) -> None:
    project(tmp_path, "rules:negative")
    checked = dpone_subprocess(
        ["validate", "manifest.yaml", "--format", "json"], cwd=tmp_path, env={}
    )
    assert checked.returncode == 2
    [error] = json.loads(checked.stdout)["manifests"][0]["errors"]
    assert error["code"] == "DPONE_MANIFEST_PREDICATE_NOT_FOUND"
    assert (error["line"], error["column"]) == (15, 21)
    assert error["pointer"] == "/quality/assertions/custom/0/predicate"
    assert not (tmp_path / "CANARY").exists()


def test_allow_any_import_finds_installed_modules_by_spec_and_source(tmp_path: Path) -> None:
    # json.decoder: a dotted name whose parent package must not be imported to find it.
    assert check_reference("json.decoder:JSONDecoder", tmp_path) is not None
    assert check_reference("json.decoder:JSONDecoder", tmp_path, allow_any_import=True) is None
    missing = check_reference("json.decoder:nothing_here", tmp_path, allow_any_import=True)
    assert missing is not None
    assert missing.code == "DPONE_MANIFEST_PREDICATE_NOT_FOUND"
    nowhere = check_reference("no_such_module_xyz:f", tmp_path, allow_any_import=True)
    assert nowhere is not None
    assert nowhere.code == "DPONE_MANIFEST_PREDICATE_NOT_FOUND"


def test_a_dotted_installed_name_does_not_import_its_parent_package(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "trap").mkdir(parents=True)
    (site / "trap" / "__init__.py").write_text(
        "import pathlib\npathlib.Path(__file__).parents[2].joinpath('CANARY').write_text('x')\n"
    )
    (site / "trap" / "rules.py").write_text("def ok(row):\n    return True\n")
    project(tmp_path, "trap.rules:ok")
    (tmp_path / "rules.py").unlink()
    args = ["validate", "manifest.yaml", "--allow-any-import", "--format", "json"]
    checked = dpone_subprocess(args, cwd=tmp_path, env={"PYTHONPATH": str(site)})
    assert checked.returncode == 0, checked.stdout
    assert not (tmp_path / "CANARY").exists()


@pytest.mark.parametrize(
    ("source", "code"),
    [
        ("positive = 3\n", "DPONE_ASSERTION_PREDICATE_NOT_CALLABLE"),
        ("def positive(:\n", "DPONE_MANIFEST_PREDICATE_SYNTAX"),
        ("async def positive(row):\n    return True\n", None),
        ("class positive:\n    pass\n", None),
        ("from math import isfinite as positive\n", None),
        ("try:\n    from x import positive\nexcept ImportError:\n    positive = len\n", None),
        ("positive = lambda row: True\n", None),
        ("from somewhere import *\n", None),
    ],
)
def test_top_level_bindings(tmp_path: Path, source: str, code: str | None) -> None:
    (tmp_path / "rules.py").write_text(source)
    problem = check_reference("rules.positive", tmp_path)
    assert (problem.code if problem else None) == code


def test_replay_compiles_the_manifest_as_run_does_with_allow_any_import(tmp_path: Path) -> None:
    """A predicate from an installed package needs --allow-any-import for `dpone run`; the
    replay of that run compiles the same manifest, so it needs (and accepts) the flag too."""
    site = tmp_path / "site"
    (site / "shop_rules").mkdir(parents=True)
    (site / "shop_rules" / "__init__.py").write_text("")
    rules = site / "shop_rules" / "checks.py"
    rules.write_text("def positive(row):\n    return row['id'] > 0\n")
    project(tmp_path, "shop_rules.checks:positive")
    env = {"PYTHONPATH": str(site)}
    ran = dpone_subprocess(
        ["run", "manifest.yaml", "--run-id", "r1", "--allow-any-import", "--format", "json"],
        cwd=tmp_path,
        env=env,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert json.loads(ran.stdout)["rows"]["quarantined"] == 1
    rules.write_text("def positive(row):\n    return row['id'] != 0\n")  # the rule was wrong

    replay = ["ops", "quarantine-replay", "--manifest", "manifest.yaml", "--run-id", "r1"]
    refused = dpone_subprocess([*replay, "--execute", "--format", "json"], cwd=tmp_path, env=env)
    assert refused.returncode == 2
    assert json.loads(refused.stdout)["code"] == "DPONE_MANIFEST_PREDICATE_NOT_ALLOWED"
    applied = dpone_subprocess(
        [*replay, "--execute", "--allow-any-import", "--format", "json"], cwd=tmp_path, env=env
    )
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert json.loads(applied.stdout)["counts"]["applied"] == 1
