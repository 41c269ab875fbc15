"""A legacy ``quarantine.dir`` manifest end to end (SPEC §11, seed 004's migration window):
``dpone run`` as a process of its own into a DuckDB file on disk and into the PostgreSQL
server keeps the raw JSONL export and writes the canonical DLQ; ``QuarantineService``
replays from the canonical DLQ and never reports a success it did not achieve."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from dpone.dlq.store import DlqStore
from dpone.errors import PathIsSymlink
from dpone.ops.quarantine import LegacyReplayFailed, QuarantineExportInvalid, QuarantineService
from dpone.ops.replay.errors import ReplaySourceChanged
from dpone.published import schema_errors
from tests.support.processes import dpone_subprocess
from tests.support.replay_pipeline import (
    CANARY,
    FIRST_LOAD,
    REPLAYED,
    ROWS,
    Pipeline,
    make_pipeline,
)

LEGACY = {"dir": "legacy_q"}
#: the rows that quarantine (ids 2 and 4 pass once the scale is 3; id 5 never does)
REJECTED = {2, 4, 5}
#: ROWS without the row that never passes: a replay of these can apply every row
FIXABLE = tuple(row for row in ROWS if row[0] != "5")


@pytest.fixture(params=["duckdb", pytest.param("postgres", marks=pytest.mark.postgres)])
def pipeline(request: pytest.FixtureRequest, tmp_path: Path) -> Pipeline:
    """The pipeline against a DuckDB file on disk and against the PostgreSQL server."""
    return make_pipeline(request, tmp_path, str(request.param))


def _legacy_run(pipeline: Pipeline, rows: tuple[tuple[str, str, str], ...] = ROWS) -> str:
    """``dpone run`` of the legacy manifest in a process of its own; the run id."""
    pipeline.write_csv(rows)
    pipeline.write_manifest(quarantine=LEGACY)
    proc = dpone_subprocess(
        ["run", str(pipeline.manifest), "--format", "json"], cwd=pipeline.root, env=pipeline.env
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "DPONE_MANIFEST_DEPRECATED_KEY" in proc.stderr  # the run says the key is deprecated
    report: dict[str, Any] = json.loads(proc.stdout)
    assert schema_errors(report, "dpone.run.v1") == []
    assert report["status"] == "succeeded"
    run_id: str = report["dlq"]["run_id"]
    assert report["dlq"]["records"] == len([r for r in rows if int(r[0]) in REJECTED])
    return run_id


def _fix_contract(pipeline: Pipeline) -> None:
    """Scale 3 in the manifest and in the target: rows 2 and 4 pass now."""
    pipeline.write_manifest(scale=3, quarantine=LEGACY)
    pipeline.migrate_amount()


def _service(pipeline: Pipeline) -> QuarantineService:
    return QuarantineService.from_manifest(pipeline.manifest)


def _row_number(ref: str) -> int:
    return int(ref.rsplit("row=", 1)[1])


def test_run_keeps_the_raw_export_and_writes_the_canonical_dlq(pipeline: Pipeline) -> None:
    run_id = _legacy_run(pipeline)
    assert pipeline.amounts() == FIRST_LOAD
    legacy = pipeline.root / "legacy_q"

    # The raw export: the rejected rows with their values, each file named by its checksum.
    files = sorted((legacy / run_id).iterdir())
    assert files
    exported: dict[str, dict[str, Any]] = {}
    for path in files:
        data = path.read_bytes()
        assert path.name == hashlib.sha256(data).hexdigest() + ".jsonl"
        assert oct(path.stat().st_mode & 0o777) == oct(0o640)
        for line in data.splitlines():
            doc = json.loads(line)
            assert set(doc) == {"record_ref", "reason", "column", "row"}
            exported[doc["record_ref"]] = doc
    assert {_row_number(ref) for ref in exported} == REJECTED  # ids match their data rows here
    ids = {int(doc["row"]["id"]) for doc in exported.values()}
    assert ids == REJECTED
    assert {doc["row"]["name"] for doc in exported.values()} >= {CANARY}
    assert {doc["reason"] for doc in exported.values()} == {"schema.type_mismatch"}

    # The canonical DLQ, in the same folder (no dlq.directory written): the same rows by
    # record_ref, and none of their values.
    store = _store(pipeline)
    records = list(store.iter_records(run_id))
    assert {r.record_ref for r in records} == set(exported)
    assert all(r.payload.value is None for r in records)
    for segment in (legacy / "runs" / run_id / "segments").iterdir():
        assert CANARY.encode() not in segment.read_bytes()
    assert not (pipeline.root / ".dpone" / "dlq").exists()
    verify = pipeline.cli("ops", "dlq", "verify", "--dir", str(legacy), "--format", "json")
    assert verify.exit_code == 0, verify.stdout

    # The legacy service reads the same rows back, verified, in source order.
    service = _service(pipeline)
    assert service.runs() == [run_id]
    rows = service.read(run_id)
    assert [r.record_ref for r in rows] == sorted(exported, key=_row_number)
    assert [int(r.row["id"]) for r in rows] == sorted(REJECTED)


def test_legacy_replay_applies_the_rows(pipeline: Pipeline) -> None:
    run_id = _legacy_run(pipeline, FIXABLE)
    _fix_contract(pipeline)

    replay = _service(pipeline).replay(run_id, manifest=pipeline.manifest, env=pipeline.env)
    assert replay.succeeded
    doc = replay.to_json()
    assert (doc["status"], doc["applied"], doc["pending"]) == ("succeeded", 2, 0)
    assert schema_errors(doc["result"], "dpone.dlq-replay-result.v1") == []
    assert pipeline.amounts() == FIRST_LOAD | REPLAYED
    store = _store(pipeline)
    assert sorted(store.read_acks(run_id)) == sorted(
        r.record_id for r in store.iter_records(run_id)
    )
    assert CANARY not in json.dumps(doc)

    # Again: nothing applied twice, and nothing left to do is still a success.
    again = _service(pipeline).replay(run_id, manifest=pipeline.manifest, env=pipeline.env)
    assert (again.status, again.to_json()["applied"], again.to_json()["already_acknowledged"]) == (
        "succeeded",
        0,
        2,
    )
    assert pipeline.amounts() == FIRST_LOAD | REPLAYED


def test_a_replay_that_leaves_rows_pending_is_reported_failed(pipeline: Pipeline) -> None:
    run_id = _legacy_run(pipeline)

    # The contract is not fixed yet: nothing can be applied.
    with pytest.raises(LegacyReplayFailed) as info:
        _service(pipeline).replay(run_id, manifest=pipeline.manifest, env=pipeline.env)
    assert info.value.code == "DPONE_QUARANTINE_REPLAY_FAILED"
    assert info.value.replay.status == "incomplete"
    assert info.value.replay.to_json()["applied"] == 0
    assert info.value.replay.to_json()["pending"] == 3
    assert CANARY not in str(info.value)
    assert pipeline.amounts() == FIRST_LOAD

    # Fixed: rows 2 and 4 apply, row 5 never passes, and the replay says so.
    _fix_contract(pipeline)
    with pytest.raises(LegacyReplayFailed) as info:
        _service(pipeline).replay(run_id, manifest=pipeline.manifest, env=pipeline.env)
    replay = info.value.replay
    assert not replay.succeeded
    assert (replay.to_json()["applied"], replay.to_json()["pending"]) == (2, 1)
    assert "applied 2 row(s) and left 1 pending" in info.value.message
    assert pipeline.amounts() == FIRST_LOAD | REPLAYED

    # check=False returns the same verdict instead of raising.
    quiet = _service(pipeline).replay(
        run_id, manifest=pipeline.manifest, env=pipeline.env, check=False
    )
    assert quiet.status == "incomplete"
    assert quiet.to_json()["pending"] == 1


def test_a_replay_that_cannot_start_is_reported_failed(pipeline: Pipeline) -> None:
    run_id = _legacy_run(pipeline, FIXABLE)
    _fix_contract(pipeline)
    pipeline.write_csv(ROWS)  # the source file changed: its rows cannot be found again

    with pytest.raises(ReplaySourceChanged):
        _service(pipeline).replay(run_id, manifest=pipeline.manifest, env=pipeline.env)
    failed = _service(pipeline).replay(
        run_id, manifest=pipeline.manifest, env=pipeline.env, check=False
    )
    assert failed.status == "failed"
    assert not failed.succeeded
    doc = failed.to_json()
    assert doc["error"]["code"] == "DPONE_DLQ_REPLAY_SOURCE_CHANGED"
    assert (doc["applied"], doc["result"]) == (0, None)
    assert pipeline.amounts() == FIRST_LOAD
    assert _store(pipeline).read_acks(run_id) == {}


def _store(pipeline: Pipeline) -> DlqStore:
    """The canonical DLQ of the legacy manifest: in its quarantine.dir."""
    return DlqStore(pipeline.root / "legacy_q")


@pytest.fixture
def duck(request: pytest.FixtureRequest, tmp_path: Path) -> Pipeline:
    return make_pipeline(request, tmp_path, "duckdb")


def test_a_tampered_export_is_refused_without_values(duck: Pipeline) -> None:
    run_id = _legacy_run(duck)
    folder = duck.root / "legacy_q" / run_id
    [first, *_] = sorted(folder.iterdir())
    first.write_bytes(first.read_bytes().replace(b'"name"', b'"nome"'))
    with pytest.raises(QuarantineExportInvalid) as info:
        _service(duck).read(run_id)
    assert "does not match the checksum" in info.value.message
    assert CANARY not in str(info.value)

    # A line of another shape under the right name is refused too, by file and line.
    data = b'{"row": {"id": "' + CANARY.encode() + b'"}}\n'
    first.unlink()
    (folder / (hashlib.sha256(data).hexdigest() + ".jsonl")).write_bytes(data)
    with pytest.raises(QuarantineExportInvalid) as info:
        _service(duck).read(run_id)
    assert ":1 does not have the export's shape" in info.value.message
    assert CANARY not in str(info.value)

    # A link where a run folder belongs is not followed.
    outside = duck.root / "elsewhere"
    outside.mkdir()
    (duck.root / "legacy_q" / "linked").symlink_to(outside, target_is_directory=True)
    assert "linked" not in _service(duck).runs()
    with pytest.raises(PathIsSymlink, match="symbolic link"):
        _service(duck).read("linked")


def test_production_refuses_the_run_before_reading(duck: Pipeline) -> None:
    duck.write_csv()
    duck.write_manifest(quarantine=LEGACY, environment="production")
    proc = dpone_subprocess(
        ["run", str(duck.manifest), "--format", "json"], cwd=duck.root, env=duck.env
    )
    assert proc.returncode == 2
    error = json.loads(proc.stdout)
    assert error["code"] == "DPONE_MANIFEST_LEGACY_EXPORT_IN_PRODUCTION"
    assert "Traceback" not in proc.stderr
    assert not (duck.root / "legacy_q").exists()
    assert not (duck.root / "warehouse.duckdb").exists()


def test_reserved_run_ids_are_refused(duck: Pipeline) -> None:
    duck.write_csv()
    duck.write_manifest(quarantine=LEGACY)
    proc = dpone_subprocess(
        ["run", str(duck.manifest), "--run-id", "runs", "--format", "json"],
        cwd=duck.root,
        env=duck.env,
    )
    assert proc.returncode == 2, proc.stdout
    assert "DPONE_QUARANTINE_RUN_ID_RESERVED" in proc.stdout
    assert "Traceback" not in proc.stderr
    assert not (duck.root / "legacy_q" / "runs").exists()
