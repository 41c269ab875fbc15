"""A worker killed mid-task is retried by Dask and the run is still exactly once; a run against
a scheduler and two workers started as processes of their own; validate without the extra."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dpone import api
from dpone.manifest.checks import engine as engine_checks
from dpone.runtime.scaleout.task import FAULT_ENV
from tests.support.scaleout import OWN_CLUSTER, csv_files, outcome, same_result, write_manifest

CSV = {"type": "file", "format": "csv", "path": "data/*.csv"}


@pytest.mark.dask
@pytest.mark.slow
def test_a_worker_killed_mid_task_is_retried_exactly_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    csv_files(tmp_path, files=3, rows=2000)
    local = outcome(write_manifest(tmp_path, "kill_local", "local", CSV))
    # The run starts (and closes) a LocalCluster of its own, whose workers inherit this: partition
    # 1's task os._exit()s once, after its second chunk's DLQ segment and staged file are
    # published.
    monkeypatch.setenv(FAULT_ENV, "1")
    dask = outcome(write_manifest(tmp_path, "kill_dask", "dask", CSV, **OWN_CLUSTER))
    fired = list((dask["work"] / "scaleout").glob("*.fault-fired"))
    assert len(fired) == 1, "the fault point never fired"
    same_result(local, dask)
    assert (
        dask["report"]["rows"]["loaded"] == local["report"]["rows"]["loaded"] == 3 * 2000 - 3 * 21
    )


@pytest.mark.dask
@pytest.mark.slow
def test_a_run_on_an_external_scheduler_and_workers(tmp_path: Path, external_cluster: str) -> None:
    csv_files(tmp_path, files=4, rows=800)
    local = outcome(write_manifest(tmp_path, "ext_local", "local", CSV))
    dask = outcome(
        write_manifest(tmp_path, "ext_dask", "dask", CSV, dask={"address": external_cluster})
    )
    same_result(local, dask)


def test_validate_refuses_engine_dask_without_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_manifest(tmp_path, "noextra", "dask", CSV)
    monkeypatch.setattr(engine_checks, "dask_installed", lambda: False)
    result = api.validate(path)
    codes = [e.code for e in result.errors]
    assert codes == ["DPONE_MANIFEST_ENGINE_UNAVAILABLE"]
    assert result.errors[0].pointer == "/runtime/engine"


def test_validate_refuses_unique_columns_with_engine_dask(tmp_path: Path) -> None:
    path = write_manifest(tmp_path, "uniq", "dask", CSV)
    text = path.read_text().replace(
        "min_rows_per_load: 1", "min_rows_per_load: 1\n    unique_columns: [id]"
    )
    path.write_text(text)
    codes = [e.code for e in api.validate(path).errors]
    assert codes == ["DPONE_MANIFEST_ENGINE_UNSUPPORTED"]


def test_validating_an_engine_dask_manifest_never_imports_dask(tmp_path: Path) -> None:
    path = write_manifest(tmp_path, "noimport", "dask", CSV)
    code = (
        "import sys, dpone.api as a; v = a.validate(sys.argv[1]); "
        "assert not v.errors, v.errors; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
