"""A third-party assertion package, installed for real, used from a manifest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

PLUGIN = Path(__file__).resolve().parents[1] / "plugins" / "dpone_even_ids"

MANIFEST = """\
name: even_orders
source: {type: file, format: csv, path: "orders.csv"}
sink:
  type: duckdb
  dataset: shop
  table: orders
  options:
    schema_contract:
      enforcement: quarantine
      columns:
        id: {type: integer, nullable: false}
        kind: {type: string}
quality:
  assertions:
    even_ids: {value: [id], on_failure: quarantine}
"""


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(PLUGIN),
        ],
        check=True,
        capture_output=True,
    )
    return target


def dpone(args: list[str], plugin_path: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(plugin_path))
    return subprocess.run(
        [sys.executable, "-m", "dpone", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_plugins_list_shows_the_third_party_type(plugin_path: Path, tmp_path: Path) -> None:
    result = dpone(["plugins", "list", "--format", "json"], plugin_path, tmp_path)
    assert result.returncode == 0, result.stderr
    found = {a["name"]: a for a in json.loads(result.stdout)["assertions"]}
    assert found["even_ids"]["origin"] == "dpone-even-ids 0.1.0"
    assert found["even_ids"]["scope"] == "row"
    assert found["unique_columns"]["origin"].startswith("dpone")


def test_manifest_uses_the_plugin_and_quarantines_odd_ids(
    plugin_path: Path, tmp_path: Path
) -> None:
    (tmp_path / "manifest.yaml").write_text(MANIFEST)
    (tmp_path / "orders.csv").write_text("id,kind\n2,a\n3,b\n4,c\n5,d\n6,e\n")
    result = dpone(["run", "manifest.yaml", "--format", "json"], plugin_path, tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["rows"]["loaded"] == 3
    assert report["rows"]["quarantined"] == 2
    con = duckdb.connect(str(tmp_path / ".dpone" / "even_orders.duckdb"), read_only=True)
    try:
        ids = [r[0] for r in con.sql("SELECT id FROM shop.orders ORDER BY id").fetchall()]
    finally:
        con.close()
    assert ids == [2, 4, 6]


def test_without_the_plugin_the_manifest_is_invalid(tmp_path: Path) -> None:
    (tmp_path / "manifest.yaml").write_text(MANIFEST)
    result = subprocess.run(
        [sys.executable, "-m", "dpone", "validate", "manifest.yaml", "--format", "json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    errors = json.loads(result.stdout)["manifests"][0]["errors"]
    assert [e["code"] for e in errors] == ["DPONE_ASSERTION_UNKNOWN_TYPE"]
    assert errors[0]["line"] == 15


def test_a_predicate_of_an_installed_plugin_is_allowed_without_any_import(
    plugin_path: Path, tmp_path: Path
) -> None:
    manifest = MANIFEST.replace(
        "    even_ids: {value: [id], on_failure: quarantine}\n",
        "    custom:\n      - {predicate: 'dpone_even_ids:even_id', on_failure: quarantine}\n",
    )
    (tmp_path / "manifest.yaml").write_text(manifest)
    (tmp_path / "orders.csv").write_text("id,kind\n2,a\n3,b\n")
    checked = dpone(["validate", "manifest.yaml", "--format", "json"], plugin_path, tmp_path)
    assert checked.returncode == 0, checked.stdout
    result = dpone(["run", "manifest.yaml", "--format", "json"], plugin_path, tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["rows"]["quarantined"] == 1
