"""The release gate against real evidence: bundles and DLQ indexes written by real dpone runs.

Three runs are made once per module (a clean strict run, a quarantine run with one bad row, a
strict run that fails on a bad row); each test copies the project it needs into its own
folder before it changes a byte, so the gate always reads files a run really wrote.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dpone.canonical import checksum, verify_checksum, with_checksum
from dpone.cli.main import cli
from dpone.dlq.index import fingerprint
from dpone.evidence.model import EVIDENCE_SCHEMA_ID
from dpone.manifest.compiler import compile_text
from dpone.ops.gate import (
    DATA_OUTCOMES,
    DEFAULT_ALLOWED_OUTCOMES,
    GATE_SCHEMA_ID,
    REPORT_JSON,
    REPORT_MD,
    SUBJECTS,
    BundleResult,
    GateCode,
    GatePolicy,
    GateReport,
    GateUsageError,
    evaluate,
    quarantine_ratio,
    write_report,
)
from dpone.published import load_schema, schema_errors
from dpone.runtime.lifecycle import run_pipeline
from dpone.testing import FrozenClock

#: A row value of every bad row: no gate output may ever contain it.
CANARY = "canary7f3e0c1b9d"
GOOD_ROWS = "id,amount\n1,10.00\n2,12.50\n3,4.00\n"
BAD_ROWS = f"id,amount\n1,10.00\n2,{CANARY}\n3,4.00\n"
MANIFEST = """\
kind: dpone.manifest.v1
name: gate_orders
runtime: {{work_dir: .dpone}}
source: {{type: file, format: csv, path: orders.csv}}
sink:
  type: duckdb
  dataset: analytics
  table: orders
  options:
    schema_contract:
      enforcement: {enforcement}
      columns:
        id: {{type: integer, nullable: false}}
        amount: {{type: decimal, precision: 10, scale: 2, nullable: false}}
    runtime_evidence: {{output_dir: .dpone/evidence}}
