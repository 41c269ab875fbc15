"""The examples of ``docs/python-api.md`` run as written (the doc cannot drift)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import ROOT, copy_orders

DOC = ROOT / "docs" / "python-api.md"
BLOCK = re.compile(r"<!-- test: (\w+) -->\n```python\n(.*?)```", re.DOTALL)


def examples() -> dict[str, str]:
    return dict(BLOCK.findall(DOC.read_text()))


def test_the_doc_has_both_examples() -> None:
    assert set(examples()) == {"airflow", "dagster", "services"}


def _exec(name: str, root: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    copy_orders(root)
    monkeypatch.chdir(root)  # the examples name the manifest relative to a checkout
    namespace: dict[str, Any] = {"__name__": f"docs_example_{name}"}
    exec(compile(examples()[name], f"{DOC}:{name}", "exec"), namespace)
    return namespace


def test_airflow_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = _exec("airflow", tmp_path, monkeypatch)["load_orders"]()
    assert doc["status"] == "succeeded"
    assert doc["data_outcome"] == "passed_with_quarantine"


def test_dagster_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    metadata = _exec("dagster", tmp_path, monkeypatch)["orders"]()
    assert metadata["rows_loaded"] == 36
    assert metadata["rows_quarantined"] == 4
    assert metadata["evidence"]


def test_services_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = _exec("services", tmp_path, monkeypatch)["result"]
    assert result.rows_quarantined == 1
    assert (tmp_path / ".dpone" / "dlq" / "runs" / result.run_id / "index.json").is_file()
