"""A worker killed mid-task is retried by Dask and the run is still exactly once; a run against
a scheduler and two workers started as processes of their own; validate without the extra."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dpone import api
from dpone.manifest import engine_checks
from dpone.runtime.scaleout.task import FAULT_ENV
from tests.scaleout.conftest import outcome, same_result, write_manifest
from tests.scaleout.test_dask_engine import DASK, _csv_files

CSV = {"type": "file", "format": "csv", "path": "data/*.csv"}


@pytest.mark.dask
@pytest.mark.slow
def test_a_worker_killed_mid_task_is_retried_exactly_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _csv_files(tmp_path, files=3, rows=2000)
    local = outcome(write_manifest(tmp_path, "kill_local", "local", CSV))
    # The workers of the local cluster inherit it: partition 1's task os._exit()s once, after
    # its second chunk's DLQ segment and staged file are published.
    monkeypatch.setenv(FAULT_ENV, "1")
    dask = outcome(write_manifest(tmp_path, "kill_dask", "dask", CSV, **DASK))
    fired = list((dask["work"] / "scaleout").glob("*.fault-fired"))
    assert len(fired) == 1, "the fault point never fired"
    same_result(local, dask)
    assert (
        dask["report"]["rows"]["loaded"] == local["report"]["rows"]["loaded"] == 3 * 2000 - 3 * 21
    )


@pytest.fixture
def external_cluster(tmp_path: Path) -> Iterator[str]:
    """``dask scheduler`` and two ``dask worker`` processes on 127.0.0.1; the address."""
    scheduler_file = tmp_path / "scheduler.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPONE_")}
    common = ["--no-dashboard"]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
             "--port", "0", "--scheduler-file", str(scheduler_file), *common],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
    ]  # fmt: skip
    try:
        while not scheduler_file.exists():
            assert procs[0].poll() is None, "the scheduler exited"
            time.sleep(0.2)
        for _ in range(2):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file",
                     str(scheduler_file), "--nthreads", "1", "--host", "127.0.0.1", *common],
                    env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )
            )  # fmt: skip
        from distributed import Client

        with Client(scheduler_file=str(scheduler_file), timeout="60s") as client:
            client.wait_for_workers(2, timeout=120)
        yield str(json.loads(scheduler_file.read_text())["address"])
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.mark.dask
@pytest.mark.slow
def test_a_run_on_an_external_scheduler_and_workers(tmp_path: Path, external_cluster: str) -> None:
    _csv_files(tmp_path, files=4, rows=800)
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