state: {{type: disabled}}
"""


@dataclass(frozen=True)
class Project:
    """One folder a real run wrote: manifest, CSV, ``.dpone/`` (DLQ, evidence)."""

    root: Path
    run_id: str

    @property
    def evidence(self) -> Path:
        return self.root / ".dpone" / "evidence" / "gate_orders" / self.run_id / EVIDENCE_FILE

    @property
    def index(self) -> Path:
        return self.root / ".dpone" / "dlq" / "runs" / self.run_id / "index.json"

    def doc(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.evidence.read_bytes())
        return loaded

    def index_doc(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.index.read_bytes())
        return loaded

    def copy_to(self, target: Path) -> Project:
        shutil.copytree(self.root, target, symlinks=True, ignore=shutil.ignore_patterns("*.duckdb"))
        return Project(target, self.run_id)

    def reseal_evidence(self, doc: dict[str, Any]) -> None:
        """Rewrite the bundle with a valid checksum: what a forger who knows the format does."""
        self.evidence.write_bytes(json.dumps(with_checksum(doc)).encode())

    def reseal_index(self, doc: dict[str, Any]) -> None:
        self.index.write_bytes(json.dumps(with_checksum(doc)).encode())


EVIDENCE_FILE = "data_contract_evidence.json"


def _run(base: Path, name: str, enforcement: str, rows: str) -> Project:
    root = base / name
    root.mkdir()
    (root / "orders.csv").write_text(rows, encoding="utf-8")
    plan = compile_text(MANIFEST.format(enforcement=enforcement), path=root / "manifest.yaml")
    report = run_pipeline(plan)
    project = Project(root, report.run_id)
    assert project.evidence.is_file()
    return project


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Project]:
    base = tmp_path_factory.mktemp("runs")
    return {
        "clean": _run(base, "clean", "strict", GOOD_ROWS),
        "quarantine": _run(base, "quarantine", "quarantine", BAD_ROWS),
        "failed": _run(base, "failed", "strict", BAD_ROWS),
    }


@pytest.fixture
def quarantined(runs: dict[str, Project], tmp_path: Path) -> Project:
    """A private copy of the quarantine run (one DLQ record), free to tamper with."""
    return runs["quarantine"].copy_to(tmp_path / "q")


CLOCK = FrozenClock("2026-03-01T12:00:00Z")
#: The quarantine run puts 1 of 3 rows in the DLQ, above the default 1%: the integrity tests
#: lift the ratio so that only what they tamper with shows.
LENIENT = GatePolicy(max_quarantine_ratio=Fraction(1))


def gate(
    tmp_path: Path,
    *bundles: Path,
    policy: GatePolicy | None = LENIENT,
    roots: tuple[Path, ...] = (),
) -> GateReport:
    return evaluate(bundles, policy, roots or (tmp_path,), cwd=tmp_path, clock=CLOCK)


def only(report: GateReport) -> BundleResult:
    assert len(report.bundles) == 1
    return report.bundles[0]


def codes(result: BundleResult) -> list[str]:
    return [f.code.value for f in result.findings]


def check_report(report: GateReport) -> dict[str, Any]:
    doc = report.to_json()
    assert schema_errors(doc, GATE_SCHEMA_ID) == []
    assert verify_checksum(doc)
    assert CANARY not in json.dumps(doc)
    return doc


# --- the runs are what the tests say they are ----------------------------------------------------


def test_the_runs_wrote_what_the_gate_is_tested_on(runs: dict[str, Project]) -> None:
    clean, quarantine, failed = runs["clean"].doc(), runs["quarantine"].doc(), runs["failed"].doc()
    assert (clean["data_outcome"], clean["dlq"]["index_ref"]) == ("passed", None)
    assert quarantine["data_outcome"] == "passed_with_quarantine"
    assert quarantine["dlq"]["record_count"] == 1
    assert runs["quarantine"].index_doc()["status"] == "closed"
    assert (failed["execution_status"], failed["data_outcome"]) == ("failed", "failed_quality_gate")
    for project in runs.values():
        assert schema_errors(project.doc(), EVIDENCE_SCHEMA_ID) == []


# --- passing ------------------------------------------------------------------------------------


def test_a_clean_run_passes(runs: dict[str, Project], tmp_path: Path) -> None:
    report = gate(tmp_path, runs["clean"].evidence, roots=(runs["clean"].root,))

    assert report.decision == "pass"
    result = only(report)
    assert result.findings == ()
    doc = check_report(report)
    bundle = doc["bundles"][0]
    assert bundle["run_id"] == runs["clean"].run_id
    assert bundle["evidence_sha256"] == runs["clean"].doc()["sha256"]
    assert (bundle["rows_read"], bundle["quarantine_ratio"], bundle["dlq_records"]) == (3, 0, None)
    assert doc["generated_at"] == "2026-03-01T12:00:00.000000Z"
    assert doc["policy"]["allowed_outcomes"] == list(DEFAULT_ALLOWED_OUTCOMES)


def test_a_quarantine_run_passes_with_its_index_verified(
    quarantined: Project, tmp_path: Path
) -> None:
    report = gate(tmp_path, quarantined.evidence)

    result = only(report)
    assert result.findings == ()
    assert result.dlq_records == 1
    assert result.quarantine_ratio == Fraction(1, 3)


def test_several_bundles_block_together(
    runs: dict[str, Project], quarantined: Project, tmp_path: Path
) -> None:
    clean = runs["clean"].copy_to(tmp_path / "clean")
    quarantined.index.unlink()

    report = gate(tmp_path, clean.evidence, quarantined.evidence)

    assert report.decision == "blocked"
    assert [b.decision for b in report.bundles] == ["pass", "blocked"]
    check_report(report)


# --- integrity of the bundle ------------------------------------------------------------------


def test_one_byte_changed_is_a_checksum_mismatch(quarantined: Project, tmp_path: Path) -> None:
    data = bytearray(quarantined.evidence.read_bytes())
    at = data.index(b'"manifest_fingerprint": "sha256:') + len(b'"manifest_fingerprint": "sha256:')
    data[at] = ord("0") if data[at] != ord("0") else ord("1")  # still a valid hex digit
    quarantined.evidence.write_bytes(bytes(data))

    result = only(gate(tmp_path, quarantined.evidence))

    assert codes(result) == ["DPONE_GATE_CHECKSUM_MISMATCH"]
    assert result.evidence is None  # nothing a tampered bundle says is reported as fact
    assert result.to_json()["run_id"] is None


def test_a_bundle_that_breaks_its_schema_is_blocked(quarantined: Project, tmp_path: Path) -> None:
    doc = quarantined.doc()
    doc["data_outcome"] = "looks_fine"
    quarantined.reseal_evidence(doc)

    result = only(gate(tmp_path, quarantined.evidence))

    assert codes(result) == ["DPONE_GATE_SCHEMA_INVALID"]
    assert result.findings[0].pointer == "/data_outcome"
    assert "looks_fine" not in result.findings[0].message


def test_a_bundle_that_is_not_json_is_unreadable(quarantined: Project, tmp_path: Path) -> None:
    quarantined.evidence.write_bytes(quarantined.evidence.read_bytes()[:-40])

    assert codes(only(gate(tmp_path, quarantined.evidence))) == ["DPONE_GATE_UNREADABLE"]


# --- the DLQ index ------------------------------------------------------------------------------


def test_a_missing_dlq_index_blocks(quarantined: Project, tmp_path: Path) -> None:
    quarantined.index.unlink()

    result = only(gate(tmp_path, quarantined.evidence))

    assert codes(result) == ["DPONE_GATE_DLQ_INDEX_MISSING"]
    assert result.findings[0].subject == "dlq_index"


def test_a_tampered_dlq_index_blocks(quarantined: Project, tmp_path: Path) -> None:
    quarantined.index.write_bytes(quarantined.index.read_bytes().replace(b'"closed"', b'"cl0sed"'))

    result = only(gate(tmp_path, quarantined.evidence))

    assert codes(result) == ["DPONE_GATE_CHECKSUM_MISMATCH"]
    assert (result.findings[0].subject, result.findings[0].pointer) == ("dlq_index", "/sha256")


def test_a_resealed_index_with_other_records_is_a_fingerprint_mismatch(
    quarantined: Project, tmp_path: Path
) -> None:
    index = quarantined.index_doc()
    index["records"][0]["sha256"] = checksum({"another": "record"})
    index["fingerprint"] = fingerprint((e["record_id"], e["sha256"]) for e in index["records"])
    quarantined.reseal_index(index)

    result = only(gate(tmp_path, quarantined.evidence))

    assert codes(result) == ["DPONE_GATE_DLQ_INDEX_MISMATCH"]
    assert result.findings[0].pointer == "/dlq/index_fingerprint"


def test_a_resealed_bundle_with_another_record_count_is_a_mismatch(
    quarantined: Project, tmp_path: Path
) -> None:
    doc = quarantined.doc()
    doc["dlq"]["record_count"] = 0
    quarantined.reseal_evidence(doc)

    result = only(gate(tmp_path, quarantined.evidence))

    assert codes(result) == ["DPONE_GATE_DLQ_INDEX_MISMATCH"]
    assert result.findings[0].pointer == "/dlq/record_count"


def test_a_succeeded_run_needs_a_closed_index(quarantined: Project, tmp_path: Path) -> None:
    index = quarantined.index_doc()
    index["status"], index["status_reason"] = "aborted", "run_failed"
    quarantined.reseal_index(index)

    result = only(gate(tmp_path, quarantined.evidence))

    assert sorted(codes(result)) == [
        "DPONE_GATE_DLQ_INDEX_MISMATCH",  # the bundle says closed
        "DPONE_GATE_DLQ_INDEX_NOT_CLOSED",
    ]


def test_an_index_that_breaks_its_schema_is_blocked(quarantined: Project, tmp_path: Path) -> None:
    index = quarantined.index_doc()
    index["records"][0]["code"] = ["not", "a", "code"]
    quarantined.reseal_index(index)

    result = only(gate(tmp_path, quarantined.evidence))

    assert codes(result) == ["DPONE_GATE_SCHEMA_INVALID"]
    assert result.findings[0].subject == "dlq_index"


def test_dead_letters_without_an_index_block(quarantined: Project, tmp_path: Path) -> None:
    doc = quarantined.doc()
    doc["dlq"]["index_ref"] = None
    quarantined.reseal_evidence(doc)

    result = only(gate(tmp_path, quarantined.evidence))

    assert codes(result) == ["DPONE_GATE_DLQ_INDEX_MISSING"]
    assert result.findings[0].pointer == "/dlq/index_ref"


# --- policy -------------------------------------------------------------------------------------


def test_a_quarantine_ratio_over_the_limit_blocks(quarantined: Project, tmp_path: Path) -> None:
    strict = GatePolicy.parse((), "0.3333")
    exact = GatePolicy.parse((), "1/3")

    assert codes(only(gate(tmp_path, quarantined.evidence, policy=strict))) == [
        "DPONE_GATE_QUARANTINE_RATIO"
    ]
    assert only(gate(tmp_path, quarantined.evidence, policy=exact)).findings == ()


def test_the_ratio_is_exact_and_zero_without_rows() -> None:
    assert quarantine_ratio({"summary": {"rows_read": 0, "rows_quarantined": 0}}) == 0
    # 3/10 is not below the float 0.3; an exact comparison must not block at the limit.
    assert quarantine_ratio({"summary": {"rows_read": 10, "rows_quarantined": 3}}) <= (
        GatePolicy.parse((), "0.3").max_quarantine_ratio
    )


def test_an_outcome_the_policy_does_not_allow_blocks(quarantined: Project, tmp_path: Path) -> None:
    policy = GatePolicy.parse(("passed",), "1")

    result = only(gate(tmp_path, quarantined.evidence, policy=policy))

    assert codes(result) == ["DPONE_GATE_OUTCOME_NOT_ALLOWED"]


def test_a_failed_run_is_blocked(runs: dict[str, Project], tmp_path: Path) -> None:
    failed = runs["failed"]
    lenient = GatePolicy.parse(DATA_OUTCOMES, None)

    result = only(gate(tmp_path, failed.evidence, policy=None, roots=(failed.root,)))
    allowed = only(gate(tmp_path, failed.evidence, policy=lenient, roots=(failed.root,)))

    assert codes(result) == ["DPONE_GATE_EXECUTION_FAILED", "DPONE_GATE_OUTCOME_NOT_ALLOWED"]
    assert codes(allowed) == ["DPONE_GATE_EXECUTION_FAILED"]  # no policy releases a failed run


@pytest.mark.parametrize(
    ("outcomes", "ratio"),
    [(("fine",), None), ((), "1.5"), ((), "-0.1"), ((), "nan"), ((), "a lot"), ((), "1/0")],
)
def test_bad_policy_values_are_usage_errors(outcomes: tuple[str, ...], ratio: str | None) -> None:
    with pytest.raises(GateUsageError) as caught:
        GatePolicy.parse(outcomes, ratio)
    assert caught.value.code == "DPONE_GATE_POLICY_INVALID"
    assert caught.value.exit_code == 2


# --- paths --------------------------------------------------------------------------------------


def test_a_symlinked_bundle_is_refused(quarantined: Project, tmp_path: Path) -> None:
    link = tmp_path / "evidence.json"
    link.symlink_to(quarantined.evidence)

    result = only(gate(tmp_path, link))

    assert codes(result) == ["DPONE_GATE_PATH_REFUSED"]
    assert result.findings[0].message == "the bundle is a symbolic link"


def test_a_symlinked_folder_under_the_root_is_refused(quarantined: Project, tmp_path: Path) -> None:
    link = tmp_path / "latest"
    link.symlink_to(quarantined.evidence.parent, target_is_directory=True)

    result = only(gate(tmp_path, link / EVIDENCE_FILE))

    assert codes(result) == ["DPONE_GATE_PATH_REFUSED"]


def test_a_root_that_is_a_symlink_is_the_operators_choice(
    quarantined: Project, tmp_path: Path
) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(quarantined.root, target_is_directory=True)
    bundle = alias / quarantined.evidence.relative_to(quarantined.root)

    assert only(gate(tmp_path, bundle, roots=(alias,))).findings == ()


def test_a_bundle_outside_the_roots_is_refused(quarantined: Project, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    result = only(gate(tmp_path, quarantined.evidence, roots=(elsewhere,)))

    assert codes(result) == ["DPONE_GATE_PATH_REFUSED"]
    assert result.findings[0].message == "the bundle is outside every --root"


def test_a_dlq_index_outside_the_roots_is_refused(quarantined: Project, tmp_path: Path) -> None:
    evidence_root = quarantined.root / ".dpone" / "evidence"

    result = only(gate(tmp_path, quarantined.evidence, roots=(evidence_root,)))

    assert codes(result) == ["DPONE_GATE_PATH_REFUSED"]
    assert result.findings[0].subject == "dlq_index"


def test_a_symlinked_dlq_run_folder_is_refused(quarantined: Project, tmp_path: Path) -> None:
    run_dir = quarantined.index.parent
    moved = tmp_path / "moved-run"
    run_dir.rename(moved)
    run_dir.symlink_to(moved, target_is_directory=True)

    result = only(gate(tmp_path, quarantined.evidence))

    assert codes(result) == ["DPONE_GATE_PATH_REFUSED"]
    assert result.findings[0].subject == "dlq_index"


def test_a_folder_is_not_a_bundle(quarantined: Project, tmp_path: Path) -> None:
    result = only(gate(tmp_path, quarantined.evidence.parent))

    assert codes(result) == ["DPONE_GATE_PATH_REFUSED"]


def test_usage_errors(quarantined: Project, tmp_path: Path) -> None:
    with pytest.raises(GateUsageError) as none:
        evaluate([], cwd=tmp_path)
    with pytest.raises(GateUsageError) as missing:
        evaluate(["nope/data_contract_evidence.json"], cwd=tmp_path)
    with pytest.raises(GateUsageError) as no_root:
        evaluate([quarantined.evidence], roots=["no-such-root"], cwd=tmp_path)
    found = [e.value.code for e in (none, missing, no_root)]
    assert found == [
        "DPONE_GATE_NO_EVIDENCE",
        "DPONE_GATE_EVIDENCE_NOT_FOUND",
        "DPONE_GATE_ROOT_NOT_FOUND",
    ]


# --- the report ---------------------------------------------------------------------------------


def test_the_report_is_written_atomically_and_validates(
    quarantined: Project, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    first = check_report(gate(tmp_path, quarantined.evidence))
    write_report(first, out)
    quarantined.index.unlink()
    second = check_report(gate(tmp_path, quarantined.evidence))
    write_report(second, out)  # a rerun replaces the report

    written = json.loads((out / REPORT_JSON).read_bytes())
    assert written == second
    assert schema_errors(written, GATE_SCHEMA_ID) == []
    assert verify_checksum(written)
    markdown = (out / REPORT_MD).read_text(encoding="utf-8")
    assert markdown.startswith("# Release gate — BLOCKED")
    assert "DPONE_GATE_DLQ_INDEX_MISSING" in markdown
    assert sorted(p.name for p in out.iterdir()) == [REPORT_JSON, REPORT_MD]  # no temp files


def test_vocabularies_match_the_schema() -> None:
    schema = load_schema(GATE_SCHEMA_ID)
    finding = schema["$defs"]["finding"]["properties"]
    assert finding["code"]["enum"] == [c.value for c in GateCode]
    assert finding["subject"]["enum"] == list(SUBJECTS)
    assert schema["$defs"]["outcome"]["enum"] == list(DATA_OUTCOMES)
    evidence = load_schema(EVIDENCE_SCHEMA_ID)["properties"]
    assert evidence["data_outcome"]["enum"] == list(DATA_OUTCOMES)


def test_the_schema_is_published_and_described() -> None:
    schema = load_schema(GATE_SCHEMA_ID)
    assert schema["$id"] == f"https://dpone.dev/schemas/{GATE_SCHEMA_ID}.schema.json"
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"

    def objects(node: Any) -> Iterator[dict[str, Any]]:
        if isinstance(node, dict):
            if "properties" in node:
                yield node
            for value in node.values():
                yield from objects(value)
        elif isinstance(node, list):
            for value in node:
                yield from objects(value)

    found = list(objects(schema))
    assert len(found) == 4  # the document, its policy, a bundle, a finding
    for obj in found:
        assert obj["additionalProperties"] is False
        assert set(obj["required"]) == set(obj["properties"])
        assert all(prop.get("description", "").strip() for prop in obj["properties"].values())


# --- the command --------------------------------------------------------------------------------


def invoke(cwd: Path, *args: str) -> tuple[int, str, str]:
    """``dpone ops release-gate ARGS`` run from ``cwd``."""
    here = Path.cwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(cli, ["ops", "release-gate", *args], catch_exceptions=False)
    finally:
        os.chdir(here)
    return result.exit_code, result.stdout, result.stderr


def relative(project: Project, path: Path) -> str:
    return str(path.relative_to(project.root))


def test_cli_pass_writes_the_report_in_the_current_directory(quarantined: Project) -> None:
    code, out, _ = invoke(
        quarantined.root,
        relative(quarantined, quarantined.evidence),
        "--max-quarantine-ratio",
        "0.5",
        "--format",
        "json",
    )

    assert code == 0
    doc = json.loads(out)
    assert doc["decision"] == "pass"
    assert doc["policy"]["roots"] == ["."]
    assert schema_errors(doc, GATE_SCHEMA_ID) == []
    assert json.loads((quarantined.root / REPORT_JSON).read_bytes()) == doc
    assert (quarantined.root / REPORT_MD).is_file()


def test_cli_blocked_exits_1_with_markdown(quarantined: Project, tmp_path: Path) -> None:
    out_dir = tmp_path / "gate-out"
    code, out, _ = invoke(
        quarantined.root,
        relative(quarantined, quarantined.evidence),
        "--max-quarantine-ratio",
        "0.1",
        "--allow-outcome",
        "passed",
        "--output",
        str(out_dir),
    )

    assert code == 1
    assert out.startswith("# Release gate — BLOCKED")
    assert "DPONE_GATE_QUARANTINE_RATIO" in out
    assert "DPONE_GATE_OUTCOME_NOT_ALLOWED" in out
    assert CANARY not in out
    written = json.loads((out_dir / REPORT_JSON).read_bytes())
    assert schema_errors(written, GATE_SCHEMA_ID) == []
    assert written["policy"]["max_quarantine_ratio"] == 0.1
    assert (out_dir / REPORT_MD).read_text(encoding="utf-8") == out


def test_cli_refuses_a_bundle_outside_its_root(quarantined: Project, tmp_path: Path) -> None:
    code, out, _ = invoke(
        tmp_path, str(quarantined.evidence), "--root", "q/.dpone/dlq", "--format", "json"
    )

    assert code == 1
    assert json.loads(out)["bundles"][0]["findings"][0]["code"] == GateCode.PATH_REFUSED.value


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), "DPONE_GATE_NO_EVIDENCE"),
        (("missing.json",), "DPONE_GATE_EVIDENCE_NOT_FOUND"),
        (("BUNDLE", "--max-quarantine-ratio", "2"), "DPONE_GATE_POLICY_INVALID"),
        (("BUNDLE", "--allow-outcome", "mostly_fine"), "DPONE_GATE_POLICY_INVALID"),
        (("BUNDLE", "--root", "no-such-folder"), "DPONE_GATE_ROOT_NOT_FOUND"),
    ],
)
def test_cli_usage_errors_exit_2(
    quarantined: Project, args: tuple[str, ...], expected: str
) -> None:
    bundle = relative(quarantined, quarantined.evidence)
    argv = [bundle if a == "BUNDLE" else a for a in args]

    code, out, _ = invoke(quarantined.root, *argv, "--format", "json")

    assert code == 2
    error = json.loads(out)
    assert schema_errors(error, "dpone.error.v1") == []
    assert error["code"] == expected
    assert not (quarantined.root / REPORT_JSON).exists()  # nothing is written on a usage error
