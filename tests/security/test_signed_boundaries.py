"""What dpone writes for itself is bound to the signing key; recovery, repair, retention and
the gate act on nothing that does not verify.

The attacker can write the work dir, the sink folder or the DLQ folder, but does not hold the
key. Each test performs the attack through the CLI (``python -m dpone`` in a process of its
own), asserts the typed error, that no forged document ends up carrying a valid signature,
that nothing outside the folders dpone may write changed, and that an honest run (or apply)
works afterwards.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from dpone.canonical import with_checksum
from dpone.dlq.index import fingerprint
from dpone.dlq.store import DlqStore
from dpone.signing import keyring_from, problem
from dpone.testing import FrozenClock
from tests.replay.test_retention import LATER, ack, rows
from tests.security.test_read_back import (
    PIPELINE,
    assert_succeeds,
    error_of,
    make_project,
    snapshot,
)
from tests.support.dlqfiles import record_ids_on_disk
from tests.support.processes import CliRun, dpone_killed_at, dpone_subprocess
from tests.support.replay_pipeline import FIRST_LOAD, REPLAYED, T0, Pipeline

KEY = "s" * 40
WITH_KEY = {"DPONE_SIGNING_KEY": KEY}
RING = keyring_from(WITH_KEY)


def cli(cwd: Path, env: dict[str, str], *args: str) -> CliRun:
    proc = dpone_subprocess([*args, "--format", "json"], cwd=cwd, env=env, timeout=120)
    return CliRun(proc.returncode, proc.stdout, proc.stderr)


def run(project: Path, env: dict[str, str]) -> CliRun:
    return cli(project, env, "run", "manifest.yaml")


def validly_signed(doc: dict[str, Any]) -> bool:
    return "signature" in doc and problem(doc, RING, require=True, what="doc") is None


def unsigned(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` rebuilt by someone without the key: checksum recomputed, no signature."""
    out = {k: v for k, v in doc.items() if k not in ("sha256", "signature")}
    return with_checksum(out)


def read(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def journal_of(project: Path) -> Path:
    return project / ".dpone" / "runs" / f"{PIPELINE}.journal.json"


def incremental_project(root: Path) -> Path:
    project = root / "proj"
    (project / "data").mkdir(parents=True)
    (project / "data" / "a.csv").write_text("id,ts\n1,2026-01-01\n2,2026-01-02\n")
    (project / "manifest.yaml").write_text(
        f"""name: {PIPELINE}
source: {{type: file, format: csv, path: data/*.csv, incremental: {{cursor_column: ts}}}}
sink:
  type: filesystem
  path: lake
  dataset: ds
  table: t
  options:
    schema_contract:
      enforcement: quarantine
      columns:
        id: {{type: integer}}
        ts: {{type: string}}
      evolution: {{tables: evolve, columns: evolve, data_type: freeze}}
"""
    )
    return project


# --- the journal ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "code"),
    [(WITH_KEY, "DPONE_JOURNAL_SIGNATURE_INVALID"), ({}, "DPONE_RECOVERY_MISMATCH")],
    ids=["key", "no_key"],
)
def test_a_forged_journal_never_gets_evidence_published(
    tmp_path: Path, env: dict[str, str], code: str
) -> None:
    project = make_project(tmp_path)
    first = assert_succeeds(run(project, env))
    journal = journal_of(project)
    evidence = read(project / first["evidence"])
    evidence = {k: v for k, v in evidence.items() if k not in ("sha256", "signature")}
    # "A run that died after its sink commit", under a run id of the attacker's, which passed.
    evidence.update(run_id="FORGED0001", data_outcome="passed")
    evidence["dlq"] = dict(evidence["dlq"], index_ref=None)
    doc = read(journal)
    doc.update(phase="running", run_id="FORGED0001", load_id=first["load_id"], evidence=evidence)
    journal.write_text(json.dumps(unsigned(doc)))
    allowed = (project / ".dpone" / "runs", project / ".dpone" / "dlq")
    before = snapshot(tmp_path, allowed=allowed)

    failed = run(project, env)

    assert failed.exit_code == 1
    error = error_of(failed)
    assert error["code"] == code
    assert "runs/" in error["message"]
    assert not (project / ".dpone" / "evidence" / PIPELINE / "FORGED0001").exists()
    assert snapshot(tmp_path, allowed=allowed) == before
    # The fix: move the journal aside, rerun.
    journal.rename(tmp_path / "journal.moved-aside")
    second = assert_succeeds(run(project, env))
    if env:
        assert validly_signed(read(journal_of(project)))
        assert validly_signed(read(project / second["evidence"]))


