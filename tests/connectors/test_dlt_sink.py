"""The dlt sink beyond the shared run scenarios (tests/runtime/test_run_dlt.py): dlt imported
only when used, destination names checked without it, the credential never shown, a load that
fails while dlt loads it leaving no row behind, recovery of a package dlt was about to load,
package records that were tampered with."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson
import pytest

from dpone.connectors.errors import SinkMarkerInvalid
from dpone.connectors.sinks import make_sink
from dpone.connectors.sinks.dlt import DltSink
from dpone.manifest.secrets import SecretRef
from dpone.manifest.specs import DltSinkSpec
from dpone.published import load_schema
from tests import dltkit
from tests.support.paths import EXAMPLES
from tests.support.processes import dpone_subprocess
from tests.support.project import TABLE, good, loaded, make_project

from .specs import sink_spec


def _sink(project: Any, base: Path, section: dict[str, Any]) -> DltSink:
    """The project's dlt sink as the compiler builds it, into ``base/warehouse.duckdb``."""
    spec = sink_spec(
        {k: v for k, v in section.items() if k != "credentials"}, base, name=project.name
    )
    assert isinstance(spec, DltSinkSpec)
    warehouse = SecretRef(str(base / "warehouse.duckdb"))
    sink = make_sink(replace(spec, work_dir=project.work_dir, credentials=warehouse), env={})
    assert isinstance(sink, DltSink)
    return sink


ROOT = Path(__file__).resolve().parents[2]


def _schema_destinations() -> list[str]:
    sink = load_schema("dpone.manifest.v1")["properties"]["sink"]
    node = sink["else"]
    while node["if"]["properties"]["type"]["const"] != "dlt":
        node = node["else"]
    names: list[str] = node["then"]["properties"]["destination"]["enum"]
    return names


def test_the_destination_names_are_dlts_registry() -> None:
    """The manifest schema names dlt's destinations so that validating never imports dlt; the
    list must be exactly the destinations the installed dlt registers."""
    from dlt.common.destination.reference import DestinationReference

    registered = sorted(ref.rsplit(".", 1)[1] for ref in DestinationReference.DESTINATIONS)
    assert _schema_destinations() == registered


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, check=False
    )


