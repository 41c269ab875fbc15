"""Trust boundaries: what dpone reads back (markers, journal, state, ids, column names) is input.

Each test performs the attack through the CLI (``python -m dpone`` in a process of its own)
on a project in ``tmp_path`` and asserts that nothing outside the folders dpone may write
changed, that the error is a typed ``DPONE_*`` code with a fix and no traceback, and that a
later run works (after the planted file is moved aside, as the fix says, or directly).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

from dpone.canonical import with_checksum
from tests.support.processes import CliRun, dpone_subprocess

PIPELINE = "sec_pipe"
CANARY = f"canary{uuid.uuid4().hex}"


# --- a project and its observation -------------------------------------------------------------


def make_project(
    root: Path,
    *,
    csv: str = "id,name\n1,a\n2,b\nx,c\n",
    enforcement: str = "quarantine",
    evolution: str = "evolve",
    pii_policy: str = "reference_only",
    name: str = PIPELINE,
) -> Path:
    project = root / "proj"
    (project / "data").mkdir(parents=True, exist_ok=True)
    (project / "data" / "a.csv").write_text(csv)
    (project / "manifest.yaml").write_text(
        f"""name: {json.dumps(name)}
source: {{type: file, format: csv, path: data/*.csv}}
sink:
  type: filesystem
  path: lake
  dataset: ds
  table: t
  options:
    schema_contract:
      enforcement: {enforcement}
      columns:
        id: {{type: integer}}
      evolution: {{tables: evolve, columns: {evolution}, data_type: freeze}}
    dlq: {{pii_policy: {pii_policy}}}
"""
    )
    return project


def dpone(project: Path, *args: str) -> CliRun:
    proc = dpone_subprocess([*args, "--format", "json"], cwd=project, env={}, timeout=120)
    return CliRun(proc.returncode, proc.stdout, proc.stderr)


def run(project: Path, *args: str) -> CliRun:
    return dpone(project, "run", "manifest.yaml", *args)


def snapshot(root: Path, allowed: tuple[Path, ...] = ()) -> dict[str, str]:
    """Every file and link under ``root`` outside the ``allowed`` folders -> its content hash."""
    out: dict[str, str] = {}
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        dirs[:] = [d for d in dirs if here / d not in allowed]
        for name in files + [d for d in dirs if (here / d).is_symlink()]:
            path = here / name
            key = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[key] = "link:" + os.readlink(path)
            else:
                out[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def error_of(result: CliRun) -> dict[str, Any]:
    """The typed error a failed invocation printed (an error document or a run report's)."""
    assert "Traceback" not in result.stderr + result.stdout
    doc = result.doc
    error: dict[str, Any] = doc["error"] if doc.get("schema") == "dpone.run.v1" else doc
    assert error["code"].startswith("DPONE_"), error
    assert error["code"] != "DPONE_INTERNAL", error
    assert error["fixes"], error
    return error


def assert_succeeds(result: CliRun) -> dict[str, Any]:
    assert result.exit_code == 0, result.stdout + result.stderr
    doc: dict[str, Any] = result.doc
    assert doc["status"] == "succeeded"
    return doc


# --- 1 + 9: filesystem sink markers, staging tokens, committed files ---------------------------


def _plant_marker(project: Path, adds: Any, removes: Any, target: str = "ds.t") -> list[Path]:
    """A marker + staging token an attacker with write access to the sink folder could make:
    well-formed, with a freshly computed checksum. Returns what was planted."""
    lake = project / "lake"
    load_id = "01EVIL000000000000000000LD"
    token = "0" * 32
    staging = lake / "_dpone_staging" / load_id
    staging.mkdir(parents=True)
    token_doc = {
        "schema": "dpone.sink-staging-token.v1",
        "load_id": load_id,
        "pipeline": PIPELINE,
        "target": target,
        "token": token,
    }
    (staging / "_load.json").write_text(json.dumps(with_checksum(token_doc)))
    real = json.loads(next((lake / "_dpone_loads").glob("*.json")).read_text())
    marker = dict(real, load_id=load_id, seq=99, staging_token=token, target=target)
    marker.update(adds=adds, removes=removes)
    marker_path = lake / "_dpone_loads" / f"{load_id}.json"
    marker_path.write_text(json.dumps(with_checksum(marker)))
    return [marker_path, staging]


@pytest.mark.parametrize("attack", ["absolute", "dotdot", "symlink", "empty", "array", "not_json"])
def test_a_planted_marker_never_acts_outside_the_sink(tmp_path: Path, attack: str) -> None:
    project = make_project(tmp_path)
    assert_succeeds(run(project))
    victim, payload, target = tmp_path / "victim.txt", tmp_path / "payload.txt", tmp_path / "t.txt"
    for path in (victim, payload, target):
        path.write_text(path.name)
    lake = project / "lake"
    if attack == "absolute":
        planted = _plant_marker(project, [[str(payload), str(target)]], [str(victim)])
    elif attack == "dotdot":
        planted = _plant_marker(
            project, [["../../payload.txt", "../../t.txt"]], ["ds/t/../../../../victim.txt"]
        )
    elif attack == "symlink":
        # A table folder that is a link out of the sink: names inside it look harmless.
        outside = tmp_path / "outside"
        outside.mkdir()
        (outside / "victim.parquet").write_text("victim")
        link = lake / "ds" / "evil"
        link.symlink_to(outside, target_is_directory=True)
        planted = [link, *_plant_marker(project, [], ["ds/evil/victim.parquet"], "ds.evil")]
    else:
        planted = [lake / "_dpone_loads" / "01EVIL000000000000000000LD.json"]
        text = {"empty": "{}", "array": "[]", "not_json": "{not json"}[attack]
        planted[0].write_text(text)
    before = snapshot(tmp_path, allowed=(project / ".dpone", lake))

    failed = run(project)

    assert failed.exit_code == 1
    assert error_of(failed)["code"] == "DPONE_SINK_MARKER_INVALID"
    assert snapshot(tmp_path, allowed=(project / ".dpone", lake)) == before
    assert victim.read_text() == "victim.txt"
    assert target.read_text() == "t.txt"
    # The fix: move the planted files out of the sink folder, then rerun.
    for path in planted:
        if path.is_symlink() or path.is_file():
            path.unlink()
        else:
            shutil.rmtree(path)
    assert_succeeds(run(project))


def test_a_corrupt_committed_parquet_file_is_a_typed_error(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    assert_succeeds(run(project))
    (committed,) = (project / "lake" / "ds" / "t").glob("*.parquet")
    backup = committed.read_bytes()
    committed.write_bytes(b"PAR1 this is not parquet at all")
    before = snapshot(tmp_path, allowed=(project / ".dpone",))

    failed = run(project)

    assert failed.exit_code == 1
    assert error_of(failed)["code"] == "DPONE_SINK_FILE_CORRUPT"
    assert snapshot(tmp_path, allowed=(project / ".dpone",)) == before
    committed.write_bytes(backup)  # the fix: restore the file
    assert_succeeds(run(project))


# --- 2: the run journal and the state file -----------------------------------------------------


def _journal(project: Path) -> Path:
    return project / ".dpone" / "runs" / f"{PIPELINE}.journal.json"


@pytest.mark.parametrize(
    "attack", ["evidence_elsewhere", "foreign_pipeline", "empty", "array", "not_json"]
)
def test_an_edited_journal_is_refused_before_recovery_acts(tmp_path: Path, attack: str) -> None:
    project = make_project(tmp_path)
    first = assert_succeeds(run(project))
    journal = _journal(project)
    if attack in ("evidence_elsewhere", "foreign_pipeline"):
        evidence = json.loads((project / first["evidence"]).read_text())
        del evidence["sha256"]
        doc = json.loads(journal.read_text())
        del doc["sha256"]
        # "The run died after its sink commit": recovery would publish this evidence.
        doc.update(phase="running", load_id=first["load_id"], evidence=evidence)
        if attack == "evidence_elsewhere":
            evidence.update(pipeline="../../..", run_id="planted")
        else:
            doc["pipeline"] = "../../.."
        journal.write_text(json.dumps(with_checksum(doc)))
    else:
        journal.write_text({"empty": "{}", "array": "[]", "not_json": "{"}[attack])
    lake = project / "lake"
    before = snapshot(tmp_path, allowed=(project / ".dpone", lake))

    failed = run(project)

    assert failed.exit_code == 1
    error = error_of(failed)
    assert error["code"] == "DPONE_JOURNAL_INVALID"
    assert "dpone ops dlq verify" in error["fixes"][0]
    assert snapshot(tmp_path, allowed=(project / ".dpone", lake)) == before
    assert not (tmp_path / "planted").exists()
    # The fix: verify (and repair) the DLQ, move the journal aside, rerun.
    verified = dpone(project, "ops", "dlq", "verify", "--dir", ".dpone/dlq", "--repair")
    assert verified.exit_code == 0, verified.stdout + verified.stderr
    journal.rename(project / "journal.moved-aside")
    assert_succeeds(run(project))


@pytest.mark.parametrize("attack", ["empty", "foreign_pipeline"])
def test_an_edited_state_file_is_a_typed_error(tmp_path: Path, attack: str) -> None:
    project = make_project(tmp_path)
    assert_succeeds(run(project))
    state = project / ".dpone" / "state" / f"{PIPELINE}.json"
    if attack == "empty":
        state.write_text("{}")
    else:
        doc = json.loads(state.read_text())
        del doc["sha256"]
        doc["pipeline"] = "../../.."
        state.write_text(json.dumps(with_checksum(doc)))
    before = snapshot(tmp_path, allowed=(project / ".dpone", project / "lake"))

    failed = run(project)

    assert failed.exit_code == 1
    assert error_of(failed)["code"] in ("DPONE_STATE_INVALID", "DPONE_STATE_CHECKSUM_MISMATCH")
    assert snapshot(tmp_path, allowed=(project / ".dpone", project / "lake")) == before
    state.unlink()  # the fix: restore it, or delete it for a full reload
    assert_succeeds(run(project))


# --- 3: identifiers are checked whole, before anything is written ------------------------------


@pytest.mark.parametrize("run_id", ["../../x", "abc\n", ".hidden", "a/b", "", "x" * 129])
def test_an_unsafe_run_id_is_refused_before_anything_is_written(
    tmp_path: Path, run_id: str
) -> None:
    project = make_project(tmp_path)
    before = snapshot(tmp_path)

    refused = run(project, "--run-id", run_id)

    assert refused.exit_code == 2
    assert error_of(refused)["code"] == "DPONE_USAGE"
    assert snapshot(tmp_path) == before  # no evidence, no journal, no lock, no DLQ run
    assert_succeeds(run(project, "--run-id", "nightly-2026-01-31"))


def test_a_pipeline_name_with_a_trailing_newline_is_refused(tmp_path: Path) -> None:
    project = make_project(tmp_path, name=f"{PIPELINE}\n")
    before = snapshot(tmp_path)

    refused = run(project)

    assert refused.exit_code == 2
    assert error_of(refused)["code"] == "DPONE_MANIFEST_PATTERN"
    assert snapshot(tmp_path) == before
    make_project(tmp_path)
    assert_succeeds(run(project))


# --- 5: column names taken from data never reach an artifact -----------------------------------


@pytest.mark.parametrize("pii_policy", ["reference_only", "masked"])
@pytest.mark.parametrize("evolution", ["freeze", "discard_row", "evolve"])
def test_a_headerless_file_is_refused_without_its_first_row_in_any_artifact(
    tmp_path: Path, pii_policy: str, evolution: str
) -> None:
    project = make_project(tmp_path, csv="id\n1\n", evolution=evolution, pii_policy=pii_policy)
    assert_succeeds(run(project))
    # A file without its header row: its first row's values would become the column names.
    (project / "data" / "a.csv").write_text(f"{CANARY},7\n5,{CANARY}x\n")

    result = run(project)

    assert result.exit_code == 1
    error = error_of(result)
    assert error["code"] == "DPONE_SOURCE_HEADER_LOOKS_LIKE_DATA"
    assert any("header: false" in fix for fix in error["fixes"])
    assert CANARY not in result.stdout + result.stderr
    # Every file dpone wrote outside the sink (which holds the rows by design).
    for path in project.rglob("*"):
        if path.is_file() and not path.is_relative_to(project / "lake"):
            if path.is_relative_to(project / "data"):
                continue
            assert CANARY.encode() not in path.read_bytes(), path.relative_to(project)
    (project / "data" / "a.csv").write_text("id\n5\n")  # the fix: put the header row back
    assert_succeeds(run(project))


@pytest.mark.parametrize("pii_policy", ["reference_only", "masked", "preserve"])
def test_every_pii_policy_keeps_the_real_column_names(tmp_path: Path, pii_policy: str) -> None:
    # Column names are schema, not row values: shown as written under every policy.
    project = make_project(tmp_path, csv="id\n1\n", evolution="discard_row", pii_policy=pii_policy)
    assert_succeeds(run(project))
    (project / "data" / "a.csv").write_text("id,Note É\n5,x\n")
    assert_succeeds(run(project))
    (segment,) = (project / ".dpone" / "dlq" / "runs").glob("*/segments/*.jsonl")
    record = json.loads(segment.read_text().splitlines()[0])
    assert record["reason"]["column"] == "Note É"
    assert record["diagnostics"]["column"] == "Note É"
    if pii_policy == "preserve":
        assert record["payload"]["value"] == {"id": "5", "Note É": "x"}