def test_a_journal_never_aborts_another_loads_dlq_run(tmp_path: Path) -> None:
    """Without a key: a journal edited to name a committed run's DLQ run under a load that
    never committed would have recovery abort that run (its records never replayable)."""
    project = make_project(tmp_path)
    first = assert_succeeds(run(project, {}))
    index = project / ".dpone" / "dlq" / "runs" / first["run_id"] / "index.json"
    index_bytes = index.read_bytes()
    journal = journal_of(project)
    doc = read(journal)
    doc.update(phase="running", load_id="NEVERCOMMITTED01", evidence=None, unplaced=None)
    journal.write_text(json.dumps(unsigned(doc)))

    failed = run(project, {})

    assert failed.exit_code == 1
    assert error_of(failed)["code"] == "DPONE_RECOVERY_MISMATCH"
    assert index.read_bytes() == index_bytes
    assert read(index)["status"] == "closed"
    journal.rename(tmp_path / "journal.moved-aside")
    assert_succeeds(run(project, {}))


@pytest.mark.parametrize(
    ("env", "code"),
    [(WITH_KEY, "DPONE_SINK_MARKER_INVALID"), ({}, "DPONE_RECOVERY_MISMATCH")],
    ids=["key", "no_key"],
)
def test_a_planted_marker_never_moves_the_cursor(
    tmp_path: Path, env: dict[str, str], code: str
) -> None:
    project = incremental_project(tmp_path)
    assert_succeeds(run(project, env))
    state_path = project / ".dpone" / "state" / f"{PIPELINE}.json"
    state_before = read(state_path)
    (project / "data" / "b.csv").write_text("id,ts\n3,2026-01-03\n")
    # A run that dies just before its sink commit: its journal holds the evidence it computed.
    dpone_killed_at("before_sink_commit", ["run", "manifest.yaml"], cwd=project, env=env)
    entry = read(journal_of(project))
    assert entry["phase"] == "running"
    assert entry["evidence"] is not None
    lake = project / "lake"
    real = read(next((lake / "_dpone_loads").glob("*.json")))
    token = read(lake / "_dpone_staging" / entry["load_id"] / "_load.json")["token"]
    marker = dict(
        real,
        load_id=entry["load_id"],
        run_id=entry["run_id"],
        seq=real["seq"] + 1,
        staging_token=token,
        cursor_to="2099-12-31",
        adds=[],
        removes=[],
    )
    planted = lake / "_dpone_loads" / f"{entry['load_id']}.json"
    planted.write_text(json.dumps(unsigned(marker)))
    before = snapshot(tmp_path, allowed=(project / ".dpone", lake))

    failed = run(project, env)

    assert failed.exit_code == 1
    assert error_of(failed)["code"] == code
    assert read(state_path)["cursor"] == state_before["cursor"]
    assert snapshot(tmp_path, allowed=(project / ".dpone", lake)) == before
    # The fix: the planted marker goes; the dead run is rolled back and its row loaded once.
    planted.rename(tmp_path / "marker.moved-aside")
    report = assert_succeeds(run(project, env))
    assert [r["action"] for r in report["recovered"]] == ["rolled_back"]
    state = read(state_path)
    assert state["cursor"]["value"] == "2026-01-03"
    if env:
        assert validly_signed(state)


# --- the DLQ index: repair and recovery sign nothing forged ------------------------------------


def _forge_open_index(project: Path, run_id: str) -> Path:
    """The run's closed index turned into an ``open`` one that lists nothing, without the key:
    repairing or recovering it would adopt the segments and sign the result."""
    path = project / ".dpone" / "dlq" / "runs" / run_id / "index.json"
    doc = read(path)
    doc.update(
        status="open",
        status_reason=None,
        records=[],
        segments=[],
        record_count=0,
        reason_counts={},
        fingerprint=fingerprint([]),
        owner=None,
    )
    path.write_text(json.dumps(unsigned(doc)))
    return path


