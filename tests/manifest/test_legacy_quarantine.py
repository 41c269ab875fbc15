"""The legacy top-level ``quarantine: {dir: ...}`` (seed 004's migration window, SPEC §11):
it validates with a deprecation warning naming its replacement, maps to the DLQ's folder, and
is refused in production like ``pii_policy: preserve``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dpone.api import validate
from dpone.cli.main import cli
from dpone.errors import ManifestError
from dpone.manifest.checks.legacy import REMOVED_IN
from dpone.manifest.compiler import compile_text
from dpone.published import schema_errors
from tests.manifest.helpers import BASE

DOCS = Path(__file__).resolve().parents[2] / "docs"
LEGACY = BASE + "quarantine:\n  dir: legacy_q\n"
#: where the legacy key sits in LEGACY (1-based, as dpone reports it)
LEGACY_LINE = BASE.count("\n") + 1


def _write(tmp_path: Path, text: str, name: str = "manifest.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_validate_warns_and_names_the_replacement(tmp_path: Path) -> None:
    result = validate(_write(tmp_path, LEGACY))
    assert result.ok
    assert not result.errors
    [warning] = result.warnings
    assert warning.code == "DPONE_MANIFEST_DEPRECATED_KEY"
    assert warning.severity == "warning"
    assert warning.pointer == "/quarantine/dir"
    assert (warning.line, warning.column) == (LEGACY_LINE + 1, 3)
    assert "sink.options.dlq.directory" in warning.message
    assert REMOVED_IN in warning.message
    assert "move the value to sink.options.dlq.directory" in warning.fixes[0]


def test_validate_text_prints_the_warning_and_exits_0(tmp_path: Path) -> None:
    path = _write(tmp_path, LEGACY)
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"ok       {path}")
    assert f"{path}:{LEGACY_LINE + 1}:3: warning: DPONE_MANIFEST_DEPRECATED_KEY" in result.stderr
    assert "replaced by sink.options.dlq.directory" in result.stderr
    assert "at /quarantine/dir" in result.stderr


def test_validate_json_carries_the_warning_in_its_schema(tmp_path: Path) -> None:
    legacy = _write(tmp_path, LEGACY)
    plain = _write(tmp_path, BASE, "plain.yaml")
    result = CliRunner().invoke(cli, ["validate", str(legacy), str(plain), "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert schema_errors(doc, "dpone.validation.v1") == []
    first, second = doc["manifests"]
    assert first["valid"] is True
    assert [w["code"] for w in first["warnings"]] == ["DPONE_MANIFEST_DEPRECATED_KEY"]
    assert first["warnings"][0]["severity"] == "warning"
    assert first["warnings"][0]["pointer"] == "/quarantine/dir"
    assert "warnings" not in second  # a manifest without a deprecated key: unchanged document


def test_plan_shows_the_export_and_the_warning(tmp_path: Path) -> None:
    path = _write(tmp_path, LEGACY)
    result = CliRunner().invoke(cli, ["plan", str(path)])
    assert result.exit_code == 0, result.output
    assert "dlq          legacy_q  (pii reference_only" in result.stdout
    assert "legacy       quarantine.dir legacy_q  (deprecated" in result.stdout
    assert "warning: DPONE_MANIFEST_DEPRECATED_KEY" in result.stderr
    doc = json.loads(CliRunner().invoke(cli, ["plan", str(path), "--format", "json"]).stdout)
    assert schema_errors(doc, "dpone.plan.v1") == []
    assert doc["manifest"]["quarantine"] == {"dir": "legacy_q"}


def test_the_schema_refuses_a_warning_with_error_severity(tmp_path: Path) -> None:
    doc = validate(_write(tmp_path, LEGACY)).to_json()
    doc["manifests"][0]["warnings"][0]["severity"] = "error"
    assert schema_errors(doc, "dpone.validation.v1") != []


def test_the_legacy_folder_is_the_dlq_unless_one_is_named() -> None:
    plan = compile_text(LEGACY, path="/m/manifest.yaml")
    assert plan.quarantine_export == Path("/m/legacy_q")
    assert plan.sink.dlq.directory == "/m/legacy_q"
    assert plan.document["sink"]["options"]["dlq"]["directory"] == "legacy_q"
    named = LEGACY.replace("  options:\n", "  options:\n    dlq: {directory: dead}\n", 1)
    plan = compile_text(named, path="/m/manifest.yaml")
    assert plan.quarantine_export == Path("/m/legacy_q")
    assert plan.sink.dlq.directory == "/m/dead"
    [warning] = plan.warnings
    assert warning.fixes[0].startswith("remove `quarantine:`: the DLQ is at")


def test_a_manifest_without_the_key_has_no_warning_and_no_export() -> None:
    plan = compile_text(BASE, path="/m/manifest.yaml")
    assert plan.warnings == ()
    assert plan.quarantine_export is None
    assert plan.sink.dlq.directory == "/m/.dpone/dlq"


@pytest.mark.parametrize("environment", ["production", "prod", "prod-eu"])
def test_refused_in_production_like_preserve(tmp_path: Path, environment: str) -> None:
    text = f"environment: {environment}\n" + LEGACY
    with pytest.raises(ManifestError) as info:
        compile_text(text, path=str(tmp_path / "manifest.yaml"))
    [error] = info.value.errors
    assert error.code == "DPONE_MANIFEST_LEGACY_EXPORT_IN_PRODUCTION"
    assert error.pointer == "/quarantine/dir"
    assert "sink.options.dlq.directory" in error.fixes[0]
    # The warning is reported with the error: the fix and the migration are the same.
    assert [w.code for w in info.value.warnings] == ["DPONE_MANIFEST_DEPRECATED_KEY"]


def test_production_refusal_through_the_cli(tmp_path: Path) -> None:
    path = _write(tmp_path, "environment: production\n" + LEGACY)
    result = CliRunner().invoke(cli, ["validate", str(path), "--format", "json"])
    assert result.exit_code == 2
    doc = json.loads(result.stdout)
    assert schema_errors(doc, "dpone.validation.v1") == []
    [entry] = doc["manifests"]
    assert [e["code"] for e in entry["errors"]] == ["DPONE_MANIFEST_LEGACY_EXPORT_IN_PRODUCTION"]
    assert [w["code"] for w in entry["warnings"]] == ["DPONE_MANIFEST_DEPRECATED_KEY"]
    text = CliRunner().invoke(cli, ["validate", str(path)])
    assert text.exit_code == 2
    assert "error: DPONE_MANIFEST_LEGACY_EXPORT_IN_PRODUCTION" in text.stderr
    assert "Traceback" not in text.output


def test_not_refused_outside_production() -> None:
    plan = compile_text("environment: pre-prod\n" + LEGACY, path="/m/manifest.yaml")
    assert plan.quarantine_export == Path("/m/legacy_q")


def test_the_dlq_cannot_be_disabled_beside_the_export() -> None:
    text = LEGACY.replace("enforcement: quarantine", "enforcement: strict").replace(
        "  options:\n", "  options:\n    dlq: {enabled: false}\n", 1
    )
    with pytest.raises(ManifestError) as info:
        compile_text(text, path="/m/manifest.yaml")
    assert [(e.code, e.pointer) for e in info.value.errors] == [
        ("DPONE_MANIFEST_DLQ_DISABLED", "/sink/options/dlq/enabled")
    ]


@pytest.mark.parametrize(
    ("folder", "dlq"),
    [
        (".dpone", None),  # the work dir: the mapped DLQ clashes with it
        (".dpone/state", None),
        (".dpone", "dead"),  # the export alone in the work dir
        ("dead/q", "dead"),  # inside the DLQ root
        (".", "dead"),  # contains the work dir
    ],
)
def test_the_export_folder_stays_apart(folder: str, dlq: str | None) -> None:
    text = BASE + f"quarantine:\n  dir: {folder}\n"
    if dlq is not None:
        text = text.replace("  options:\n", f"  options:\n    dlq: {{directory: {dlq}}}\n", 1)
    with pytest.raises(ManifestError) as info:
        compile_text(text, path="/m/manifest.yaml")
    assert [(e.code, e.pointer) for e in info.value.errors] == [
        ("DPONE_MANIFEST_PATH_OVERLAP", "/quarantine/dir")
    ]


def test_the_export_may_be_the_named_dlq_folder() -> None:
    text = LEGACY.replace("  options:\n", "  options:\n    dlq: {directory: legacy_q}\n", 1)
    plan = compile_text(text, path="/m/manifest.yaml")
    assert plan.quarantine_export == Path(plan.sink.dlq.directory)


@pytest.mark.parametrize(
    ("section", "code"),
    [
        ("quarantine:\n  dir: q\n  keep: true\n", "DPONE_MANIFEST_UNKNOWN_KEY"),
        ("quarantine: {}\n", "DPONE_MANIFEST_MISSING_KEY"),
        ("quarantine:\n  dir: ''\n", "DPONE_MANIFEST_RANGE"),
    ],
)
def test_the_legacy_section_is_checked(section: str, code: str) -> None:
    with pytest.raises(ManifestError) as info:
        compile_text(BASE + section, path="/m/manifest.yaml")
    assert code in [e.code for e in info.value.errors]


def test_docs_name_the_key_its_replacement_and_the_window() -> None:
    manifest = (DOCS / "manifest.md").read_text(encoding="utf-8")
    for needle in (
        "quarantine.dir",
        "sink.options.dlq.directory",
        "DPONE_MANIFEST_DEPRECATED_KEY",
        "DPONE_MANIFEST_LEGACY_EXPORT_IN_PRODUCTION",
        f"dpone {REMOVED_IN}",
    ):
        assert needle in manifest, needle
    assert "QuarantineService" in (DOCS / "dlq.md").read_text(encoding="utf-8")