def test_validating_or_running_without_a_dlt_sink_never_imports_dlt(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    project = make_project(request, tmp_path, "duckdb")
    project.write_csv("a.csv", [good(1)])
    project.write_manifest(enforcement="strict")
    dlt_manifest = EXAMPLES / "dlt_sink" / "manifest.yaml"
    code = (
        "import sys, dpone\n"
        f"assert dpone.validate({str(dlt_manifest)!r}).ok\n"
        f"assert dpone.validate({str(project.manifest_path)!r}).ok\n"
        f"dpone.run({str(project.manifest_path)!r})\n"
        "print('dlt' in sys.modules)\n"
    )
    done = _python(code, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "False"
    assert project.rows() == [loaded(1)]


def test_a_dlt_sink_without_dlt_installed_is_a_clear_error(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    project = make_project(request, tmp_path, "dlt_duckdb")
    project.write_csv("a.csv", [good(1)])
    project.write_manifest(enforcement="strict")
    # ``sys.modules['dlt'] = None`` makes ``import dlt`` raise ImportError, as if absent.
    code = (
        "import sys\n"
        "sys.modules['dlt'] = None\n"
        "from dpone.cli.main import main\n"
        f"sys.argv = ['dpone', 'run', {str(project.manifest_path)!r}, '--format', 'json']\n"
        "main()\n"
    )
    done = _python(code, tmp_path)
    assert done.returncode == 2, done.stderr
    error = json.loads(done.stdout)
    assert error["code"] == "DPONE_DLT_NOT_INSTALLED"
    assert "dpone[dlt]" in " ".join(error["fixes"])
    assert "Traceback" not in done.stdout + done.stderr
    assert project.state_bytes() is None


def test_an_unknown_destination_option_is_refused_before_any_row(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    project = make_project(request, tmp_path, "dlt_duckdb")
    project.sink["destination_options"] = {"replace_stratgy": "insert-from-staging"}
    project.write_csv("a.csv", [good(1)])
    project.write_manifest(enforcement="strict")

    result = project.cli()

    assert result.exit_code == 2
    assert result.doc["code"] == "DPONE_SINK_CONFIG"
    assert "'replace_stratgy'" in result.doc["message"]
    assert project.rows() is None
    assert project.state_bytes() is None


@pytest.mark.postgres
def test_the_credential_never_reaches_an_output_or_a_file(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The password of the PostgreSQL URL (an environment variable the manifest references)
    is in no report, log line, evidence, state, DLQ or dlt file, whether the run succeeds or
    dlt fails to connect."""
    project = make_project(request, tmp_path, "dlt_postgres")
    project.write_csv("a.csv", [good(1), good(2)])
    project.write_manifest(enforcement="quarantine")
    first = project.cli()
    assert first.exit_code == 0, first.stdout
    project.write_csv("b.csv", [good(3)])
    unreachable = dltkit.PG_DLT_URL.replace("127.0.0.1:5432", "127.0.0.1:9")

    failed = project.cli(env={dltkit.PG_ENV: unreachable})

    assert failed.exit_code == 1
    assert failed.doc["error"]["code"] == "DPONE_SINK_UNAVAILABLE"
    assert project.rows() == [loaded(1), loaded(2)]
    outputs = first.stdout + first.stderr + failed.stdout + failed.stderr
    assert dltkit.PG_SECRET not in outputs
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert dltkit.PG_SECRET.encode() not in path.read_bytes(), path
    project.check_artifacts()


@pytest.mark.parametrize(
    "kind",
    [
        "dlt_duckdb",
        pytest.param("dlt_postgres", marks=pytest.mark.postgres),
        "dlt_filesystem",
        "dlt_sqlalchemy",
    ],
)
def test_an_append_that_fails_while_dlt_loads_leaves_no_row_of_it(
    kind: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """dlt fails after the destination took the rows and before ``_dlt_loads`` records the
    package: the run fails, and the rows it appended are deleted again (by their
    ``_dlt_load_id``), so the next run, which reads them again (the cursor did not move),
    loads them once."""
    from dlt.load.load import Load

    project = make_project(request, tmp_path, kind)
    project.write_csv("a.csv", [good(1), good(2)])
    project.write_manifest(enforcement="strict", incremental=True)
    assert project.run()["exit_code"] == 0
    state_before = project.state_bytes()
    project.write_csv("b.csv", [good(3), good(4)])
    complete = Load.complete_package

    def failing(self: Any, load_id: str, schema: Any, aborted: bool = False) -> None:
        if not aborted:
            raise RuntimeError("the destination went away")
        complete(self, load_id, schema, aborted)

    monkeypatch.setattr(Load, "complete_package", failing)
    report = project.run()

    assert report["exit_code"] == 1
    assert report["error"]["code"] == "DPONE_SINK_FAILED"
    assert "RuntimeError" in report["error"]["message"]
    assert project.rows() == [loaded(1), loaded(2)]
    assert project.state_bytes() == state_before
    assert dltkit.pending_packages(project.work_dir, project.name) == []
    assert not (dltkit.sink_root(project.work_dir, project.name) / "dropped").exists() or not [
        *(dltkit.sink_root(project.work_dir, project.name) / "dropped").iterdir()
    ]

    monkeypatch.setattr(Load, "complete_package", complete)
    again = project.run()
    assert again["exit_code"] == 0
    assert project.rows() == [loaded(i) for i in (1, 2, 3, 4)]
    assert [m["rows"] for m in project.load_markers()] == [2, 2]


def test_a_run_killed_before_its_package_loads_is_finished_by_the_next(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The package was normalized and recorded when the process died: the next run loads it
    (dlt's loader resumes it), publishes the dead run's evidence, advances the state to it,
    and only then loads its own rows."""
    project = make_project(request, tmp_path, "dlt_duckdb")
    project.write_csv("a.csv", [good(1), good(2)])
    project.write_manifest(enforcement="quarantine", incremental=True)
    killed = dpone_subprocess(
        ["run", str(project.manifest_path), "--run-id", "killed", "--format", "json"],
        cwd=project.root,
        env=project.env,
        fault="dlt_before_load",
    )
    assert killed.returncode < 0, killed.stderr
    assert project.rows() is None
    assert len(dltkit.pending_packages(project.work_dir, project.name)) == 1

    project.write_csv("b.csv", [good(3)])
    report = project.run()

    assert report["exit_code"] == 0
    assert [(r["run_id"], r["action"]) for r in report["recovered"]] == [("killed", "finished")]
    assert project.rows() == [loaded(1), loaded(2), loaded(3)]
    markers = project.load_markers()
    assert [(m["run_id"], m["rows"]) for m in markers] == [("killed", 2), (report["run_id"], 1)]
    assert project.evidence("killed")["execution_status"] == "succeeded"
    assert project.state()["revision"] == 2
    assert dltkit.pending_packages(project.work_dir, project.name) == []
    project.check_artifacts()


def test_an_unrecorded_package_is_dropped_not_loaded(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """A package dlt extracted whose record was never written (the process died between the
    two) never reached dlt's loader: recovery drops it."""
    import pyarrow as pa

    project = make_project(request, tmp_path, "dlt_duckdb")
    sink = _sink(project, tmp_path, {**project.sink, "strategy": {"mode": "append"}})
    assert isinstance(sink, DltSink)
    pipe = sink.pipeline()
    rows = pa.table({"id": pa.array([7], pa.int64())})
    pipe.extract(sink.dlt.resource([rows], name="stray", table_name=TABLE))
    pipe.normalize()
    assert len(dltkit.pending_packages(project.work_dir, project.name)) == 1

    sink.cleanup_abandoned(project.name)

    assert dltkit.pending_packages(project.work_dir, project.name) == []
    assert project.read_table() is None
    assert dltkit.dlt_loads(project.kind, project.root, project.sink) == {}


def test_a_tampered_package_record_is_refused(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    project = make_project(request, tmp_path, "dlt_duckdb")
    project.write_csv("a.csv", [good(1)])
    project.write_manifest(enforcement="strict")
    report = project.run()
    record = (
        dltkit.sink_root(project.work_dir, project.name)
        / "packages"
        / (report["load_id"] + ".json")
    )
    doc = orjson.loads(record.read_bytes())
    doc["rows"] = 1000
    record.write_bytes(orjson.dumps(doc))
    sink = _sink(project, tmp_path, project.sink)

    with pytest.raises(SinkMarkerInvalid) as info:
        sink.committed_load(report["load_id"])
    assert "checksum" in info.value.message


def test_jsonl_files_in_a_local_bucket(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    project = make_project(request, tmp_path, "dlt_filesystem")
    project.sink["loader_file_format"] = "jsonl"
    project.write_csv("a.csv", [good(1), good(2)])
    project.write_manifest(enforcement="strict")

    assert project.run()["exit_code"] == 0

    files = sorted((tmp_path / "lake" / "analytics" / TABLE).iterdir())
    assert [f.name.endswith(".jsonl.gz") for f in files] == [True]  # dlt gzips its files
    table = project.read_table()
    assert table is not None
    assert sorted(table.column("id").to_pylist()) == [1, 2]
    assert sorted(table.column("name").to_pylist()) == ["n1", "n2"]


def test_the_example_runs_into_dlts_duckdb(tmp_path: Path) -> None:
    import shutil

    import duckdb

    shutil.copytree(EXAMPLES / "dlt_sink", tmp_path / "dlt_sink")
    manifest = tmp_path / "dlt_sink" / "manifest.yaml"
    for _ in range(2):  # merge: the second run changes nothing
        done = dpone_subprocess(["run", str(manifest), "--format", "json"], cwd=tmp_path, env={})
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert (report["rows"]["loaded"], report["rows"]["quarantined"]) == (7, 3)
    with duckdb.connect(str(tmp_path / "dlt_sink" / ".dpone" / "payments.duckdb")) as con:
        assert con.sql("SELECT count(*) FROM finance.payments").fetchall() == [(7,)]
        loads = con.sql("SELECT status FROM finance._dlt_loads").fetchall()
    assert loads == [(0,), (0,)]