def test_repair_and_recovery_never_sign_a_forged_open_index(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    first = assert_succeeds(run(project, WITH_KEY))
    forged = _forge_open_index(project, first["run_id"])
    forged_bytes = forged.read_bytes()
    verify = ("ops", "dlq", "verify", "--dir", ".dpone/dlq", "--repair")

    repaired = cli(project, WITH_KEY, *verify)

    assert repaired.exit_code == 1
    doc = repaired.doc
    assert doc["repaired"] == []
    assert "DPONE_DLQ_INDEX_SIGNATURE_INVALID" in {f["code"] for f in doc["findings"]}
    assert forged.read_bytes() == forged_bytes
    # A run's recovery (every open DLQ run of the pipeline whose writer is gone) skips it too.
    assert_succeeds(run(project, WITH_KEY))
    assert forged.read_bytes() == forged_bytes
    assert not validly_signed(read(forged))
    # --allow-unsigned is the operator's explicit choice: then repair closes it as aborted.
    allowed = cli(project, WITH_KEY, *verify, "--allow-unsigned")
    assert allowed.exit_code == 0, allowed.stdout + allowed.stderr
    closed = read(forged)
    assert (closed["status"], closed["record_count"]) == ("aborted", 1)


# --- the release gate and verify: signatures required by default with a key ---------------------


def _strip(path: Path) -> None:
    path.write_text(json.dumps({k: v for k, v in read(path).items() if k != "signature"}))


#: The project's run quarantines rows on purpose: the gate's default 1% limit is lifted so that
#: only what these tests change shows.
LIFTED = ("--max-quarantine-ratio", "1")


def test_stripped_signatures_are_refused_by_default_with_a_key(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    first = assert_succeeds(run(project, WITH_KEY))
    bundle = project / first["evidence"]
    index = project / ".dpone" / "dlq" / "runs" / first["run_id"] / "index.json"
    _strip(bundle)
    _strip(index)
    gate = ("ops", "release-gate", first["evidence"], "--output", "gate", *LIFTED)
    verify = ("ops", "dlq", "verify", "--dir", ".dpone/dlq")

    blocked = cli(project, WITH_KEY, *gate)
    assert blocked.exit_code == 1
    [result] = blocked.doc["bundles"]
    assert [f["code"] for f in result["findings"]] == ["DPONE_GATE_SIGNATURE_MISSING"]
    assert blocked.doc["policy"]["require_signature"] is True
    refused = cli(project, WITH_KEY, *verify)
    assert refused.exit_code == 1
    assert {f["code"] for f in refused.doc["findings"]} == {"DPONE_DLQ_INDEX_SIGNATURE_INVALID"}
    # --require-signature is accepted and changes nothing once a key is configured.
    assert cli(project, WITH_KEY, *gate, "--require-signature").exit_code == 1

    # The opt-out; a forged signature is refused all the same.
    passed = cli(project, WITH_KEY, *gate, "--allow-unsigned")
    assert passed.exit_code == 0, passed.stdout
    assert passed.doc["policy"]["require_signature"] is False
    assert cli(project, WITH_KEY, *verify, "--allow-unsigned").exit_code == 0
    both = cli(project, WITH_KEY, *gate, "--allow-unsigned", "--require-signature")
    assert (both.exit_code, error_of(both)["code"]) == (2, "DPONE_USAGE")
    # Without any key nothing can be verified, and nothing is required.
    assert cli(project, {}, *gate).exit_code == 0


def test_the_gate_blocks_a_segment_the_index_does_not_list(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    first = assert_succeeds(run(project, {}))
    segments = project / ".dpone" / "dlq" / "runs" / first["run_id"] / "segments"
    planted = segments / "00000099.jsonl"
    shutil.copy(segments / "00000001.jsonl", planted)
    gate = ("ops", "release-gate", first["evidence"], "--output", "gate", *LIFTED)

    blocked = cli(project, {}, *gate)

    assert blocked.exit_code == 1
    [result] = blocked.doc["bundles"]
    assert [f["code"] for f in result["findings"]] == ["DPONE_GATE_DLQ_UNLISTED_SEGMENT"]
    verified = cli(project, {}, "ops", "dlq", "verify", "--dir", ".dpone/dlq")
    assert "DPONE_DLQ_SEGMENT_UNLISTED" in {f["code"] for f in verified.doc["findings"]}
    planted.unlink()
    assert cli(project, {}, *gate).exit_code == 0


# --- retention ----------------------------------------------------------------------------------


@pytest.fixture
def seeded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Path:
    """A DLQ written in the past: run-a closed (4 records, 2 acknowledged), run-b closed (2,
    none acknowledged); every record has expired by LATER. Signed when the test asks."""
    if getattr(request, "param", False):
        monkeypatch.setenv("DPONE_SIGNING_KEY", KEY)
    store = DlqStore(tmp_path / "dlq", clock=FrozenClock(T0))
    with store.open_run("run-a", "load-a", pipeline="orders") as writer:
        ids = writer.write_chunk(rows(4))
    ack(store, "run-a", ids[:2])
    with store.open_run("run-b", "load-b", pipeline="orders") as writer:
        writer.write_chunk(rows(2, "data/b.csv"))
    monkeypatch.delenv("DPONE_SIGNING_KEY", raising=False)
    pins = tmp_path / "pins" / "orders" / "run-a"
    pins.mkdir(parents=True)
    ref = "../../../dlq/runs/run-a/index.json"
    (pins / "data_contract_evidence.json").write_text(
        json.dumps(with_checksum({"run_id": "run-a", "dlq": {"index_ref": ref}}))
    )
    return tmp_path


def plan(root: Path, env: dict[str, str], out: str, *extra: str) -> Path:
    made = cli(root, env, "ops", "retention", "plan", "--dir", "dlq", "--now", LATER.isoformat(),
               "--output", out, *extra)  # fmt: skip
    assert made.exit_code == 0, made.stdout + made.stderr
    return root / out


def apply(root: Path, env: dict[str, str], plan_file: Path, *extra: str) -> CliRun:
    return cli(root, env, "ops", "retention", "apply", str(plan_file), *extra)


def store_files(root: Path) -> dict[str, str]:
    return snapshot(root / "dlq")


def test_apply_pins_what_its_own_command_line_pins(seeded: Path) -> None:
    honest = plan(seeded, {}, "honest.json", "--pin-evidence", "pins")
    assert read(honest)["pinned_runs"] == ["run-a"]
    # The attacker swaps in a plan of their own, made without the pin (a valid plan_id).
    swapped = plan(seeded, {}, "swapped.json")
    honest.write_bytes(swapped.read_bytes())
    before = store_files(seeded)

    refused = apply(seeded, {}, honest, "--pin-evidence", "pins")

    assert refused.exit_code == 2
    assert error_of(refused)["code"] == "DPONE_DLQ_RETENTION_PLAN_INVALID"
    assert store_files(seeded) == before
    # An honest plan applies: run-a stays whole, run-b's acknowledged records (none) stay.
    fresh = plan(seeded, {}, "fresh.json", "--pin-evidence", "pins")
    applied = apply(seeded, {}, fresh, "--pin-evidence", "pins")
    assert applied.exit_code == 0, applied.stdout + applied.stderr
    assert len(record_ids_on_disk(seeded / "dlq", "run-a")) == 4


@pytest.mark.parametrize("how", ["made", "edited"])
def test_apply_deletes_unacknowledged_records_only_when_told_so_itself(
    seeded: Path, how: str
) -> None:
    if how == "made":
        plan_file = plan(seeded, {}, "plan.json", "--include-unacknowledged")
    else:  # a plan that deletes nothing unacknowledged, flipped and its plan_id recomputed
        plan_file = plan(seeded, {}, "plan.json")
        doc = read(plan_file)
        doc["include_unacknowledged"] = True
        body = {k: v for k, v in doc.items() if k not in ("plan_id", "created_at")}
        doc["plan_id"] = with_checksum(body, "plan_id")["plan_id"]
        plan_file.write_text(json.dumps(doc))
    before = store_files(seeded)

    refused = apply(seeded, {}, plan_file)

    assert refused.exit_code == 2
    error = error_of(refused)
    assert error["code"] == "DPONE_DLQ_RETENTION_PLAN_INVALID"
    assert "--include-unacknowledged" in error["fixes"][0]
    assert store_files(seeded) == before
    if how == "made":  # the operator confirms it on apply's own command line
        applied = apply(seeded, {}, plan_file, "--include-unacknowledged")
        assert applied.exit_code == 0, applied.stdout + applied.stderr
        assert record_ids_on_disk(seeded / "dlq", "run-b") == []


@pytest.mark.parametrize("seeded", [True], indirect=True)
def test_an_unsigned_or_edited_plan_is_refused_with_a_key(seeded: Path) -> None:
    signed = plan(seeded, WITH_KEY, "signed.json")
    assert validly_signed(read(signed))
    forged = plan(seeded, {}, "unsigned.json")  # made by someone without the key
    edited = seeded / "edited.json"
    doc = read(signed)
    doc["created_at"] = "2026-04-15T00:00:00.000000Z"  # outside plan_id, inside the signature
    edited.write_text(json.dumps(doc))
    before = store_files(seeded)

    for plan_file in (forged, edited):
        refused = apply(seeded, WITH_KEY, plan_file)
        assert refused.exit_code == 2
        error = error_of(refused)
        assert error["code"] == "DPONE_DLQ_RETENTION_PLAN_SIGNATURE_INVALID"
        assert plan_file.name in error["message"]
    assert store_files(seeded) == before
    applied = apply(seeded, WITH_KEY, signed)
    assert applied.exit_code == 0, applied.stdout + applied.stderr
    assert len(record_ids_on_disk(seeded / "dlq", "run-a")) == 2
    for run_id in ("run-a", "run-b"):
        assert validly_signed(read(seeded / "dlq" / "runs" / run_id / "index.json"))
    # The opt-out: an unsigned plan of the same store, made now.
    again = plan(seeded, {}, "again.json")
    assert apply(seeded, WITH_KEY, again, "--allow-unsigned").exit_code == 0


def test_apply_stops_at_a_tampered_segment(seeded: Path) -> None:
    plan_file = plan(seeded, {}, "plan.json")
    assert read(plan_file)["totals"]["delete"] == 2
    segment = seeded / "dlq" / "runs" / "run-a" / "segments" / "00000001.jsonl"
    lines = segment.read_text().splitlines(keepends=True)
    lines[0] = lines[0].replace('"schema.type_mismatch"', '"schema.type_mismatcx"')
    segment.write_text("".join(lines))
    before = store_files(seeded)

    refused = apply(seeded, {}, plan_file)

    assert refused.exit_code != 0
    error = error_of(refused)
    assert error["code"] == "DPONE_DLQ_CHECKSUM_MISMATCH"
    assert "run-a" in error["message"]
    assert store_files(seeded) == before


# --- replay -------------------------------------------------------------------------------------


def test_replay_execute_refuses_an_unsigned_plan_with_a_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DPONE_SIGNING_KEY", KEY)
    duck = Pipeline(tmp_path, "duckdb", "analytics")
    run_id = duck.quarantine_run()
    printed = duck.replay(run_id, "--manifest", str(duck.manifest), "--format", "json").doc
    assert validly_signed(printed)
    stripped = tmp_path / "stripped.json"
    stripped.write_text(json.dumps({k: v for k, v in printed.items() if k != "signature"}))

    refused = duck.execute(run_id, "--plan", str(stripped))

    assert refused.exit_code == 2
    assert refused.doc["code"] == "DPONE_DLQ_REPLAY_PLAN_SIGNATURE_INVALID"
    assert "stripped.json" in refused.doc["message"]
    assert duck.amounts() == FIRST_LOAD
    assert duck.acked(run_id) == []
    applied = duck.execute(run_id, "--plan", str(stripped), "--allow-unsigned")
    assert applied.exit_code == 0, applied.stdout
    assert duck.amounts() == FIRST_LOAD | REPLAYED
