"""Keyed signatures: a forger who can write the work dir but has no key is caught."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from dpone.canonical import with_checksum
from dpone.signing import key_id_of, keyring_from, signature_of
from tests.support.dlqfiles import reseal_index
from tests.support.processes import dpone_subprocess

KEY = "k" * 40
ENV = {"DPONE_SIGNING_KEY": KEY}
MANIFEST = """\
name: signed_orders
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
"""


def run(tmp_path: Path, env: dict[str, str]) -> tuple[Path, Path]:
    (tmp_path / "manifest.yaml").write_text(MANIFEST)
    (tmp_path / "rows.csv").write_text("id\n1\nx\n3\ny\nz\n")
    ran = dpone_subprocess(["run", "manifest.yaml", "--format", "json"], cwd=tmp_path, env=env)
    assert ran.returncode == 0, ran.stderr
    assert KEY not in ran.stdout + ran.stderr
    report = json.loads(ran.stdout)
    evidence = next((tmp_path / ".dpone" / "evidence").rglob("data_contract_evidence.json"))
    index = tmp_path / ".dpone" / "dlq" / "runs" / report["run_id"] / "index.json"
    return evidence, index


def gate(tmp_path: Path, evidence: Path, env: dict[str, str], *extra: str) -> tuple[int, list[str]]:
    # The run quarantines rows on purpose: the ratio limit is lifted so only signatures show.
    args = ["ops", "release-gate", str(evidence.relative_to(tmp_path)), "--format", "json"]
    args += ["--max-quarantine-ratio", "1"]
    proc = dpone_subprocess([*args, *extra], cwd=tmp_path, env=env)
    assert KEY not in proc.stdout + proc.stderr
    if proc.returncode == 2:
        return 2, [json.loads(proc.stdout)["code"]]
    doc = json.loads(proc.stdout)
    return proc.returncode, [f["code"] for b in doc["bundles"] for f in b["findings"]]


def drop_first_record(index_path: Path, *, rebuild_index: bool) -> None:
    """The forger: edits a record out of its segment and re-seals what it can without a key."""
    doc = json.loads(index_path.read_bytes())
    segment = doc["segments"][0]
    seg_path = index_path.parent / "segments" / segment["name"]
    lines = seg_path.read_bytes().splitlines(keepends=True)
    data = b"".join(lines[1:])
    seg_path.chmod(0o644)
    seg_path.unlink()
    seg_path.write_bytes(data)
    if not rebuild_index:
        return
    forged = reseal_index(index_path.parents[2], doc["run_id"])
    evidence_path = next(index_path.parents[4].rglob("data_contract_evidence.json"))
    bundle = json.loads(evidence_path.read_bytes())
    bundle.pop("signature", None)
    bundle["dlq"]["record_count"] -= 1
    bundle["dlq"]["reasons"] = forged["reason_counts"]
    bundle["dlq"]["index_fingerprint"] = forged["fingerprint"]
    bundle["summary"]["rows_quarantined"] -= 1
    evidence_path.chmod(0o644)
    evidence_path.write_bytes(orjson.dumps(with_checksum(bundle)))


def test_signed_documents_carry_a_verifying_signature(tmp_path: Path) -> None:
    evidence, index = run(tmp_path, ENV)
    state = tmp_path / ".dpone" / "state" / "signed_orders.json"
    ring = keyring_from(ENV)
    for path in (evidence, index, state):
        doc = json.loads(path.read_bytes())
        assert doc["signature"]["key_id"] == key_id_of(KEY.encode())
        assert ring.current is not None
        assert signature_of(doc, ring.current) == doc["signature"]
    assert gate(tmp_path, evidence, ENV, "--require-signature") == (0, [])
    verify = ["ops", "dlq", "verify", "--dir", ".dpone/dlq", "--require-signature"]
    assert dpone_subprocess(verify, cwd=tmp_path, env=ENV).returncode == 0


def test_a_record_edited_out_of_a_segment_is_caught_even_unsigned(tmp_path: Path) -> None:
    evidence, index = run(tmp_path, {})
    assert gate(tmp_path, evidence, {}) == (0, [])
    drop_first_record(index, rebuild_index=False)
    assert gate(tmp_path, evidence, {}) == (1, ["DPONE_GATE_DLQ_RECORDS_MISMATCH"])


def test_a_fully_rebuilt_forgery_is_caught_only_by_require_signature(tmp_path: Path) -> None:
    evidence, index = run(tmp_path, ENV)
    drop_first_record(index, rebuild_index=True)
    # Consistent checksums everywhere: without a key nothing can tell.
    assert gate(tmp_path, evidence, {}) == (0, [])
    assert gate(tmp_path, evidence, ENV, "--require-signature") == (
        1,
        ["DPONE_GATE_SIGNATURE_MISSING"],
    )
    verify = ["ops", "dlq", "verify", "--dir", ".dpone/dlq", "--require-signature", "--format"]
    proc = dpone_subprocess([*verify, "json"], cwd=tmp_path, env=ENV)
    assert proc.returncode == 1
    codes = [f["code"] for f in json.loads(proc.stdout)["findings"]]
    assert codes == ["DPONE_DLQ_INDEX_SIGNATURE_INVALID"]


def test_a_forged_signature_is_invalid_and_an_old_key_verifies_after_rotation(
    tmp_path: Path,
) -> None:
    evidence, _ = run(tmp_path, ENV)
    doc = json.loads(evidence.read_bytes())
    new_key = {"DPONE_SIGNING_KEY": "n" * 40}
    assert gate(tmp_path, evidence, new_key, "--require-signature") == (
        1,
        ["DPONE_GATE_SIGNATURE_INVALID"],
    )
    keys = tmp_path / "retired.json"
    keys.write_text(json.dumps({doc["signature"]["key_id"]: KEY}))
    rotated = new_key | {"DPONE_SIGNING_KEYS_FILE": str(keys)}
    assert gate(tmp_path, evidence, rotated, "--require-signature") == (0, [])
    doc["signature"]["value"] = "0" * 64
    evidence.chmod(0o644)
    evidence.write_bytes(orjson.dumps(doc))
    assert gate(tmp_path, evidence, ENV) == (1, ["DPONE_GATE_SIGNATURE_INVALID"])


def test_require_signature_without_a_key_is_a_usage_error(tmp_path: Path) -> None:
    evidence, _ = run(tmp_path, {})
    assert gate(tmp_path, evidence, {}, "--require-signature") == (
        2,
        ["DPONE_SIGNING_KEY_REQUIRED"],
    )


def test_a_state_file_rewound_without_the_key_is_refused(tmp_path: Path) -> None:
    run(tmp_path, ENV)
    state = tmp_path / ".dpone" / "state" / "signed_orders.json"
    doc = json.loads(state.read_bytes())
    doc["revision"] = 0
    state.write_bytes(orjson.dumps(with_checksum({k: v for k, v in doc.items()})))
    proc = dpone_subprocess(["run", "manifest.yaml", "--format", "json"], cwd=tmp_path, env=ENV)
    assert proc.returncode != 0
    assert json.loads(proc.stdout)["code"] == "DPONE_STATE_SIGNATURE_INVALID"
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("env", "code"),
    [
        ({"DPONE_SIGNING_KEY": "short"}, "DPONE_SIGNING_CONFIG"),
        ({"DPONE_SIGNING_KEY": KEY, "DPONE_SIGNING_KEY_FILE": "/x"}, "DPONE_SIGNING_CONFIG"),
        ({"DPONE_SIGNING_KEY_FILE": "/no/such/file"}, "DPONE_SIGNING_CONFIG"),
    ],
)
def test_unusable_key_settings_are_typed_and_never_echo_the_key(
    tmp_path: Path, env: dict[str, str], code: str
) -> None:
    (tmp_path / "manifest.yaml").write_text(MANIFEST)
    (tmp_path / "rows.csv").write_text("id\n1\n")
    proc = dpone_subprocess(["run", "manifest.yaml", "--format", "json"], cwd=tmp_path, env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["code"] == code
    assert KEY not in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
