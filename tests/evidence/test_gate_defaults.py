"""The release gate's default policy protects without flags (SPEC §7), and a policy file.

Real runs write the bundles: a clean one, one with 5 of 6 rows quarantined, one that read
rows and loaded none. The command runs as ``dpone ops release-gate`` from the project folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dpone.ops.gate import GATE_SCHEMA_ID, REPORT_JSON, REPORT_MD
from dpone.published import schema_errors
from tests.evidence.test_gate import GOOD_ROWS, Project, _run, invoke, relative

MOSTLY_BAD = "id,amount\n1,10.00\n2,x\n3,y\n4,z\n5,w\n6,v\n"
ALL_BAD = "id,amount\n1,x\n2,y\n3,z\n"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Project]:
    base = tmp_path_factory.mktemp("gate-defaults")
    return {
        "clean": _run(base, "clean", "quarantine", GOOD_ROWS),
        "mostly": _run(base, "mostly", "quarantine", MOSTLY_BAD),
        "empty": _run(base, "empty", "quarantine", ALL_BAD),
    }


def gate(project: Project, *args: str) -> tuple[int, dict[str, Any], str]:
    """The gate on ``project``'s bundle: exit code, release_gate.json, release_gate.md."""
    code, out, _ = invoke(project.root, relative(project, project.evidence), *args)
    doc: dict[str, Any] = json.loads((project.root / REPORT_JSON).read_bytes())
    assert schema_errors(doc, GATE_SCHEMA_ID) == []
    markdown = (project.root / REPORT_MD).read_text(encoding="utf-8")
    assert out == markdown
    return code, doc, markdown


def codes(doc: dict[str, Any]) -> list[str]:
    return [f["code"] for f in doc["bundles"][0]["findings"]]


def test_without_flags_a_clean_run_passes_and_the_policy_is_printed(
    runs: dict[str, Project],
) -> None:
    code, doc, markdown = gate(runs["clean"])

    assert (code, doc["decision"]) == (0, "pass")
    assert doc["policy"]["max_quarantine_ratio"] == 0.01
    assert doc["policy"]["allow_empty"] is False
    assert doc["policy"]["policy_file"] is None
    assert "- maximum quarantine ratio: 0.01" in markdown
    assert "- a run that loaded none of the rows it read: blocks" in markdown
    assert "- policy file: none (flags and defaults)" in markdown


def test_without_flags_a_mostly_quarantined_run_is_blocked(runs: dict[str, Project]) -> None:
    code, doc, markdown = gate(runs["mostly"])

    assert (code, doc["decision"]) == (1, "blocked")
    assert doc["bundles"][0]["rows_quarantined"] == 5
    assert codes(doc) == ["DPONE_GATE_QUARANTINE_RATIO"]
    assert "DPONE_GATE_QUARANTINE_RATIO" in markdown


def test_max_quarantine_ratio_overrides_the_default(runs: dict[str, Project]) -> None:
    code, doc, _ = gate(runs["mostly"], "--max-quarantine-ratio", "0.9")

    assert (code, doc["decision"]) == (0, "pass")
    assert doc["policy"]["max_quarantine_ratio"] == 0.9


def test_without_flags_a_run_that_loaded_nothing_is_blocked(runs: dict[str, Project]) -> None:
    code, doc, _ = gate(runs["empty"], "--max-quarantine-ratio", "1")

    assert (code, doc["decision"]) == (1, "blocked")
    assert doc["bundles"][0]["rows_read"] == 3
    assert codes(doc) == ["DPONE_GATE_EMPTY_LOAD"]


def test_allow_empty_lets_an_empty_load_pass(runs: dict[str, Project]) -> None:
    code, doc, markdown = gate(runs["empty"], "--max-quarantine-ratio", "1", "--allow-empty")

    assert (code, doc["decision"]) == (0, "pass")
    assert doc["policy"]["allow_empty"] is True
    assert "- a run that loaded none of the rows it read: allowed" in markdown


def test_a_policy_file_sets_the_policy_and_flags_override_it(runs: dict[str, Project]) -> None:
    project = runs["empty"]
    (project.root / "gate.yaml").write_text(
        "allowed_outcomes: [passed, passed_with_quarantine]\n"
        "max_quarantine_ratio: 1\n"
        "allow_empty: true\n",
        encoding="utf-8",
    )

    code, doc, markdown = gate(project, "--policy", "gate.yaml")
    assert (code, doc["decision"]) == (0, "pass")
    assert doc["policy"]["policy_file"] == "gate.yaml"
    assert doc["policy"]["allowed_outcomes"] == ["passed", "passed_with_quarantine"]
    assert "- policy file: `gate.yaml`" in markdown

    code, doc, _ = gate(project, "--policy", "gate.yaml", "--max-quarantine-ratio", "0.5")
    assert (code, codes(doc)) == (1, ["DPONE_GATE_QUARANTINE_RATIO"])
    assert doc["policy"]["max_quarantine_ratio"] == 0.5
    assert doc["policy"]["allow_empty"] is True  # from the file


def test_a_json_policy_file_is_read_too(runs: dict[str, Project]) -> None:
    project = runs["mostly"]
    (project.root / "gate.json").write_text('{"max_quarantine_ratio": 0.9}', encoding="utf-8")

    code, doc, _ = gate(project, "--policy", "gate.json")

    assert (code, doc["policy"]["max_quarantine_ratio"]) == (0, 0.9)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("max_quarantine_ratio: 2\n", "DPONE_GATE_POLICY_INVALID"),
        ("allowed_outcomes: [mostly_fine]\n", "DPONE_GATE_POLICY_INVALID"),
        ("max_ratio: 0.1\n", "DPONE_GATE_POLICY_INVALID"),
        ("allow_empty: [yes\n", "DPONE_GATE_POLICY_INVALID"),
        ("- a list\n", "DPONE_GATE_POLICY_INVALID"),
        ("require_signature: true\nallow_unsigned: true\n", "DPONE_GATE_POLICY_INVALID"),
        (None, "DPONE_GATE_POLICY_NOT_FOUND"),
    ],
)
def test_a_bad_policy_file_is_a_usage_error(
    runs: dict[str, Project], tmp_path: Path, content: str | None, expected: str
) -> None:
    project = runs["clean"].copy_to(tmp_path / "p")
    (project.root / REPORT_JSON).unlink(missing_ok=True)  # another test gated the original
    if content is not None:
        (project.root / "bad.yaml").write_text(content, encoding="utf-8")

    code, out, _ = invoke(
        project.root,
        relative(project, project.evidence),
        "--policy",
        "bad.yaml",
        "--format",
        "json",
    )

    assert code == 2
    error = json.loads(out)
    assert schema_errors(error, "dpone.error.v1") == []
    assert error["code"] == expected
    assert error["path"] == "bad.yaml"
    assert not (project.root / REPORT_JSON).exists()
