"""The one importer of user code (python source callables, custom predicates)."""

from __future__ import annotations

import hashlib
import sys
import uuid
from pathlib import Path

import duckdb
import pytest

import dpone
from dpone.usercode import MODULE_PREFIX, UserCodeError, load_callable

MANIFEST = """\
name: usercode_run
source:
  type: python
  callable: "{source}:rows"
  args: {{n: 6}}
sink:
  type: duckdb
  table: t
  options:
    schema_contract:
      enforcement: quarantine
      columns:
        id: {{type: integer, nullable: false}}
quality:
  assertions:
    custom:
      - {{predicate: "{rules}:small", on_failure: quarantine}}
"""


def _write_project(folder: Path) -> tuple[str, str, str]:
    """A python source that imports a neighbour at its top, and a predicate module."""
    tag = uuid.uuid4().hex
    helper, source, rules = f"helper_{tag}", f"source_{tag}", f"rules_{tag}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{helper}.py").write_text("LIMIT = 4\n")
    (folder / f"{source}.py").write_text(
        f"import {helper}\n\n"
        "def rows(n):\n    for i in range(1, n + 1):\n        yield {'id': i}\n"
    )
    (folder / f"{rules}.py").write_text(
        f"from {helper} import LIMIT\n\ndef small(row):\n    return row['id'] <= LIMIT\n"
    )
    (folder / "manifest.yaml").write_text(MANIFEST.format(source=source, rules=rules))
    return helper, source, rules


def test_a_run_leaves_sys_path_as_it_found_it(tmp_path: Path) -> None:
    _, source, rules = _write_project(tmp_path / "project")
    before = list(sys.path)

    report = dpone.run(tmp_path / "project" / "manifest.yaml")

    assert sys.path == before
    assert report.exit_code == 0
    con = duckdb.connect(str(tmp_path / "project" / ".dpone" / "usercode_run.duckdb"))
    try:
        assert con.execute("SELECT id FROM dpone.t ORDER BY id").fetchall() == [
            (i,) for i in range(1, 5)
        ]
    finally:
        con.close()
    assert (report.rows.loaded, report.rows.quarantined) == (4, 2)
    # The manifest's modules are loaded under names of their own, never as plain top-level ones.
    assert source not in sys.modules
    assert rules not in sys.modules


def test_same_module_name_in_two_folders_stays_apart(tmp_path: Path) -> None:
    for folder, value in (("a", 1), ("b", 2)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "rules.py").write_text(f"def value():\n    return {value}\n")
    assert load_callable("rules:value", tmp_path / "a")() == 1
    assert load_callable("rules.value", tmp_path / "b")() == 2
    assert "rules" not in sys.modules


def test_a_local_package_with_relative_imports(tmp_path: Path) -> None:
    package = tmp_path / f"pkg_{uuid.uuid4().hex}"
    package.mkdir()
    (package / "__init__.py").write_text("from .impl import answer\n")
    (package / "impl.py").write_text("def answer():\n    return 42\n")
    assert load_callable(f"{package.name}:answer", tmp_path)() == 42


def test_failures_are_data_and_leave_sys_path_alone(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("raise RuntimeError('secret-value')\n")
    (tmp_path / "values.py").write_text("three = 3\n")
    before = list(sys.path)
    cases = {
        "broken:f": ("import", "RuntimeError"),
        "no_such_module_xyz:f": ("import", "ModuleNotFoundError"),
        "values:missing": ("import", "AttributeError"),
        "values:three": ("not_callable", None),
        "nodots": ("malformed", None),
    }
    for reference, (failure, cause) in cases.items():
        with pytest.raises(UserCodeError) as info:
            load_callable(reference, tmp_path)
        assert (info.value.failure, info.value.cause) == (failure, cause), reference
        assert "secret-value" not in str(info.value)
        assert sys.path == before
    # A module that failed to execute is not left half-imported.
    digest = hashlib.sha256(str((tmp_path / "broken.py").resolve()).encode()).hexdigest()[:16]
    assert f"{MODULE_PREFIX}{digest}" not in sys.modules
